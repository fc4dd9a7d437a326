"""Between Pulsar's message format and the ledger's rows.

Incoming: one ``CommandSend`` holds one entry: a single message, or a batch of
``num_messages_in_batch`` messages, each ``[u32 size][SingleMessageMetadata]
[payload]``, the whole payload possibly compressed (LZ4 block, ZLIB, ZSTD,
SNAPPY raw). :func:`entry_of_send` turns it into the :class:`~core.producer.Entry`
the broker appends, one message per row.

Outgoing: :func:`entry_payload` rebuilds an entry from the rows a dispatch
picked. A batch is always sent whole-sized (``num_messages_in_batch`` = the
stored batch size) so that batch indexes keep their meaning; the indexes not
delivered this time (acknowledged, or held by another consumer) are empty
placeholders whose ``ack_set`` bit is clear, so the client skips them, as it
skips what Pulsar's broker marks acknowledged in the ``ack_set``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam

from core.producer import Entry, OutgoingMessage
from protocol import commands
from protocol.commands import CompressionType
from protocol.proto import Proto, ProtoError, decode, encode

_U32 = struct.Struct(">I")
_INT64_MAX = 2**63 - 1

# cramjam's buffers are bytes-like; bytes() copies them once.
_MAX_UNCOMPRESSED = 64 * 1024 * 1024


class EntryError(ValueError):
    """A message the broker cannot store (bad batch layout, bad compression)."""


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    if codec == CompressionType.NONE:
        return data
    if not 0 <= uncompressed_size <= _MAX_UNCOMPRESSED:
        raise EntryError(f"uncompressed size {uncompressed_size} out of range")
    try:
        if codec == CompressionType.LZ4:
            out = bytes(cramjam.lz4.decompress_block(data, output_len=uncompressed_size))
        elif codec == CompressionType.ZLIB:
            out = zlib.decompress(data)
        elif codec == CompressionType.ZSTD:
            out = bytes(cramjam.zstd.decompress(data))
        elif codec == CompressionType.SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(data))
        else:
            raise EntryError(f"unknown compression {codec}")
    except (cramjam.DecompressionError, zlib.error) as exc:
        raise EntryError(f"cannot decompress ({CompressionType(codec).name}): {exc}") from exc
    if len(out) != uncompressed_size:
        raise EntryError(f"decompressed {len(out)} bytes, metadata says {uncompressed_size}")
    return out


def _properties(items: Sequence[Proto] | None) -> dict[str, str]:
    return {kv["key"]: kv.get("value", "") for kv in items or ()}


def entry_of_send(metadata: Proto, payload: bytes) -> Entry:
    """The entry one ``CommandSend`` carries; :class:`EntryError` when it cannot be read."""
    data = decompress(
        metadata.get("compression", 0), payload, metadata.get("uncompressed_size", len(payload))
    )
    producer = metadata.get("producer_name", "")
    sequence_id = metadata.get("sequence_id", 0)
    publish_time = metadata.get("publish_time", 0)
    deliver_at = metadata.get("deliver_at_time")
    if deliver_at is not None and deliver_at < 0:
        deliver_at = None
    # Checked here, so that one producer's bad entry never fails the group commit it
    # would share with others.
    if max(sequence_id, publish_time) > _INT64_MAX:
        raise EntryError("sequence id or publish time beyond int64")
    if "num_messages_in_batch" not in metadata:
        key = None if metadata.get("null_partition_key") else metadata.get("partition_key")
        message = OutgoingMessage(
            data, key, _properties(metadata.get("properties")), deliver_at, sequence_id
        )
        return Entry([message], False, producer, publish_time)
    count = metadata["num_messages_in_batch"]
    if count < 1:
        raise EntryError(f"batch of {count} messages")
    messages: list[OutgoingMessage] = []
    pos = 0
    for index in range(count):
        if pos + 4 > len(data):
            raise EntryError(f"batch cut short at message {index} of {count}")
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        try:
            single = decode(commands.SingleMessageMetadata, data[pos : pos + size])
        except ProtoError as exc:
            raise EntryError(f"message {index} of the batch: {exc}") from exc
        pos += size
        length = single.get("payload_size", 0)
        if length < 0 or pos + length > len(data):
            raise EntryError(f"message {index} of the batch runs past the payload")
        body = data[pos : pos + length]
        pos += length
        key = None if single.get("null_partition_key") else single.get("partition_key")
        if single.get("sequence_id", 0) > _INT64_MAX or sequence_id + index > _INT64_MAX:
            raise EntryError(f"message {index} of the batch: sequence id beyond int64")
        messages.append(
            OutgoingMessage(
                body,
                key,
                _properties(single.get("properties")),
                deliver_at,
                single.get("sequence_id", sequence_id + index),
            )
        )
    return Entry(messages, True, producer, publish_time)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _text(tag: int, text: str) -> bytes:
    data = text.encode("utf-8")
    return bytes((tag,)) + _varint(len(data)) + data


def single_metadata(
    payload_size: int,
    sequence_id: int,
    key: str | None = None,
    properties: Sequence[tuple[str, str]] = (),
) -> bytes:
    """``SingleMessageMetadata`` bytes, written directly (the per-message hot path of a
    dispatch): fields 1 properties, 2 partition_key, 3 payload_size, 8 sequence_id, in
    number order, as :func:`protocol.proto.encode` would write them."""
    parts = []
    for name, value in properties:
        pair = _text(0x0A, name) + _text(0x12, value)
        parts.append(b"\x0a" + _varint(len(pair)) + pair)
    if key is not None:
        parts.append(_text(0x12, key))
    parts.append(b"\x18" + _varint(payload_size))
    parts.append(b"\x40" + _varint(sequence_id))
    return b"".join(parts)


_EMPTY_SINGLE = single_metadata(0, 0)


@dataclass(frozen=True)
class OutgoingEntry:
    """One entry of a dispatch, as columns of its delivered messages."""

    batch_size: int
    """0: not batched (one message)."""
    producer_name: str
    publish_time: int
    deliver_at: int | None
    indexes: Sequence[int]
    payloads: Sequence[bytes]
    keys: Sequence[str | None]
    properties: Sequence[Sequence[tuple[str, str]]]
    sequence_ids: Sequence[int]


def _kv(properties: Sequence[tuple[str, str]]) -> list[Proto]:
    return [{"key": k, "value": v} for k, v in properties]


def entry_payload(entry: OutgoingEntry) -> tuple[bytes, bytes, list[int] | None]:
    """(encoded ``MessageMetadata``, payload, ``ack_set`` or None) for one entry.

    ``batch_size`` 0: a non-batched entry (one message). Otherwise a batch of that
    many messages of which ``indexes`` are delivered; the ``ack_set`` (set bit =
    delivered here, the bits of ``BitSet.toLongArray``) is None when all are.
    """
    if entry.batch_size == 0:
        meta: Proto = {
            "producer_name": entry.producer_name,
            "sequence_id": entry.sequence_ids[0],
            "publish_time": entry.publish_time,
            "properties": _kv(entry.properties[0]),
            "partition_key": entry.keys[0],
            "deliver_at_time": entry.deliver_at,
        }
        return encode(commands.MessageMetadata, meta), entry.payloads[0], None
    size = entry.batch_size
    delivered = dict(zip(entry.indexes, range(len(entry.indexes)), strict=True))
    parts: list[bytes] = []
    for index in range(size):
        at = delivered.get(index)
        if at is None:
            parts += (_U32.pack(len(_EMPTY_SINGLE)), _EMPTY_SINGLE)
            continue
        payload = entry.payloads[at]
        single = single_metadata(
            len(payload), entry.sequence_ids[at], entry.keys[at], entry.properties[at]
        )
        parts += (_U32.pack(len(single)), single, payload)
    first = entry.sequence_ids[0] - entry.indexes[0]
    meta = {
        "producer_name": entry.producer_name,
        "sequence_id": max(first, 0),
        "publish_time": entry.publish_time,
        "num_messages_in_batch": size,
        "deliver_at_time": entry.deliver_at,
    }
    ack_set: list[int] | None = None
    if len(delivered) < size:
        words = [0] * ((size + 63) // 64)
        for index in delivered:
            words[index // 64] |= 1 << (index % 64)
        ack_set = [w - (1 << 64) if w >> 63 else w for w in words]
    return encode(commands.MessageMetadata, meta), b"".join(parts), ack_set


def unacked_indexes(ack_set: Sequence[int], batch_size: int) -> set[int]:
    """The indexes an ``ack_set`` marks (set bit) among ``0..batch_size-1``."""
    return {
        i
        for i in range(batch_size)
        if i // 64 < len(ack_set) and (ack_set[i // 64] >> (i % 64)) & 1
    }

"""Between Pulsar's message format and the ledger's rows.

Incoming: one ``CommandSend`` holds one entry: a single message, or a batch of
``num_messages_in_batch`` messages, each ``[u32 size][SingleMessageMetadata]
[payload]``, the whole payload possibly compressed (LZ4 block, ZLIB, ZSTD,
SNAPPY raw). :func:`entry_of_send` turns it into the
:class:`~cursorops.core.services.producer.Entry` the broker appends, one message per row.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import cramjam
import numpy as np
import pyarrow as pa

from cursorops.core.services.producer import Entry
from cursorops.wire import commands
from cursorops.wire.commands import CommandType, CompressionType
from cursorops.wire.proto import Proto, ProtoError, decode, encode

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


def _properties(items: Sequence[Proto] | None) -> list[tuple[str, str]]:
    return [(kv["key"], kv.get("value", "")) for kv in items or ()]


def entry_of_send(metadata: Proto, payload: bytes, raw_metadata: bytes | None = None) -> Entry:
    """The entry one ``CommandSend`` carries; :class:`EntryError` when it cannot be read.

    ``raw_metadata``: the ``MessageMetadata`` bytes as received, kept verbatim with
    the payload as sent (what a consumer is given back). The payload is read only
    for the analysis columns, and only where the broker can: an encrypted entry or
    a chunk is stored as it came, its messages' payload columns left empty.
    """
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
    batched = "num_messages_in_batch" in metadata
    count = metadata["num_messages_in_batch"] if batched else 1
    if count < 1:
        raise EntryError(f"batch of {count} messages")
    keys_sent = metadata.get("encryption_keys")
    encryption = [k.get("key", "") for k in keys_sent] if keys_sent else None
    chunk = _chunk_of(metadata)
    sent = _Sent(encryption, chunk, metadata.get("schema_version"), raw_metadata)
    codec = metadata.get("compression", 0)
    if encryption is not None or chunk is not None:
        # Not readable on its own: encrypted, or a piece of a message compressed whole.
        readable = encryption is None and codec == CompressionType.NONE
        if not batched:
            return _single(
                metadata,
                payload if readable else b"",
                producer,
                deliver_at,
                sent,
                None if readable else payload,
            )
        if sequence_id + count - 1 > _INT64_MAX:
            raise EntryError("sequence id beyond int64")
        nothing: list[None] = [None] * count
        return Entry(
            True,
            producer,
            publish_time,
            [b""] * count,
            list(range(sequence_id, sequence_id + count)),
            nothing,
            [_NO_PROPERTIES] * count,
            [deliver_at] * count,
            nothing,
            nothing,
            None,
            *sent.fields(payload),
        )
    data = decompress(codec, payload, metadata.get("uncompressed_size", len(payload)))
    # A compressed payload is kept as sent; a plain one is rebuilt exactly from the
    # message columns and the verbatim SingleMessageMetadata bytes.
    raw = payload if codec != CompressionType.NONE else None
    if not batched:
        return _single(metadata, data, producer, deliver_at, sent, raw)
    uniform = _uniform_batch(data, count)
    if uniform is not None:
        payloads, sequence_ids, singles = uniform
        nothing = [None] * count
        return Entry(
            True,
            producer,
            publish_time,
            payloads,
            sequence_ids,
            nothing,
            [_NO_PROPERTIES] * count,
            [deliver_at] * count,
            nothing,
            nothing,
            None,
            *sent.fields(raw, None if raw is not None else singles),
        )
    batch = _read_batch(data, count, sequence_id)
    if batch.consumed != len(data):
        raw = payload
    return Entry(
        True,
        producer,
        publish_time,
        batch.payloads,
        batch.sequence_ids,
        batch.keys,
        batch.properties,
        [deliver_at] * count,
        batch.event_times,
        batch.ordering_keys,
        batch.null_values if True in batch.null_values else None,
        *sent.fields(raw, None if raw is not None else batch.singles),
    )


@dataclass(frozen=True)
class _Sent:
    """What an entry keeps of what the client sent, besides its messages' columns."""

    encryption_keys: list[str] | None
    chunk: tuple[str, int, int, int] | None
    schema_version: bytes | None
    metadata: bytes | None

    def fields(
        self, raw_payload: bytes | None, singles: Sequence[bytes] | pa.Array | None = None
    ) -> tuple[
        list[str] | None,
        tuple[str, int, int, int] | None,
        bytes | None,
        bytes | None,
        bytes | None,
        Sequence[bytes] | pa.Array | None,
    ]:
        """The trailing fields of :class:`~cursorops.core.services.producer.Entry`, from
        ``encryption_keys`` on."""
        return (
            self.encryption_keys,
            self.chunk,
            self.schema_version,
            self.metadata,
            raw_payload,
            singles,
        )


def _chunk_of(metadata: Proto) -> tuple[str, int, int, int] | None:
    """(uuid, chunk id, chunks, total size) of a chunk of a larger message; None otherwise."""
    chunks = metadata.get("num_chunks_from_msg", 0)
    if chunks <= 1:
        return None
    chunk_id = metadata.get("chunk_id", 0)
    if not 0 <= chunk_id < chunks:
        raise EntryError(f"chunk {chunk_id} of a message of {chunks} chunks")
    return (
        metadata.get("uuid", ""),
        chunk_id,
        chunks,
        metadata.get("total_chunk_msg_size", 0),
    )


def _single(
    metadata: Proto,
    payload: bytes,
    producer: str,
    deliver_at: int | None,
    sent: _Sent,
    raw: bytes | None,
) -> Entry:
    """The entry of one message, not batched."""
    key = None if metadata.get("null_partition_key") else metadata.get("partition_key")
    return Entry(
        False,
        producer,
        metadata.get("publish_time", 0),
        [payload],
        [metadata.get("sequence_id", 0)],
        [key],
        [_properties(metadata.get("properties"))],
        [deliver_at],
        [_event_time(metadata.get("event_time"))],
        [metadata.get("ordering_key")],
        [True] if metadata.get("null_value") else None,
        *sent.fields(raw),
    )


def _event_time(value: int | None) -> int | None:
    """Pulsar's event time: 0 (the default) means none was set."""
    if not value:
        return None
    if value > _INT64_MAX:
        raise EntryError("event time beyond int64")
    return value


@dataclass
class _Batch:
    """A batch's messages as columns (what :func:`_read_batch` returns)."""

    payloads: list[bytes] = field(default_factory=list)
    sequence_ids: list[int | None] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    properties: list[Sequence[tuple[str, str]]] = field(default_factory=list)
    event_times: list[int | None] = field(default_factory=list)
    ordering_keys: list[bytes | None] = field(default_factory=list)
    null_values: list[bool] = field(default_factory=list)
    singles: list[bytes] = field(default_factory=list)
    """Each message's ``SingleMessageMetadata`` bytes, as sent."""
    consumed: int = 0
    """Bytes of the batch payload its messages span (the whole payload, unless padded)."""


_NO_PROPERTIES: list[tuple[str, str]] = []


def _uniform_batch(data: bytes, count: int) -> tuple[pa.Array, np.ndarray, pa.Array] | None:
    """(payloads, sequence ids, SingleMessageMetadata bytes) of a batch of plain
    messages of one payload size with consecutive sequence ids, read with numpy over
    the whole batch (no Python per message); None for any other batch.

    Every message is then ``[u32 m][0x18 size 0x40 sequence][payload]`` with the same
    ``m`` and payload size: the batch is a ``count x stride`` array whose columns
    before the sequence id are equal on every row, and whose sequence-id bytes are
    the varints of ``first, first + 1, ...``.
    """
    if count < 2 or len(data) < 4:
        return None
    size = int.from_bytes(data[:4], "big")
    first = _plain_single(data, 4, 4 + size)
    if first is None:
        return None
    length, sequence, key, event_time, ordering_key = first
    if sequence is None or key is not None or event_time is not None or ordering_key is not None:
        return None
    head = b"\x18" + _varint(length) + b"\x40"
    width = len(_varint(sequence))
    last = sequence + count - 1
    if (
        size != len(head) + width
        or data[4 : 4 + len(head)] != head
        or last > _INT64_MAX
        or len(_varint(last)) != width
    ):
        return None
    stride = 4 + size + length
    if stride * count != len(data):
        return None
    rows = np.frombuffer(data, np.uint8).reshape(count, stride)
    fixed = 4 + len(head)
    if not (rows[:, :fixed] == rows[0, :fixed]).all():
        return None
    sequences = np.arange(sequence, last + 1, dtype=np.uint64)
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    varints = ((sequences[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    varints[:, :-1] |= 0x80
    if not (rows[:, fixed : fixed + width] == varints).all():
        return None
    offsets = np.arange(count + 1, dtype=np.int32) * length
    body = rows[:, fixed + width :].tobytes()
    payloads = pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(body)]
    )
    single_offsets = np.arange(count + 1, dtype=np.int32) * size
    singles = pa.Array.from_buffers(
        pa.binary(),
        count,
        [None, pa.py_buffer(single_offsets), pa.py_buffer(rows[:, 4 : 4 + size].tobytes())],
    )
    return payloads, sequences.astype(np.int64), singles


def _read_batch(data: bytes, count: int, first_sequence_id: int) -> _Batch:
    """The ``count`` messages of a batch payload, each ``[u32 size][SingleMessageMetadata]
    [payload]``.

    The per-message hot path of a produce. A message whose metadata holds only the
    fields clients write for a plain message (payload size, sequence id, key, event
    time, ordering key) in one-byte tags is read here inline; any other (properties,
    unknown fields) goes through the general decoder, which reads the same fields.
    """
    out = _Batch()
    payloads, sequence_ids, keys = out.payloads, out.sequence_ids, out.keys
    properties, event_times, ordering_keys = out.properties, out.event_times, out.ordering_keys
    null_values, singles = out.null_values, out.singles
    end = len(data)
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise EntryError(f"batch cut short at message {index} of {count}")
        size = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        stop = pos + size
        if stop > end:
            raise EntryError(f"message {index} of the batch runs past the payload")
        singles.append(data[pos:stop])
        fields = _plain_single(data, pos, stop)
        if fields is None:
            try:
                single = decode(commands.SingleMessageMetadata, data[pos:stop])
            except ProtoError as exc:
                raise EntryError(f"message {index} of the batch: {exc}") from exc
            key = None if single.get("null_partition_key") else single.get("partition_key")
            fields = (
                single.get("payload_size", 0),
                single.get("sequence_id"),
                key,
                single.get("event_time"),
                single.get("ordering_key"),
            )
            properties.append(_properties(single.get("properties")))
            null_values.append(bool(single.get("null_value")))
        else:
            properties.append(_NO_PROPERTIES)
            null_values.append(False)
        length, sequence, key, event_time, ordering_key = fields
        pos = stop
        if length < 0 or pos + length > end:
            raise EntryError(f"message {index} of the batch runs past the payload")
        payloads.append(data[pos : pos + length])
        pos += length
        if sequence is None:
            sequence = first_sequence_id + index
        if sequence > _INT64_MAX:
            raise EntryError(f"message {index} of the batch: sequence id beyond int64")
        sequence_ids.append(sequence)
        keys.append(key)
        try:
            event_times.append(_event_time(event_time))
        except EntryError as exc:
            raise EntryError(f"message {index} of the batch: {exc}") from exc
        ordering_keys.append(ordering_key)
    out.consumed = pos
    return out


_Single = tuple[int, int | None, str | None, int | None, bytes | None]


def _plain_single(data: bytes, pos: int, stop: int) -> _Single | None:
    """(payload size, sequence id, key, event time, ordering key) of a
    ``SingleMessageMetadata`` at ``data[pos:stop]`` made only of the fields 2, 3, 5, 7,
    8 and 10 with one-byte varints where a length is needed (the common shape);
    None for any other (the general decoder reads it)."""
    length = 0
    sequence: int | None = None
    key: str | None = None
    event_time: int | None = None
    ordering_key: bytes | None = None
    null_key = False
    while pos < stop:
        tag = data[pos]
        pos += 1
        if tag == 0x18 or tag == 0x40 or tag == 0x28 or tag == 0x50:
            # A varint: payload_size, sequence_id, event_time, null_partition_key.
            value = 0
            shift = 0
            while True:
                if pos >= stop or shift > 63:
                    return None
                byte = data[pos]
                pos += 1
                value |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            if tag == 0x18:
                if value >= 1 << 31:
                    return None
                length = value
            elif tag == 0x40:
                sequence = value
            elif tag == 0x28:
                event_time = value
            else:
                null_key = value != 0
        elif tag == 0x12 or tag == 0x3A:
            # partition_key (string) or ordering_key (bytes), short ones only.
            if pos >= stop:
                return None
            size = data[pos]
            if size >= 0x80 or pos + 1 + size > stop:
                return None
            chunk = data[pos + 1 : pos + 1 + size]
            pos += 1 + size
            if tag == 0x3A:
                ordering_key = chunk
            else:
                try:
                    key = chunk.decode("utf-8")
                except UnicodeDecodeError:
                    return None
        else:
            return None
    return length, sequence, None if null_key else key, event_time, ordering_key


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _text(tag: int, text: str) -> bytes:
    return _chunk(tag, text.encode("utf-8"))


def _chunk(tag: int, data: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(data)) + data


def single_metadata(
    payload_size: int,
    sequence_id: int,
    key: str | None = None,
    properties: Sequence[tuple[str, str]] = (),
    event_time: int | None = None,
    ordering_key: bytes | None = None,
) -> bytes:
    """``SingleMessageMetadata`` bytes, written directly (the per-message hot path of a
    dispatch): fields 1 properties, 2 partition_key, 3 payload_size, 5 event_time,
    7 ordering_key, 8 sequence_id, in number order, as :func:`cursorops.wire.proto.encode`
    would write them."""
    if key is None and not properties and event_time is None and ordering_key is None:
        return b"\x18" + _varint(payload_size) + b"\x40" + _varint(sequence_id)
    parts = []
    for name, value in properties:
        pair = _text(0x0A, name) + _text(0x12, value)
        parts.append(b"\x0a" + _varint(len(pair)) + pair)
    if key is not None:
        parts.append(_text(0x12, key))
    parts.append(b"\x18" + _varint(payload_size))
    if event_time is not None:
        parts.append(b"\x28" + _varint(event_time))
    if ordering_key is not None:
        parts.append(_chunk(0x3A, ordering_key))
    parts.append(b"\x40" + _varint(sequence_id))
    return b"".join(parts)


_EMPTY_SINGLE = single_metadata(0, 0)
_EMPTY_SLOT = _U32.pack(len(_EMPTY_SINGLE)) + _EMPTY_SINGLE


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
    event_times: Sequence[int | None] | None = None
    """None: no message has one."""
    ordering_keys: Sequence[bytes | None] | None = None
    """None: no message has one."""


def _kv(properties: Sequence[tuple[str, str]]) -> list[Proto]:
    return [{"key": k, "value": v} for k, v in properties]


def entry_payload(entry: OutgoingEntry) -> tuple[bytes, bytes, list[int] | None]:
    """(encoded ``MessageMetadata``, payload, ``ack_set`` or None) for one entry.

    ``batch_size`` 0: a non-batched entry (one message). Otherwise a batch of that
    many messages of which ``indexes`` are delivered; the ``ack_set`` (set bit =
    delivered here, the bits of ``BitSet.toLongArray``) is None when all are.
    """
    event_times = entry.event_times
    ordering_keys = entry.ordering_keys
    if entry.batch_size == 0:
        meta: Proto = {
            "producer_name": entry.producer_name,
            "sequence_id": entry.sequence_ids[0],
            "publish_time": entry.publish_time,
            "properties": _kv(entry.properties[0]),
            "partition_key": entry.keys[0],
            "event_time": event_times[0] if event_times else None,
            "ordering_key": ordering_keys[0] if ordering_keys else None,
            "deliver_at_time": entry.deliver_at,
        }
        return encode(commands.MessageMetadata, meta), entry.payloads[0], None
    size = entry.batch_size
    indexes = entry.indexes
    payloads, sequence_ids = entry.payloads, entry.sequence_ids
    keys, properties = entry.keys, entry.properties
    parts: list[bytes] = []
    pack = _U32.pack
    plain = (
        event_times is None
        and ordering_keys is None
        and keys.count(None) == len(keys)
        and not any(properties)
    )
    whole = len(indexes) == size and list(range(size)) == list(indexes)
    if plain and whole:
        # Every message of the batch, each with nothing but its payload: the common case.
        for payload, sequence_id in zip(payloads, sequence_ids, strict=True):
            single = b"\x18" + _varint(len(payload)) + b"\x40" + _varint(sequence_id)
            parts += (pack(len(single)), single, payload)
    else:
        delivered = dict(zip(indexes, range(len(indexes)), strict=True))
        for index in range(size):
            at = delivered.get(index)
            if at is None:
                parts.append(_EMPTY_SLOT)
                continue
            payload = payloads[at]
            single = single_metadata(
                len(payload),
                sequence_ids[at],
                keys[at],
                properties[at],
                event_times[at] if event_times else None,
                ordering_keys[at] if ordering_keys else None,
            )
            parts += (pack(len(single)), single, payload)
    first = sequence_ids[0] - indexes[0]
    meta_bytes = batch_metadata(
        entry.producer_name, first, entry.publish_time, size, entry.deliver_at
    )
    return meta_bytes, b"".join(parts), None if whole else ack_set_of(indexes, size)


def ack_set_of(indexes: Iterable[int], size: int) -> list[int]:
    """The ``ack_set`` of a batch of ``size`` of which ``indexes`` are delivered (set bit =
    delivered here, the words of ``BitSet.toLongArray`` as int64)."""
    words = [0] * ((size + 63) // 64)
    for index in indexes:
        words[index // 64] |= 1 << (index % 64)
    return [w - (1 << 64) if w >> 63 else w for w in words]


def sent_payload(
    batch_size: int,
    raw: bytes | None,
    singles: Sequence[bytes | None],
    payloads: Sequence[bytes],
) -> bytes:
    """An entry's payload exactly as its client sent it: kept as sent (``raw``), or, for a
    plain batch, each message's ``[u32 size][SingleMessageMetadata][payload]`` from its
    verbatim metadata bytes; ``singles`` and ``payloads`` hold every message of it."""
    if raw is not None:
        return raw
    if batch_size == 0:
        return payloads[0]
    pack = _U32.pack
    parts: list[bytes] = []
    for single, payload in zip(singles, payloads, strict=True):
        if single is None:
            raise EntryError("a batched message without its metadata")
        parts += (pack(len(single)), single, payload)
    return b"".join(parts)


def interleaved_batch(singles: np.ndarray, payloads: np.ndarray) -> bytes:
    """:func:`sent_payload` of a plain batch whose messages' metadata are of one size and
    payloads of one size, one message per row of each array, with numpy (no Python per
    message)."""
    count, width = singles.shape
    rows = np.empty((count, 4 + width + payloads.shape[1]), np.uint8)
    rows[:, :4] = np.frombuffer(_U32.pack(width), np.uint8)
    rows[:, 4 : 4 + width] = singles
    rows[:, 4 + width :] = payloads
    return rows.tobytes()


def uniform_batch_payload(payloads: np.ndarray, first_sequence: int) -> bytes | None:
    """The payload of a whole batch of plain messages of one size, built with numpy (no
    Python per message): ``payloads`` holds one message per row, their sequence ids
    are ``first_sequence, first_sequence + 1, ...``. The bytes :func:`entry_payload`
    writes for it; None when the sequence ids' varints differ in width (that path
    then writes it)."""
    count, length = payloads.shape
    last = first_sequence + count - 1
    width = len(_varint(first_sequence))
    if first_sequence < 0 or last > _INT64_MAX or len(_varint(last)) != width:
        return None
    head = b"\x18" + _varint(length) + b"\x40"
    size = len(head) + width
    rows = np.empty((count, 4 + size + length), np.uint8)
    rows[:, :4] = np.frombuffer(_U32.pack(size), np.uint8)
    rows[:, 4 : 4 + len(head)] = np.frombuffer(head, np.uint8)
    sequences = np.arange(first_sequence, last + 1, dtype=np.uint64)
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    varints = ((sequences[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    varints[:, :-1] |= 0x80
    rows[:, 4 + len(head) : 4 + size] = varints
    rows[:, 4 + size :] = payloads
    return rows.tobytes()


def batch_metadata(
    producer_name: str, sequence_id: int, publish_time: int, size: int, deliver_at: int | None
) -> bytes:
    """The ``MessageMetadata`` of a batch of ``size`` messages, written directly (once per
    entry of a dispatch): fields 1 producer_name, 2 sequence_id, 3 publish_time,
    11 num_messages_in_batch, 19 deliver_at_time, as :func:`cursorops.wire.proto.encode`
    writes them."""
    out = _text(0x0A, producer_name) + b"\x10" + _varint(max(sequence_id, 0))
    out += b"\x18" + _varint(publish_time) + b"\x58" + _varint(size)
    if deliver_at is not None:
        out += b"\x98\x01" + _varint(deliver_at)
    return out


_RECEIPT_HEAD = b"\x08" + bytes(
    (int(CommandType.SEND_RECEIPT), int(CommandType.SEND_RECEIPT) << 3 | 2)
)


def send_receipt_command(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    highest_sequence_id: int | None,
) -> bytes:
    """A ``BaseCommand`` holding a ``CommandSendReceipt``, written directly (once per entry
    produced), as :func:`cursorops.wire.proto.encode` writes it."""
    message_id = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
    body = b"\x08" + _varint(producer_id) + b"\x10" + _varint(sequence_id)
    body += b"\x1a" + _varint(len(message_id)) + message_id
    if highest_sequence_id is not None:
        body += b"\x20" + _varint(highest_sequence_id)
    return _RECEIPT_HEAD + _varint(len(body)) + body


_MESSAGE_BODY = bytes((int(CommandType.MESSAGE) << 3 | 2,))


def message_command(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: Sequence[int] | None,
    consumer_epoch: int | None,
) -> bytes:
    """A ``BaseCommand`` holding a ``CommandMessage``, written directly (once per entry of
    a dispatch), as :func:`cursorops.wire.proto.encode` writes it; ``partition`` -1: none."""
    message_id = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
    if partition >= 0:
        message_id += b"\x18" + _varint(partition)
    body = b"\x08" + _varint(consumer_id) + b"\x12" + _varint(len(message_id)) + message_id
    body += b"\x18" + _varint(redelivery_count & 0xFFFFFFFF)
    for word in ack_set or ():
        body += b"\x20" + _varint(word)
    if consumer_epoch is not None:
        body += b"\x28" + _varint(consumer_epoch)
    return b"\x08" + _varint(int(CommandType.MESSAGE)) + _MESSAGE_BODY + _varint(len(body)) + body

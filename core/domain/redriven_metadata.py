"""A redriven chunk's ``MessageMetadata``: the bytes its client sent, with the redrive's
fields in place of its producer's.

A chunk cannot be written again from the analysis columns: its payload is a
piece of a message compressed (and perhaps encrypted) whole, which the client
joins by the chunk fields and decodes with the codec and keys the metadata
names. So a redrive publishes each chunk of a chunked dead letter with the
metadata it was sent with, every field kept but those a redrive owns
(:mod:`cursorops.core.services.gating.redrive`): the producer name, sequence id, publish time,
properties (the client's and the provenance) and the chunks' ``uuid``, which
are replaced; the delivery time and the highest sequence id, which are dropped.

Pure: protobuf's wire format, read and written field by field (fields a
reader may meet in any order); nothing else is decoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from cursorops.core.domain.errors import InvalidArgumentError

PRODUCER_NAME = 1
SEQUENCE_ID = 2
PUBLISH_TIME = 3
PROPERTIES = 4
DELIVER_AT_TIME = 19
HIGHEST_SEQUENCE_ID = 24
UUID = 26
_OWNED = frozenset(
    {
        PRODUCER_NAME,
        SEQUENCE_ID,
        PUBLISH_TIME,
        PROPERTIES,
        DELIVER_AT_TIME,
        HIGHEST_SEQUENCE_ID,
        UUID,
    }
)
"""The ``MessageMetadata`` fields a redrive writes or drops (PulsarApi.proto numbers)."""

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


def redriven_metadata(
    sent: bytes,
    *,
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    properties: Sequence[tuple[str, str]],
    uuid: str | None,
) -> bytes:
    """``sent`` (``MessageMetadata`` bytes) with the redrive's fields; every other field
    kept byte for byte, in its order. InvalidArgumentError when ``sent`` is not protobuf."""
    kept = bytearray()
    pos = 0
    while pos < len(sent):
        start = pos
        key, pos = _read_varint(sent, pos)
        number, wire = key >> 3, key & 7
        pos = _skip(sent, pos, wire)
        if number not in _OWNED:
            kept += sent[start:pos]
    out = bytearray()
    _text(out, PRODUCER_NAME, producer_name)
    _varint_field(out, SEQUENCE_ID, sequence_id)
    _varint_field(out, PUBLISH_TIME, publish_time)
    for name, value in properties:
        pair = bytearray()
        _text(pair, 1, name)
        _text(pair, 2, value)
        _bytes(out, PROPERTIES, bytes(pair))
    out += kept
    if uuid is not None:
        _text(out, UUID, uuid)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise InvalidArgumentError("Invalid message metadata: a truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _skip(data: bytes, pos: int, wire: int) -> int:
    if wire == _VARINT:
        return _read_varint(data, pos)[1]
    if wire == _LENGTH_DELIMITED:
        length, pos = _read_varint(data, pos)
        end = pos + length
    elif wire in (_FIXED64, _FIXED32):
        end = pos + (8 if wire == _FIXED64 else 4)
    else:
        raise InvalidArgumentError(f"Invalid message metadata: wire type {wire}")
    if end > len(data):
        raise InvalidArgumentError("Invalid message metadata: a field runs past the end")
    return end


def _write_varint(out: bytearray, value: int) -> None:
    value &= (1 << 64) - 1
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _varint_field(out: bytearray, number: int, value: int) -> None:
    _write_varint(out, number << 3 | _VARINT)
    _write_varint(out, value)


def _bytes(out: bytearray, number: int, value: bytes) -> None:
    _write_varint(out, number << 3 | _LENGTH_DELIMITED)
    _write_varint(out, len(value))
    out += value


def _text(out: bytearray, number: int, value: str) -> None:
    _bytes(out, number, value.encode("utf-8"))


__all__ = ["redriven_metadata"]

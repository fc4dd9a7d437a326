"""A small protobuf (proto2) codec: messages as dicts, described by field tables.

Only what Pulsar's wire definitions use: varint scalars (``uint64``, ``int64``,
``uint32``, ``int32``, ``bool``, ``enum``), ``double``, ``string``, ``bytes``,
nested messages, and repeated fields (packed or not on read; never packed on
write, as proto2 writes them). A decoded message is a plain ``dict`` keyed by
field name holding only the fields present on the wire, so "absent" and
"default" stay apart (Pulsar tells a batch of one from an unbatched message by
the presence of ``num_messages_in_batch``). Unknown fields are skipped, as a
protobuf reader does.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Proto = dict[str, Any]
"""A decoded message: field name to value (a list for a repeated field)."""

_VARINT_KINDS = frozenset({"uint64", "int64", "uint32", "int32", "bool", "enum"})
_UINT64 = (1 << 64) - 1
_MAX_VARINT_BYTES = 10


class ProtoError(ValueError):
    """The bytes are not a valid encoding of the message."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    """One of the scalar kinds, ``string``, ``bytes``, ``double`` or ``message``."""
    repeated: bool = False
    message: MessageType | None = None


class MessageType:
    """One message definition: its fields by number."""

    def __init__(self, name: str, fields: Mapping[int, Field]) -> None:
        self.name = name
        self.by_number = dict(fields)
        self.by_name = {f.name: (number, f) for number, f in fields.items()}
        self.order = sorted(fields)


def message(name: str, *fields: tuple[int, str, str] | tuple[int, str, MessageType]) -> MessageType:
    """``message("Name", (1, "field", "uint64"), (2, "items", "*string"), (3, "m", OTHER))``.

    A kind starting with ``*`` is repeated; a :class:`MessageType` (or ``*`` and
    one, given as a tuple ``(n, "*name", TYPE)``) is a nested message.
    """
    table: dict[int, Field] = {}
    for number, fname, kind in fields:
        repeated = fname.startswith("*")
        fname = fname.lstrip("*")
        if isinstance(kind, MessageType):
            table[number] = Field(fname, "message", repeated, kind)
        else:
            if kind.startswith("*"):
                repeated, kind = True, kind[1:]
            table[number] = Field(fname, kind, repeated)
    return MessageType(name, table)


# -- writing ----------------------------------------------------------------------


def _varint(value: int, out: bytearray) -> None:
    value &= _UINT64
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _scalar(kind: str, value: Any, key: int, out: bytearray) -> None:
    if kind in _VARINT_KINDS:
        _varint(key, out)
        _varint(int(value), out)
    elif kind == "string" or kind == "bytes":
        data = value.encode("utf-8") if kind == "string" else bytes(value)
        _varint(key | 2, out)
        _varint(len(data), out)
        out += data
    elif kind == "double":
        _varint(key | 1, out)
        out += struct.pack("<d", value)
    else:  # pragma: no cover - the tables are fixed
        raise ProtoError(f"unknown kind {kind}")


def encode(mtype: MessageType, values: Mapping[str, Any]) -> bytes:
    """The message's bytes: present fields (not None) in field-number order."""
    out = bytearray()
    _encode_into(mtype, values, out)
    return bytes(out)


def _encode_into(mtype: MessageType, values: Mapping[str, Any], out: bytearray) -> None:
    for number in mtype.order:
        f = mtype.by_number[number]
        value = values.get(f.name)
        if value is None:
            continue
        items = value if f.repeated else (value,)
        key = number << 3
        for item in items:
            if f.message is not None:
                body = encode(f.message, item)
                _varint(key | 2, out)
                _varint(len(body), out)
                out += body
            else:
                _scalar(f.kind, item, key, out)


# -- reading ----------------------------------------------------------------------


def _read_varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        if pos >= end:
            raise ProtoError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _UINT64, pos
        shift += 7
    raise ProtoError("varint longer than 10 bytes")


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _convert(kind: str, raw: int) -> int | bool:
    if kind == "int32" or kind == "enum":
        return _signed(raw, 32)
    if kind == "int64":
        return _signed(raw, 64)
    if kind == "uint32":
        return raw & 0xFFFFFFFF
    if kind == "bool":
        return raw != 0
    return raw


def decode(mtype: MessageType, data: bytes | memoryview) -> Proto:
    """Decode ``data`` as ``mtype``; raises :class:`ProtoError` on malformed bytes."""
    return _decode(mtype, memoryview(data), 0, len(data))


def _decode(mtype: MessageType, data: memoryview, pos: int, end: int) -> Proto:
    result: Proto = {}
    by_number = mtype.by_number
    while pos < end:
        key, pos = _read_varint(data, pos, end)
        number, wire = key >> 3, key & 7
        f = by_number.get(number)
        if wire == 0:
            raw, pos = _read_varint(data, pos, end)
            if f is None:
                continue
            if f.kind not in _VARINT_KINDS:
                raise ProtoError(f"{mtype.name}.{f.name}: varint for a {f.kind}")
            value: Any = _convert(f.kind, raw)
        elif wire == 2:
            length, pos = _read_varint(data, pos, end)
            stop = pos + length
            if stop > end:
                raise ProtoError(f"{mtype.name}: field {number} runs past the end")
            chunk_start, pos = pos, stop
            if f is None:
                continue
            if f.message is not None:
                value = _decode(f.message, data, chunk_start, stop)
            elif f.kind == "string":
                try:
                    value = str(data[chunk_start:stop], "utf-8")
                except UnicodeDecodeError as exc:
                    raise ProtoError(f"{mtype.name}.{f.name}: invalid UTF-8") from exc
            elif f.kind == "bytes":
                value = bytes(data[chunk_start:stop])
            elif f.repeated and f.kind in _VARINT_KINDS:
                packed = result.setdefault(f.name, [])
                p = chunk_start
                while p < stop:
                    raw, p = _read_varint(data, p, stop)
                    packed.append(_convert(f.kind, raw))
                continue
            else:
                raise ProtoError(f"{mtype.name}.{f.name}: length-delimited for a {f.kind}")
        elif wire == 1:
            if pos + 8 > end:
                raise ProtoError("truncated fixed64")
            chunk = bytes(data[pos : pos + 8])
            pos += 8
            if f is None:
                continue
            if f.kind != "double":
                raise ProtoError(f"{mtype.name}.{f.name}: fixed64 for a {f.kind}")
            value = struct.unpack("<d", chunk)[0]
        elif wire == 5:
            if pos + 4 > end:
                raise ProtoError("truncated fixed32")
            pos += 4
            if f is None:
                continue
            raise ProtoError(f"{mtype.name}.{f.name}: fixed32 for a {f.kind}")
        else:
            raise ProtoError(f"{mtype.name}: unsupported wire type {wire}")
        if f.repeated:
            result.setdefault(f.name, []).append(value)
        else:
            result[f.name] = value
    if pos != end:
        raise ProtoError(f"{mtype.name}: runs past the end")
    return result

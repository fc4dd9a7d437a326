"""A schema as a client declares it, and a schema version as the wire carries it."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from cursorops.core.domain.errors import InvalidArgumentError

MAX_SCHEMA_BYTES = 1 << 20
"""A schema definition above this is refused (Pulsar's are a few KiB)."""


class SchemaType(IntEnum):
    """``Schema.Type`` of Pulsar's wire definitions; NONE is plain bytes (no schema)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20


@dataclass(frozen=True)
class SchemaInfo:
    type: SchemaType
    data: bytes
    """The definition: Avro's JSON for AVRO and JSON, empty for primitives."""
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        type_: int,
        data: bytes,
        properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> SchemaInfo:
        """Checked: a known type, a definition of a bounded size, text properties."""
        try:
            kind = SchemaType(type_)
        except ValueError:
            raise InvalidArgumentError(f"Unknown schema type {type_!r}") from None
        if not isinstance(data, bytes | bytearray) or len(data) > MAX_SCHEMA_BYTES:
            raise InvalidArgumentError(
                f"A schema definition must be bytes of at most {MAX_SCHEMA_BYTES} bytes"
            )
        pairs = dict(properties)
        for key, value in pairs.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidArgumentError("Schema properties must be text")
        return cls(kind, bytes(data), pairs)

    def same_definition(self, other: SchemaInfo) -> bool:
        """Pulsar's schema hash compares the type and the definition, not the properties."""
        return self.type is other.type and self.data == other.data


def encode_version(version: int) -> bytes:
    """Pulsar's ``LongSchemaVersion``: 8 bytes, big-endian."""
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int:
    if len(raw) != 8:
        raise InvalidArgumentError(f"A schema version is 8 bytes, not {len(raw)}")
    value: int = struct.unpack(">q", raw)[0]
    return value

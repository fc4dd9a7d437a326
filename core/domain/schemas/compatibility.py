"""Schema compatibility, as Pulsar's registry checks a new schema against the stored ones.

Strategies are Pulsar's (``SchemaCompatibilityStrategy``). BACKWARD: a reader
with the new schema reads what the existing one wrote; FORWARD: the other way
round; FULL: both. The plain strategies check against the latest version, the
``_TRANSITIVE`` ones against every version since the last deletion.

AVRO and JSON definitions (Avro's schema JSON, as every official client sends
for both) follow Avro's schema resolution as Pulsar's checker applies it (Avro's
resolving grammar): field defaults, numeric promotions, unions, enum symbols;
a record or an enum is matched by its fields or symbols, not its name (a fixed
by its name and size). PROTOBUF_NATIVE requires the same root
message. KEY_VALUE checks its key and its value schema each by its own type.
Any other type is compatible only with an identical definition.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from cursorops.core.domain.errors import IncompatibleSchemaError
from cursorops.core.domain.schemas.schema_info import SchemaInfo, SchemaType


class CompatibilityStrategy(StrEnum):
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


DEFAULT_STRATEGY = CompatibilityStrategy.FULL
"""Pulsar 4.x: a namespace's strategy is UNDEFINED, which falls back to its auto-update
strategy (``Full``), as the broker's ``schemaCompatibilityStrategy`` default is FULL."""

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}
"""(writer, reader) pairs Avro reads across."""


class _Node:
    """One Avro type, named references resolved to their definition."""

    def __init__(self, kind: str, name: str = "") -> None:
        self.kind = kind
        self.name = name
        self.fields: list[tuple[str, tuple[str, ...], _Node, bool]] = []
        """(name, aliases, type, has a default)."""
        self.symbols: tuple[str, ...] = ()
        self.has_default = False
        self.size = 0
        self.children: list[_Node] = []
        """Array items, map values, or union branches."""


class _AvroParser:
    def __init__(self) -> None:
        self.named: dict[str, _Node] = {}

    def parse(self, schema: Any, namespace: str = "") -> _Node:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _Node(schema)
            for name in (schema, f"{namespace}.{schema}" if namespace else schema):
                if name in self.named:
                    return self.named[name]
            raise ValueError(f"unknown type {schema!r}")
        if isinstance(schema, list):
            union = _Node("union")
            union.children = [self.parse(branch, namespace) for branch in schema]
            return union
        if not isinstance(schema, dict) or "type" not in schema:
            raise ValueError(f"not a schema: {schema!r}")
        kind = schema["type"]
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(schema, namespace)
        if kind == "array":
            node = _Node("array")
            node.children = [self.parse(schema["items"], namespace)]
            return node
        if kind == "map":
            node = _Node("map")
            node.children = [self.parse(schema["values"], namespace)]
            return node
        # A primitive given as an object, logical types included: the underlying type.
        return self.parse(kind, namespace)

    def _named(self, schema: dict[str, Any], namespace: str) -> _Node:
        name = str(schema["name"])
        space = str(schema.get("namespace", namespace) or "")
        if "." in name:
            full, space = name, name.rsplit(".", 1)[0]
        else:
            full = f"{space}.{name}" if space else name
        kind = "record" if schema["type"] == "error" else str(schema["type"])
        node = _Node(kind, full.rsplit(".", 1)[-1])
        self.named[full] = node
        if kind == "record":
            for item in schema.get("fields", []):
                node.fields.append(
                    (
                        str(item["name"]),
                        tuple(item.get("aliases", ())),
                        self.parse(item["type"], space),
                        "default" in item,
                    )
                )
        elif kind == "enum":
            node.symbols = tuple(schema.get("symbols", ()))
            node.has_default = "default" in schema
        else:
            node.size = int(schema["size"])
        return node


def _avro(info: SchemaInfo) -> _Node:
    try:
        return _AvroParser().parse(json.loads(info.data))
    except (ValueError, KeyError, TypeError) as exc:
        raise IncompatibleSchemaError(f"Invalid {info.type.name} schema definition: {exc}") from exc


def _reads(reader: _Node, writer: _Node, seen: set[tuple[int, int]]) -> bool:
    """True when data written with ``writer`` resolves into ``reader`` (Avro's rules)."""
    key = (id(reader), id(writer))
    if key in seen:
        return True
    seen.add(key)
    if writer.kind == "union":
        return all(_reads(reader, branch, seen) for branch in writer.children)
    if reader.kind == "union":
        return any(_reads(branch, writer, set(seen)) for branch in reader.children)
    if reader.kind in _PRIMITIVES or writer.kind in _PRIMITIVES:
        return reader.kind == writer.kind or (writer.kind, reader.kind) in _PROMOTIONS
    if reader.kind != writer.kind:
        return False
    if reader.kind in ("array", "map"):
        return _reads(reader.children[0], writer.children[0], seen)
    if reader.kind == "fixed":
        return reader.name == writer.name and reader.size == writer.size
    if reader.kind == "enum":
        return reader.has_default or set(writer.symbols) <= set(reader.symbols)
    written = {name: node for name, _, node, _ in writer.fields}
    for name, aliases, node, has_default in reader.fields:
        source = next((written[n] for n in (name, *aliases) if n in written), None)
        if source is None:
            if not has_default:
                return False
        elif not _reads(node, source, seen):
            return False
    return True


def _key_value_parts(info: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo]:
    """A KEY_VALUE definition's key and value schemas (Pulsar's length-prefixed layout)."""
    data = info.data
    try:
        (key_length,) = struct.unpack_from(">i", data, 0)
        key = data[4 : 4 + key_length]
        (value_length,) = struct.unpack_from(">i", data, 4 + key_length)
        value = data[8 + key_length : 8 + key_length + value_length]
        key_type = SchemaType[info.properties.get("key.schema.type", "NONE")]
        value_type = SchemaType[info.properties.get("value.schema.type", "NONE")]
    except (struct.error, KeyError) as exc:
        raise IncompatibleSchemaError(f"Invalid KEY_VALUE schema definition: {exc}") from exc
    return SchemaInfo(key_type, key), SchemaInfo(value_type, value)


def _reads_info(reader: SchemaInfo, writer: SchemaInfo) -> bool:
    if reader.type is not writer.type:
        return False
    if reader.type in (SchemaType.AVRO, SchemaType.JSON):
        return _reads(_avro(reader), _avro(writer), set())
    if reader.type is SchemaType.KEY_VALUE:
        parts = zip(_key_value_parts(reader), _key_value_parts(writer), strict=True)
        return all(_reads_info(r, w) for r, w in parts)
    if reader.type is SchemaType.PROTOBUF_NATIVE:
        return _protobuf_root(reader) == _protobuf_root(writer)
    return reader.data == writer.data


def _protobuf_root(info: SchemaInfo) -> str:
    try:
        return str(json.loads(info.data)["rootMessageTypeName"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IncompatibleSchemaError(f"Invalid PROTOBUF_NATIVE schema definition: {exc}") from exc


def validate(info: SchemaInfo) -> None:
    """Refuse a definition its type cannot have (Pulsar's schema data validator): AVRO and
    JSON must be Avro schemas, PROTOBUF_NATIVE must name its root message, KEY_VALUE
    must hold a key and a value schema that are valid themselves."""
    if info.type in (SchemaType.AVRO, SchemaType.JSON):
        _avro(info)
    elif info.type is SchemaType.PROTOBUF_NATIVE:
        _protobuf_root(info)
    elif info.type is SchemaType.KEY_VALUE:
        for part in _key_value_parts(info):
            validate(part)


def check_compatible(
    new: SchemaInfo, existing: Sequence[SchemaInfo], strategy: CompatibilityStrategy
) -> None:
    """Raise :class:`IncompatibleSchemaError` unless ``new`` may follow ``existing``
    (oldest first, since the last deletion) under ``strategy``."""
    if not existing or strategy is CompatibilityStrategy.ALWAYS_COMPATIBLE:
        return
    if strategy is CompatibilityStrategy.ALWAYS_INCOMPATIBLE:
        raise IncompatibleSchemaError("The topic's schema compatibility is ALWAYS_INCOMPATIBLE")
    transitive = strategy.name.endswith("_TRANSITIVE")
    base = strategy.name.removesuffix("_TRANSITIVE")
    for old in existing if transitive else existing[-1:]:
        if old.type is not new.type:
            raise IncompatibleSchemaError(
                f"Incompatible schema: the topic's schema is {old.type.name}, the new one"
                f" {new.type.name}"
            )
        backward = base in ("BACKWARD", "FULL") and not _reads_info(new, old)
        forward = base in ("FORWARD", "FULL") and not _reads_info(old, new)
        if backward or forward:
            which = "read data written with" if backward else "be read by"
            raise IncompatibleSchemaError(
                f"Incompatible schema under {strategy.value}: it cannot {which} an existing"
                " version of the topic's schema"
            )

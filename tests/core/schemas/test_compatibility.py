"""Compatibility checks: Avro's resolution rules under each of Pulsar's strategies."""

from __future__ import annotations

import json
import struct

import pytest

from cursorops.core.domain.errors import IncompatibleSchemaError
from cursorops.core.domain.schemas import (
    CompatibilityStrategy,
    SchemaInfo,
    SchemaType,
    check_compatible,
)

S = CompatibilityStrategy


def avro(*fields: dict[str, object], name: str = "R") -> SchemaInfo:
    return SchemaInfo(
        SchemaType.AVRO,
        json.dumps({"type": "record", "name": name, "fields": list(fields)}).encode(),
    )


A = {"name": "a", "type": "string"}
B_DEFAULT = {"name": "b", "type": ["null", "int"], "default": None}
B_REQUIRED = {"name": "b", "type": "int"}


def ok(new: SchemaInfo, existing: list[SchemaInfo], strategy: S) -> bool:
    try:
        check_compatible(new, existing, strategy)
    except IncompatibleSchemaError:
        return False
    return True


@pytest.mark.parametrize(
    ("strategy", "add_default", "add_required", "remove_required"),
    [
        (S.BACKWARD, True, False, True),
        (S.FORWARD, True, True, False),
        (S.FULL, True, False, False),
        (S.ALWAYS_COMPATIBLE, True, True, True),
        (S.ALWAYS_INCOMPATIBLE, False, False, False),
    ],
)
def test_adding_and_removing_fields(
    strategy: S, add_default: bool, add_required: bool, remove_required: bool
) -> None:
    old = avro(A)
    assert ok(avro(A, B_DEFAULT), [old], strategy) is add_default
    assert ok(avro(A, B_REQUIRED), [old], strategy) is add_required
    assert ok(avro(A), [avro(A, B_REQUIRED)], strategy) is remove_required


def test_transitive_strategies_check_every_version_the_others_the_latest() -> None:
    versions = [avro(A), avro(A, {"name": "b", "type": "int", "default": 0})]
    new = avro(A, B_REQUIRED)  # reads the latest (it has b), not the first
    assert ok(new, versions, S.BACKWARD)
    assert not ok(new, versions, S.BACKWARD_TRANSITIVE)


def test_promotions_unions_enums_and_names() -> None:
    def one(kind: object) -> SchemaInfo:
        return avro({"name": "x", "type": kind})

    assert ok(one("long"), [one("int")], S.BACKWARD)  # int widens to long
    assert not ok(one("int"), [one("long")], S.BACKWARD)
    assert not ok(one("long"), [one("int")], S.FULL)
    assert ok(one(["null", "string"]), [one("string")], S.BACKWARD)
    assert not ok(one("string"), [one(["null", "string"])], S.BACKWARD)  # null unreadable
    e1 = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    e2 = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    assert ok(one(e2), [one(e1)], S.BACKWARD) and not ok(one(e1), [one(e2)], S.BACKWARD)
    # Records match by fields, not names, as Pulsar's checker (Avro's resolving grammar).
    assert ok(avro(A, name="Other"), [avro(A)], S.FULL)
    f1 = {"type": "fixed", "name": "F", "size": 4}
    assert not ok(one(dict(f1, name="G")), [one(f1)], S.BACKWARD)
    assert not ok(one(dict(f1, size=8)), [one(f1)], S.BACKWARD)
    assert not ok(SchemaInfo(SchemaType.JSON, avro(A).data), [avro(A)], S.ALWAYS_INCOMPATIBLE)


def test_a_recursive_named_type() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}],
    }
    info = SchemaInfo(SchemaType.AVRO, json.dumps(node).encode())
    grown = dict(node, fields=[*node["fields"], B_DEFAULT])  # type: ignore[list-item]
    assert ok(SchemaInfo(SchemaType.AVRO, json.dumps(grown).encode()), [info], S.FULL)


def test_key_value_parts_and_other_types() -> None:
    def kv(value: SchemaInfo) -> SchemaInfo:
        key = b""
        data = struct.pack(">i", 0) + key + struct.pack(">i", len(value.data)) + value.data
        properties = {"key.schema.type": "STRING", "value.schema.type": "AVRO"}
        return SchemaInfo(SchemaType.KEY_VALUE, data, properties)

    assert ok(kv(avro(A, B_DEFAULT)), [kv(avro(A))], S.FULL)
    assert not ok(kv(avro(A, B_REQUIRED)), [kv(avro(A))], S.FULL)
    assert not ok(
        SchemaInfo(SchemaType.PROTOBUF, b"x"), [SchemaInfo(SchemaType.PROTOBUF, b"y")], S.FULL
    )
    with pytest.raises(IncompatibleSchemaError, match="Invalid AVRO"):
        check_compatible(SchemaInfo(SchemaType.AVRO, b"{not json"), [avro(A)], S.FULL)


def test_invalid_definitions_are_refused_even_first() -> None:
    from cursorops.core.domain.schemas import validate

    validate(avro(A))
    validate(SchemaInfo(SchemaType.STRING, b""))
    for bad in (
        SchemaInfo(SchemaType.JSON, b'{"type": "nope"}'),
        SchemaInfo(SchemaType.AVRO, b"[1, 2"),
        SchemaInfo(SchemaType.PROTOBUF_NATIVE, b"{}"),
        SchemaInfo(SchemaType.KEY_VALUE, b"\x00\x00"),
    ):
        with pytest.raises(IncompatibleSchemaError, match="Invalid"):
            validate(bad)

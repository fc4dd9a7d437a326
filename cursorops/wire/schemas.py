"""The wire's ``Schema`` message and the registry's
:class:`~cursorops.core.domain.schemas.SchemaInfo`,
one into the other: the schema a ``CommandProducer`` or ``CommandSubscribe`` carries, and
the one a ``GetSchema`` answers (its handlers: :mod:`cursorops.wire.handlers.admin`).
"""

from __future__ import annotations

from cursorops.core.domain.schemas import SchemaInfo, SchemaType
from cursorops.wire.proto import Proto


def schema_of(body: Proto) -> SchemaInfo | None:
    """The command's schema; None when it has none or declares plain bytes."""
    wire: Proto | None = body.get("schema")
    if wire is None:
        return None
    info = SchemaInfo.of(
        wire.get("type", 0),
        bytes(wire.get("schema_data", b"")),
        [(p.get("key", ""), p.get("value", "")) for p in wire.get("properties", [])],
    )
    return None if info.type is SchemaType.NONE else info


def wire_schema(name: str, info: SchemaInfo) -> Proto:
    return {
        "name": name,
        "schema_data": info.data,
        "type": int(info.type),
        "properties": [{"key": k, "value": v} for k, v in sorted(info.properties.items())],
    }

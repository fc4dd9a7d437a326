"""Pulsar admin v2 routes of the schema registry: a topic's schema, its versions, a new
version, and its deletion. ``data`` is the definition as text (Avro's JSON for AVRO and
JSON schemas), ``type`` Pulsar's name of the schema type (``BYTES`` for none)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel, ConfigDict, Field

from cursorops.core.errors import InvalidArgumentError
from cursorops.core.schemas import SchemaInfo, SchemaType
from cursorops.rest.deps import BrokerDep, RoleDep
from cursorops.rest.paths import base_of, topic_name

router = APIRouter(tags=["schemas"])

Name = Annotated[str, Path(min_length=1)]
SCHEMA = "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema"

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Topic or schema not found"},
    409: {"description": "Incompatible schema"},
    503: {"description": "The stores failed"},
}


class PostSchemaPayload(BaseModel):
    """Pulsar's ``PostSchemaPayload``."""

    model_config = ConfigDict(extra="forbid")
    type: str = Field(max_length=32)
    schema_: str = Field("", alias="schema", max_length=1 << 20)
    properties: dict[str, str] = Field(default_factory=dict, max_length=64)


def _type_name(kind: SchemaType) -> str:
    return "BYTES" if kind is SchemaType.NONE else kind.name


def _type_of(name: str) -> SchemaType:
    if name.upper() == "BYTES":
        return SchemaType.NONE
    try:
        return SchemaType[name.upper()]
    except KeyError:
        raise InvalidArgumentError(f"Unknown schema type {name!r}") from None


def _answer(version: int, info: SchemaInfo, at_ms: int) -> dict[str, Any]:
    return {
        "version": version,
        "type": _type_name(info.type),
        "timestamp": at_ms,
        "data": info.data.decode("utf-8", "replace"),
        "properties": dict(info.properties),
    }


def _topic(tenant: str, namespace: str, topic: str) -> str:
    return base_of(topic_name(tenant, namespace, topic))


@router.get(SCHEMA, responses=_ERRORS)
def get_schema(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> dict[str, Any]:
    """The latest version of the topic's schema."""
    versions = broker.schema_versions(role, _topic(tenant, namespace, topic))
    if not versions:
        raise HTTPException(404, "Schema not found")
    return _answer(*versions[-1])


@router.get(SCHEMA + "/{version}", responses=_ERRORS)
def get_schema_version(
    tenant: Name, namespace: Name, topic: Name, version: int, broker: BrokerDep, role: RoleDep
) -> dict[str, Any]:
    """One version of the topic's schema."""
    for found in broker.schema_versions(role, _topic(tenant, namespace, topic)):
        if found[0] == version:
            return _answer(*found)
    raise HTTPException(404, "Schema not found")


@router.get("/admin/v2/schemas/{tenant}/{namespace}/{topic}/schemas", responses=_ERRORS)
def get_all_versions(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> dict[str, list[dict[str, Any]]]:
    """Every live version, oldest first."""
    versions = broker.schema_versions(role, _topic(tenant, namespace, topic))
    return {"getSchemaResponses": [_answer(*found) for found in versions]}


@router.post(SCHEMA, responses=_ERRORS)
def post_schema(
    tenant: Name,
    namespace: Name,
    topic: Name,
    payload: PostSchemaPayload,
    broker: BrokerDep,
    role: RoleDep,
) -> dict[str, dict[str, int]]:
    """Add a version (or find the identical one) under the topic's compatibility strategy."""
    info = SchemaInfo.of(
        _type_of(payload.type), payload.schema_.encode("utf-8"), payload.properties
    )
    version = broker.put_schema(role, _topic(tenant, namespace, topic), info)
    return {"version": {"version": version}}


@router.delete(SCHEMA, responses=_ERRORS)
def delete_schema(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> dict[str, int | None]:
    """Delete the topic's schema (tenant admins): a deletion version, as Pulsar's."""
    return {"version": broker.delete_schema(role, _topic(tenant, namespace, topic))}

"""The schema registry on Pulsar's admin v2 paths: a topic's schema, its versions, a new
version, and its deletion (``pulsar-admin schemas``). ``data`` is the definition as text
(Avro's JSON for AVRO and JSON schemas), ``type`` Pulsar's name of the schema type
(``BYTES`` for none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cursorops.operations.declaration import TOPIC, Call, Param, base_topic, operation

if TYPE_CHECKING:
    from cursorops.core.domain.schemas import SchemaInfo, SchemaType

SCHEMA_PATH = "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema"
MAX_DEFINITION = 1 << 20
"""The longest schema definition taken, in characters."""


def _type_name(kind: SchemaType) -> str:
    from cursorops.core.domain.schemas import SchemaType

    return "BYTES" if kind is SchemaType.NONE else kind.name


def _type_of(name: str) -> SchemaType:
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.domain.schemas import SchemaType

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


def _schema_lines(answer: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    import json

    shown = {k: answer[k] for k in ("version", "type", "timestamp", "properties")}
    return [*json.dumps(shown, indent=2).splitlines(), "data:", *str(answer["data"]).splitlines()]


def _missing() -> Exception:
    from cursorops.core.domain.errors import NotFoundError

    return NotFoundError("Schema not found")


@operation(
    "schemas",
    "get",
    method="GET",
    path=SCHEMA_PATH,
    params=(TOPIC,),
    help="the latest version of the topic's schema",
    render=_schema_lines,
)
def get_schema(call: Call, topic: str) -> dict[str, Any]:
    """The latest version of the topic's schema."""
    versions = call.broker.schemas.schema_versions(call.role, base_topic(topic))
    if not versions:
        raise _missing()
    return _answer(*versions[-1])


@operation(
    "schemas",
    "get-version",
    method="GET",
    path=SCHEMA_PATH + "/{version}",
    params=(
        TOPIC,
        Param("version", where="path", kind=int, flags=("--version",), help="the version"),
    ),
    help="one version of the topic's schema",
    render=_schema_lines,
)
def get_schema_version(call: Call, topic: str, version: int) -> dict[str, Any]:
    """One version of the topic's schema."""
    for found in call.broker.schemas.schema_versions(call.role, base_topic(topic)):
        if found[0] == version:
            return _answer(*found)
    raise _missing()


@operation(
    "schemas",
    "get-all-versions",
    method="GET",
    path="/admin/v2/schemas/{tenant}/{namespace}/{topic}/schemas",
    params=(TOPIC,),
    help="every live version of the topic's schema, oldest first",
    render=lambda answer, _: (
        [
            f"version {s['version']}  {s['type']}  {len(s['data'])} character(s)"
            for s in answer["getSchemaResponses"]
        ]
        or ["No schema"]
    ),
)
def get_all_versions(call: Call, topic: str) -> dict[str, list[dict[str, Any]]]:
    """Every live version, oldest first."""
    versions = call.broker.schemas.schema_versions(call.role, base_topic(topic))
    return {"getSchemaResponses": [_answer(*found) for found in versions]}


def _shape_upload(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``-f FILE``: Pulsar's ``PostSchemaPayload`` JSON (``type``, ``schema``,
    ``properties``), read here and sent as the request's fields."""
    import json

    from cursorops.core.domain.errors import InvalidArgumentError

    path = given.pop("filename")
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as exc:
        raise InvalidArgumentError(f"Cannot read -f {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise InvalidArgumentError(f"Invalid -f {path}: not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidArgumentError(f"Invalid -f {path}: expected a JSON object")
    return None, {
        **given,
        "type": document.get("type"),
        "definition": document.get("schema", ""),
        "properties": document.get("properties", {}),
    }


@operation(
    "schemas",
    "upload",
    method="POST",
    path=SCHEMA_PATH,
    params=(
        TOPIC,
        Param(
            "filename",
            where="cli",
            flags=("-f", "--filename"),
            help='a JSON file: {"type": ..., "schema": ..., "properties": {...}}',
        ),
        Param("type", where="body", cli=False, limit=32),
        Param(
            "definition", where="body", wire="schema", cli=False, default="", limit=MAX_DEFINITION
        ),
        Param("properties", where="body", kind=dict, cli=False, default=None, limit=64),
    ),
    help="add a schema version (or find the identical one) under the compatibility strategy",
    responses={409: "Incompatible schema"},
    render=lambda answer, v: [f"Schema of {v['topic']} is version {answer['version']['version']}"],
    shape=_shape_upload,
)
def post_schema(
    call: Call, topic: str, type: str, definition: str, properties: dict[str, str] | None
) -> dict[str, dict[str, int]]:
    """Add a version (or find the identical one) under the topic's compatibility strategy."""
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.domain.schemas import SchemaInfo

    pairs = dict(properties or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs.items()):
        raise InvalidArgumentError("Invalid schema properties: expected text keys and values")
    info = SchemaInfo.of(_type_of(type), definition.encode("utf-8"), pairs)
    version = call.broker.schemas.put_schema(call.role, base_topic(topic), info)
    return {"version": {"version": version}}


@operation(
    "schemas",
    "delete",
    method="DELETE",
    path=SCHEMA_PATH,
    params=(TOPIC,),
    help="delete the topic's schema (tenant admins)",
    render=lambda answer, v: [f"Deleted the schema of {v['topic']} (version {answer['version']})"],
)
def delete_schema(call: Call, topic: str) -> dict[str, int | None]:
    """Delete the topic's schema (tenant admins): a deletion version, as Pulsar's."""
    return {"version": call.broker.schemas.delete_schema(call.role, base_topic(topic))}

"""The schema registry's commands: ``GetSchema``, ``GetOrCreateSchema``, and the schema a
``CommandProducer`` or ``CommandSubscribe`` carries (:class:`cursorops.core.broker.Broker`'s
schema registry decides; this module converts the wire's ``Schema`` message).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cursorops.core.errors import CursorOpsError, InvalidArgumentError
from cursorops.core.schemas import SchemaInfo, SchemaType, decode_version, encode_version
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.errors import server_error
from cursorops.wire.frames import Frame, command
from cursorops.wire.proto import Proto

if TYPE_CHECKING:
    from cursorops.wire.server import Connection


def _error_code(exc: CursorOpsError) -> ServerError:
    """The protocol's code for ``exc``: these answers carry it in their own response."""
    return server_error(exc)


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


async def get_schema(connection: Connection, frame: Frame) -> None:
    body = frame.body
    topic = body.get("topic", "")
    raw_version = body.get("schema_version")
    service = connection.service

    def found() -> tuple[int, SchemaInfo] | None:
        version = None if not raw_version else decode_version(bytes(raw_version))
        return service.broker.get_schema(connection.role, topic, version)

    try:
        result = await service.store.run(found)
    except CursorOpsError as exc:
        result, error, message = None, _error_code(exc), str(exc)
    else:
        error, message = ServerError.TopicNotFound, "Topic not found or no-schema"
    if result is None:
        connection.send(
            command(
                CommandType.GET_SCHEMA_RESPONSE,
                request_id=body["request_id"],
                error_code=int(error),
                error_message=message,
            )
        )
        return
    version, info = result
    connection.send(
        command(
            CommandType.GET_SCHEMA_RESPONSE,
            request_id=body["request_id"],
            schema=wire_schema(topic, info),
            schema_version=encode_version(version),
        )
    )


async def get_or_create_schema(connection: Connection, frame: Frame) -> None:
    body = frame.body
    service = connection.service
    topic = body.get("topic", "")

    def put() -> int:
        info = schema_of(body)
        if info is None:
            raise InvalidArgumentError("GetOrCreateSchema without a schema")
        return service.broker.put_schema(connection.role, topic, info)

    try:
        version = await service.store.run(put)
    except CursorOpsError as exc:
        connection.send(
            command(
                CommandType.GET_OR_CREATE_SCHEMA_RESPONSE,
                request_id=body["request_id"],
                error_code=int(_error_code(exc)),
                error_message=str(exc),
            )
        )
        return
    connection.send(
        command(
            CommandType.GET_OR_CREATE_SCHEMA_RESPONSE,
            request_id=body["request_id"],
            schema_version=encode_version(version),
        )
    )

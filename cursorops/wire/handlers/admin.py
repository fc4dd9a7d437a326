"""The connection's housekeeping and the schema registry's commands: ``Ping``, ``Pong``,
``GetSchema``, ``GetOrCreateSchema`` (:class:`cursorops.core.services.broker.Broker`'s schema
registry decides; :mod:`cursorops.wire.schemas` converts the wire's ``Schema``).

A schema command's failure is answered in its own response (its client waits for
that), with the protocol's code for the error.
"""

from __future__ import annotations

from cursorops.core.domain.errors import CursorOpsError, InvalidArgumentError
from cursorops.core.domain.schemas import SchemaInfo, decode_version, encode_version
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.errors import server_error
from cursorops.wire.frames import Frame, command
from cursorops.wire.schemas import schema_of, wire_schema
from cursorops.wire.session import Session


async def ping(session: Session, frame: Frame) -> None:
    session.send(command(CommandType.PONG))


async def pong(session: Session, frame: Frame) -> None:
    return None


async def get_schema(session: Session, frame: Frame) -> None:
    body = frame.body
    topic = body.get("topic", "")
    raw_version = body.get("schema_version")
    service = session.service

    def found() -> tuple[int, SchemaInfo] | None:
        version = None if not raw_version else decode_version(bytes(raw_version))
        return service.broker.schemas.get_schema(session.role, topic, version)

    try:
        result = await service.store.run(found)
    except CursorOpsError as exc:
        result, error, message = None, server_error(exc), str(exc)
    else:
        error, message = ServerError.TopicNotFound, "Topic not found or no-schema"
    if result is None:
        session.send(
            command(
                CommandType.GET_SCHEMA_RESPONSE,
                request_id=body["request_id"],
                error_code=int(error),
                error_message=message,
            )
        )
        return
    version, info = result
    session.send(
        command(
            CommandType.GET_SCHEMA_RESPONSE,
            request_id=body["request_id"],
            schema=wire_schema(topic, info),
            schema_version=encode_version(version),
        )
    )


async def get_or_create_schema(session: Session, frame: Frame) -> None:
    body = frame.body
    service = session.service
    topic = body.get("topic", "")

    def put() -> int:
        info = schema_of(body)
        if info is None:
            raise InvalidArgumentError("GetOrCreateSchema without a schema")
        return service.broker.schemas.put_schema(session.role, topic, info)

    try:
        version = await service.store.run(put)
    except CursorOpsError as exc:
        session.send(
            command(
                CommandType.GET_OR_CREATE_SCHEMA_RESPONSE,
                request_id=body["request_id"],
                error_code=int(server_error(exc)),
                error_message=str(exc),
            )
        )
        return
    session.send(
        command(
            CommandType.GET_OR_CREATE_SCHEMA_RESPONSE,
            request_id=body["request_id"],
            schema_version=encode_version(version),
        )
    )

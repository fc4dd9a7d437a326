"""The answer a failed command gets: in the response its client waits for.

A client waits for a send's receipt, a lookup's or a partitioned-metadata
response, an acknowledgement's response; an error in any other frame would
leave it waiting until its operation timeout. Everything else with a request id
gets a ``CommandError``. Pure functions: the session sends what they return.
"""

from __future__ import annotations

from cursorops.wire.commands import CommandType, LookupType, ServerError
from cursorops.wire.frames import command
from cursorops.wire.proto import Proto


def failure(kind: CommandType, body: Proto, error: ServerError, message: str) -> Proto | None:
    """The answer to command ``kind`` (``body``) failing; None when it answers no request."""
    request_id = body.get("request_id")
    if kind is CommandType.SEND:
        return command(
            CommandType.SEND_ERROR,
            producer_id=body.get("producer_id", 0),
            sequence_id=body.get("sequence_id", 0),
            error=int(error),
            message=message,
        )
    if request_id is None:
        return None
    if kind is CommandType.LOOKUP:
        return lookup_failed(request_id, error, message)
    if kind is CommandType.PARTITIONED_METADATA:
        return partitions_failed(request_id, error, message)
    if kind is CommandType.ACK:
        return command(
            CommandType.ACK_RESPONSE,
            consumer_id=body.get("consumer_id", 0),
            request_id=request_id,
            error=int(error),
            message=message,
        )
    return error_command(request_id, error, message)


def error_command(request_id: int, error: ServerError, message: str) -> Proto:
    return command(CommandType.ERROR, request_id=request_id, error=int(error), message=message)


def lookup_failed(request_id: int, error: ServerError, message: str) -> Proto:
    return command(
        CommandType.LOOKUP_RESPONSE,
        response=int(LookupType.Failed),
        request_id=request_id,
        error=int(error),
        message=message,
    )


def partitions_failed(request_id: int, error: ServerError, message: str) -> Proto:
    # Pulsar's LookupType of this response: 0 Success, 1 Failed.
    return command(
        CommandType.PARTITIONED_METADATA_RESPONSE,
        request_id=request_id,
        response=1,
        error=int(error),
        message=message,
    )

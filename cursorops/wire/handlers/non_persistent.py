"""A non-persistent topic's consumers: their ``Subscribe``, ``Flow``, ``Ack``, ``Seek``...

Nothing is stored, acknowledged, or delivered again; a seek or a redelivery has
nothing to act on (:mod:`cursorops.wire.non_persistent` hands them what is
published while they are connected).
"""

from __future__ import annotations

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.wire.commands import CommandType, SubType
from cursorops.wire.frames import Frame, command
from cursorops.wire.non_persistent import SCHEME, NonPersistentConsumer
from cursorops.wire.proto import Proto
from cursorops.wire.session import Session

COMMANDS = frozenset(
    {
        CommandType.SUBSCRIBE,
        CommandType.FLOW,
        CommandType.ACK,
        CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES,
        CommandType.CLOSE_CONSUMER,
        CommandType.UNSUBSCRIBE,
        CommandType.SEEK,
        CommandType.GET_LAST_MESSAGE_ID,
    }
)
"""Commands a non-persistent consumer's connection sends about it."""


def concerns(session: Session, kind: CommandType, body: Proto) -> bool:
    """True when the command is a non-persistent consumer's (or subscribes one)."""
    if kind not in COMMANDS:
        return False
    if kind is CommandType.SUBSCRIBE:
        return str(body.get("topic", "")).startswith(SCHEME)
    return body.get("consumer_id") in session.non_persistent


async def consumer_command(session: Session, frame: Frame) -> None:
    kind, body = frame.type, frame.body
    if kind is CommandType.SUBSCRIBE:
        await _subscribe(session, body)
        return
    consumer = session.non_persistent[body["consumer_id"]]
    if kind is CommandType.FLOW:
        consumer.permits += body.get("messagePermits", 0)
    elif kind is CommandType.ACK:
        if body.get("request_id") is not None:
            session.send(
                command(
                    CommandType.ACK_RESPONSE,
                    consumer_id=consumer.consumer_id,
                    request_id=body["request_id"],
                )
            )
    elif kind in (CommandType.CLOSE_CONSUMER, CommandType.UNSUBSCRIBE):
        session.service.non_persistent.leave(consumer)
        del session.non_persistent[consumer.consumer_id]
        session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
    elif kind is CommandType.SEEK:
        session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
    elif kind is CommandType.GET_LAST_MESSAGE_ID:
        raise InvalidArgumentError("GetLastMessageId is not supported on non-persistent topics")


async def _subscribe(session: Session, body: Proto) -> None:
    service = session.service
    if body.get("read_compacted"):
        raise InvalidArgumentError("readCompacted only valid on persistent topics")
    name = TopicName.parse(body["topic"])
    consumer_id = body["consumer_id"]
    if consumer_id in session.non_persistent:
        session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
        return
    await service.store.run(service.ensure_topic, session.role, name, Operation.SUBSCRIBE)
    consumer = NonPersistentConsumer(
        consumer_id,
        str(name),
        body["subscription"],
        SubType(body.get("subType", 0)),
        name.partition_index if name.is_partition else -1,
        body.get("priority_level", 0),
        body.get("consumer_name") or f"consumer-{consumer_id}",
        session.transport.write,
    )
    service.non_persistent.subscribe(consumer)
    session.non_persistent[consumer_id] = consumer
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

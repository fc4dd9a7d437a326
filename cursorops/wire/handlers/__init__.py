"""What each command does, grouped by concern: :mod:`.producers`, :mod:`.consumers` (and
:mod:`.non_persistent` for a non-persistent topic's consumers), :mod:`.lookups` and
:mod:`.admin` (ping, pong, the schema registry).

Each handler takes the :class:`~cursorops.wire.session.Session` and the frame, answers
on the session, and raises to have the command answered failed. :func:`dispatch` is
the session's :data:`~cursorops.wire.session.Dispatch`.
"""

from __future__ import annotations

from cursorops.wire.commands import CommandType
from cursorops.wire.handlers import admin, consumers, lookups, non_persistent, producers
from cursorops.wire.proto import Proto
from cursorops.wire.session import Handler, Session

HANDLERS: dict[CommandType, Handler] = {
    CommandType.PING: admin.ping,
    CommandType.PONG: admin.pong,
    CommandType.LOOKUP: lookups.lookup,
    CommandType.PARTITIONED_METADATA: lookups.partitioned_metadata,
    CommandType.PRODUCER: producers.producer,
    CommandType.SEND: producers.send,
    CommandType.CLOSE_PRODUCER: producers.close_producer,
    CommandType.SUBSCRIBE: consumers.subscribe,
    CommandType.FLOW: consumers.flow,
    CommandType.ACK: consumers.ack,
    CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES: consumers.redeliver,
    CommandType.CLOSE_CONSUMER: consumers.close_consumer,
    CommandType.UNSUBSCRIBE: consumers.unsubscribe,
    CommandType.GET_LAST_MESSAGE_ID: consumers.get_last_message_id,
    CommandType.SEEK: consumers.seek,
    CommandType.GET_SCHEMA: admin.get_schema,
    CommandType.GET_OR_CREATE_SCHEMA: admin.get_or_create_schema,
    CommandType.GET_TOPICS_OF_NAMESPACE: lookups.get_topics_of_namespace,
}
"""The commands a connection answers, after CONNECT (the session's own)."""


def dispatch(session: Session, kind: CommandType, body: Proto) -> Handler | None:
    """The handler of command ``kind``; None when it is not supported."""
    if non_persistent.concerns(session, kind, body):
        return non_persistent.consumer_command
    return HANDLERS.get(kind)


__all__ = ["HANDLERS", "dispatch"]

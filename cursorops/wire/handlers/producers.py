"""A connection's producers: ``Producer``, ``Send``, ``CloseProducer``.

A send to a persistent topic is checked against the producer's sequence ids
(:mod:`cursorops.wire.deduplication`), queued for the group commit
(:mod:`cursorops.wire.appender`) and receipted once stored; a send to a
non-persistent topic is receipted at once and handed to the consumers connected now.
Producer access modes and epochs are :mod:`cursorops.wire.producer_access`'s.
"""

from __future__ import annotations

import logging

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.schemas import encode_version
from cursorops.wire.appender import Pending
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.deduplication import Verdict
from cursorops.wire.entries import EntryError, entry_of_send, send_receipt_command
from cursorops.wire.errors import server_error
from cursorops.wire.frames import Frame, FrameError, command, simple_frame
from cursorops.wire.non_persistent import SCHEME
from cursorops.wire.producer_access import access_mode
from cursorops.wire.proto import Proto
from cursorops.wire.refusal import Refusal
from cursorops.wire.schemas import schema_of
from cursorops.wire.session import Session

log = logging.getLogger("cursorops.protocol")

_NO_ID = 2**64 - 1
"""Ledger and entry id -1 on the wire: the receipt of a duplicate, stored nothing."""


def _refuse_busy(session: Session, producer_id: int) -> None:
    if producer_id in session.producers or producer_id in session.waiting_producers:
        raise Refusal(ServerError.ProducerBusy, f"Producer {producer_id} is already open")


async def producer(session: Session, frame: Frame) -> None:
    body = frame.body
    producer_id = body["producer_id"]
    _refuse_busy(session, producer_id)
    name = TopicName.parse(body["topic"])
    service = session.service
    role = session.role
    mode = access_mode(body.get("producer_access_mode", 0))
    schema = schema_of(body)
    producer_name = body.get("producer_name") or (
        f"standalone-{session.id}-{next(session.producer_names)}"
    )

    def open_producer() -> tuple[str, int | None, int | None]:
        base, _ = service.ensure_topic(role, name, Operation.PRODUCE)
        service.broker.access.authorized_topic(role, Operation.PRODUCE, base)
        version = None
        if schema is not None:
            version = service.broker.schemas.put_schema(role, str(name), schema)
        last = None
        if service.broker.policies.deduplication(str(name)):
            last = service.broker.producing.last_sequence_id(role, str(name), producer_name)
        return str(name), version, last

    topic, schema_version, last_stored = await service.store.run(open_producer)
    _refuse_busy(session, producer_id)
    epoch, fenced, admitted = service.producers_of(topic).admit(
        (session, producer_id), producer_name, mode, body.get("topic_epoch")
    )
    for connection, other_id in fenced:
        connection.fence(other_id)
    if admitted is None:
        _ready(session, body, topic, producer_name, epoch, schema_version, last_stored)
        return
    # WaitForExclusive: answered "not ready" now, and ready once it takes the topic;
    # the connection goes on serving meanwhile.
    session.waiting_producers[producer_id] = topic
    session.send(
        command(
            CommandType.PRODUCER_SUCCESS,
            request_id=body["request_id"],
            producer_name=producer_name,
            producer_ready=False,
        )
    )

    async def wait() -> None:
        try:
            epoch = await admitted
        except Refusal as exc:
            if session.waiting_producers.pop(producer_id, None) is not None:
                session.fail(CommandType.PRODUCER, body, exc.code, str(exc))
            return
        if session.waiting_producers.pop(producer_id, None) is not None:
            _ready(session, body, topic, producer_name, epoch, schema_version, last_stored)

    session.spawn(wait())


def _ready(
    session: Session,
    body: Proto,
    topic: str,
    producer_name: str,
    epoch: int | None,
    schema_version: int | None,
    last_stored: int | None,
) -> None:
    deduplication = session.service.deduplication
    if last_stored is None:
        deduplication.forget(topic, producer_name)
    else:
        deduplication.track(topic, producer_name, last_stored)
    session.producers[body["producer_id"]] = (topic, producer_name)
    session.send(
        command(
            CommandType.PRODUCER_SUCCESS,
            request_id=body["request_id"],
            producer_name=producer_name,
            last_sequence_id=deduplication.last_persisted(topic, producer_name),
            producer_ready=True,
            **({} if epoch is None else {"topic_epoch": epoch}),
            **(
                {} if schema_version is None else {"schema_version": encode_version(schema_version)}
            ),
        )
    )


async def send(session: Session, frame: Frame) -> None:
    body = frame.body
    producer_id = body["producer_id"]
    sequence_id = body["sequence_id"]
    found = session.producers.get(producer_id)
    if found is None:
        session.fail(CommandType.SEND, body, ServerError.UnknownError, "no such producer")
        return
    if frame.metadata is None:
        raise FrameError("SEND without a payload")
    try:
        entry = entry_of_send(frame.metadata, frame.payload, frame.raw_metadata)
    except EntryError as exc:
        log.warning("connection %s: unreadable message: %s", session.peer, exc)
        session.fail(CommandType.SEND, body, ServerError.UnknownError, str(exc))
        return
    highest = body.get("highest_sequence_id")
    topic, producer_name = found
    if topic.startswith(SCHEME):
        _publish_non_persistent(session, topic, frame, producer_id, sequence_id, highest)
        return
    deduplication = session.service.deduplication
    verdict = deduplication.check(topic, producer_name, sequence_id, highest or sequence_id)
    if verdict is Verdict.DUPLICATE:
        session.transport.write(
            simple_frame(send_receipt_command(producer_id, sequence_id, _NO_ID, _NO_ID, highest))
        )
        return
    if verdict is Verdict.IN_FLIGHT:
        session.fail(
            CommandType.SEND,
            body,
            ServerError.PersistenceError,
            f"Message {sequence_id} of {producer_name} is being written: send it again",
        )
        return

    def done(position: Position | None, error: BaseException | None) -> None:
        if error is not None or position is None:
            deduplication.failed(topic, producer_name)
            session.fail(CommandType.SEND, body, server_error(error or Exception()), str(error))
            return
        deduplication.persisted(topic, producer_name, sequence_id, highest or sequence_id)
        if not session.transport.is_closing():
            session.transport.write(
                simple_frame(
                    send_receipt_command(
                        producer_id, sequence_id, position.ledger_id, position.entry_id, highest
                    )
                )
            )

    session.service.appender.submit(Pending(session.role, topic, entry, done))


def _publish_non_persistent(
    session: Session,
    topic: str,
    frame: Frame,
    producer_id: int,
    sequence_id: int,
    highest: int | None,
) -> None:
    """Receipted at once with (0, 0), as Pulsar does, and handed to the consumers
    connected now (:mod:`cursorops.wire.non_persistent`)."""
    metadata = frame.metadata or {}
    key = metadata.get("ordering_key") or metadata.get("partition_key", "").encode() or None
    session.service.non_persistent.publish(
        topic,
        frame.raw_metadata,
        frame.payload,
        max(1, int(metadata.get("num_messages_in_batch", 1))),
        key,
    )
    session.transport.write(
        simple_frame(send_receipt_command(producer_id, sequence_id, 0, 0, highest))
    )


async def close_producer(session: Session, frame: Frame) -> None:
    body = frame.body
    producer_id = body["producer_id"]
    found = session.producers.pop(producer_id, None)
    topic = found[0] if found is not None else session.waiting_producers.pop(producer_id, None)
    if topic is not None:
        session.service.producer_gone(topic, (session, producer_id))
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

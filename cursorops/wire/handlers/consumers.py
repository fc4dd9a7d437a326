"""A connection's consumers of persistent topics: ``Subscribe``, ``Flow``, ``Ack``,
``RedeliverUnacknowledgedMessages``, ``CloseConsumer``, ``Unsubscribe``,
``GetLastMessageId``, ``Seek``.

A subscribe opens (or creates) the subscription, joins its dispatcher as one
consumer per identity (:class:`~cursorops.wire.sessions.Registry`) and starts the
consumer's dispatch task on the session; acknowledgements and redeliveries are the
:class:`~cursorops.wire.sessions.WireConsumer`'s, on the store thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    AlreadyExistsError,
    ConflictError,
    ConsumerBusyError,
    InvalidArgumentError,
    NotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.schemas import SchemaInfo
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.gating import reset as reset_slice
from cursorops.core.services.reading.dispatch import Dispatcher
from cursorops.wire.commands import CommandType, InitialPosition, SubType
from cursorops.wire.compacted_reads import skip_compacted_away
from cursorops.wire.consumer_loop import ConsumerLoop, stop
from cursorops.wire.frames import Frame, command
from cursorops.wire.key_shared import requested_ranges
from cursorops.wire.proto import Proto
from cursorops.wire.schemas import schema_of
from cursorops.wire.session import Session
from cursorops.wire.sessions import WireConsumer, signed64

_INT64_MAX = 2**63 - 1
_SUB_TYPES = {
    SubType.Exclusive: SubscriptionType.EXCLUSIVE,
    SubType.Shared: SubscriptionType.SHARED,
    SubType.Failover: SubscriptionType.FAILOVER,
    SubType.Key_Shared: SubscriptionType.KEY_SHARED,
}


@dataclass(frozen=True)
class Subscribe:
    """A ``CommandSubscribe``, read and checked on the loop."""

    body: Proto
    consumer_id: int
    name: TopicName
    subscription: str
    sub_type: SubscriptionType
    consumer_name: str
    durable: bool
    schema: SchemaInfo | None
    read_compacted: bool

    @classmethod
    def of(cls, body: Proto) -> Subscribe:
        consumer_id = body["consumer_id"]
        name = TopicName.parse(body["topic"])
        subscription = body["subscription"]
        sub_type = _SUB_TYPES[SubType(body.get("subType", 0))]
        consumer_name = body.get("consumer_name") or f"consumer-{consumer_id}"
        durable = body.get("durable", True)
        schema = schema_of(body)
        read_compacted = bool(body.get("read_compacted"))
        if read_compacted and sub_type not in (
            SubscriptionType.EXCLUSIVE,
            SubscriptionType.FAILOVER,
        ):
            raise InvalidArgumentError(
                "readCompacted only allowed on failover or exclusive subscriptions"
            )
        return cls(
            body,
            consumer_id,
            name,
            subscription,
            sub_type,
            consumer_name,
            durable,
            schema,
            read_compacted,
        )

    @property
    def registry_key(self) -> tuple[str, str, str]:
        # A reader of a partitioned topic is one consumer per partition, each with a name of
        # its own: its subscription is its own, so they are one identity (as for a consumer).
        name = self.name
        return (
            str(name.base if name.is_partition else name),
            self.subscription,
            self.consumer_name if self.durable else "",
        )

    def start(self) -> tuple[str, Position | None]:
        """Where a subscription this command creates starts: ``earliest`` or ``latest``,
        or after a position."""
        start = self.body.get("initialPosition", InitialPosition.Latest)
        start_id: Proto | None = self.body.get("start_message_id")
        initial = "earliest" if start == InitialPosition.Earliest else "latest"
        if start_id is None:
            return initial, None
        ledger, entry = signed64(start_id["ledgerId"]), signed64(start_id["entryId"])
        if ledger < 0:
            return "earliest", None
        if ledger == _INT64_MAX:
            return "latest", None
        # At the id's entry, as Pulsar's broker starts a non-durable cursor (every start id
        # is a batch id to it): the client drops what its start excludes (the id itself
        # unless inclusive, a batch's earlier indexes).
        return initial, Position(ledger, entry - 1)


async def subscribe(session: Session, frame: Frame) -> None:
    body = frame.body
    if body["consumer_id"] in session.consumers:
        # The client retries a subscribe it gave up waiting for: already done.
        session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
        return
    request = Subscribe.of(body)
    wire = await session.service.store.run(_open_consumer, session, request)
    loop = ConsumerLoop(wire)
    session.consumers[request.consumer_id] = loop
    session.service.watch(loop)
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
    session.start(loop)


def _open_consumer(session: Session, request: Subscribe) -> WireConsumer:
    """On the store thread: the subscription opened or created, the consumer joined."""
    service, role = session.service, session.role
    base, partition = service.ensure_topic(role, request.name, Operation.SUBSCRIBE)
    if request.schema is not None:
        service.broker.schemas.check_consumer_schema(role, base, request.schema)
    existing = _subscription_type(session, request, base)
    if existing is not request.sub_type:
        raise ConsumerBusyError(
            f"Subscription {request.subscription} is of a different type"
            f" ({existing.value if existing else 'deleted'})"
        )
    dispatcher = service.broker.reading.dispatcher(
        role, base, request.subscription, partition=partition if partition >= 0 else None
    )
    wire = _join(session, request, base, partition, dispatcher)
    if request.read_compacted:
        skip_compacted_away(service.broker, role, wire)
    return wire


def _subscription_type(session: Session, request: Subscribe, base: str) -> SubscriptionType | None:
    """The type of the subscription the consumer joins, created if there is none."""
    service, role = session.service, session.role
    broker, subscription = service.broker, request.subscription
    existing = service.subscription_type(role, base, subscription)
    if (
        not request.durable
        and existing is not None
        and (base, subscription) not in (service.non_durable)
    ):
        # A reader's cursor moves freely (seek); where a durable one's is gated, a
        # subscription this process did not make for a reader is durable to it. On
        # other namespaces a reader takes it (as one coming back after a restart).
        if broker.access.authorized_topic(role, Operation.LOOKUP, base).approval_required:
            raise ConflictError(
                f"Durable subscription with the same name already exists: {subscription}"
            )
        service.non_durable.add((base, subscription))
    if existing is not None:
        return existing
    initial, after = request.start()
    try:
        created = broker.admin.create_subscription(
            role,
            base,
            subscription,
            request.sub_type,
            initial_position=initial,
            start_after=after,
        ).type
    except AlreadyExistsError:
        return service.subscription_type(role, base, subscription)
    if not request.durable:
        service.non_durable.add((base, subscription))
    return created


def _join(
    session: Session, request: Subscribe, base: str, partition: int, dispatcher: Dispatcher
) -> WireConsumer:
    """The consumer joined to the subscription's dispatcher, as its connection's identity."""
    service, body = session.service, request.body
    key_shared = request.sub_type is SubscriptionType.KEY_SHARED
    ranges = requested_ranges(body.get("keySharedMeta")) if key_shared else None
    registry_key = request.registry_key
    identity = session.registry.join(registry_key)
    try:
        if key_shared:
            service.key_shared.join(base, request.subscription, identity.consumer_id, ranges)
        core = dispatcher.subscribe(
            request.consumer_name,
            priority=body.get("priority_level", 0),
            consumer_id=identity.consumer_id,
            epoch=body.get("consumer_epoch"),
            hash_ranges=ranges,
        )
    except BaseException:
        if session.registry.leave(registry_key):
            service.key_shared.leave(base, request.subscription, identity.consumer_id)
        raise
    return WireConsumer(
        request.consumer_id,
        str(request.name),
        base,
        request.subscription,
        request.sub_type,
        partition,
        dispatcher,
        core,
        identity,
        registry_key,
        durable=request.durable,
    )


def _consumer(session: Session, body: Proto) -> ConsumerLoop:
    loop = session.consumers.get(body["consumer_id"])
    if loop is None:
        raise NotFoundError(f"Consumer {body['consumer_id']} not found")
    return loop


async def flow(session: Session, frame: Frame) -> None:
    body = frame.body
    loop = session.consumers.get(body["consumer_id"])
    if loop is not None:
        loop.wire.permits += body.get("messagePermits", 0)
        loop.wake.set()


async def ack(session: Session, frame: Frame) -> None:
    body = frame.body
    loop = _consumer(session, body)
    await session.service.store.run(loop.wire.acknowledge, body)
    request_id = body.get("request_id")
    if request_id is not None:
        session.send(
            command(
                CommandType.ACK_RESPONSE,
                consumer_id=body["consumer_id"],
                request_id=request_id,
            )
        )


async def redeliver(session: Session, frame: Frame) -> None:
    body = frame.body
    loop = _consumer(session, body)
    await session.service.store.run(loop.wire.redeliver, body)
    loop.wake.set()


async def close_consumer(session: Session, frame: Frame) -> None:
    body = frame.body
    loop = session.consumers.pop(body["consumer_id"], None)
    if loop is not None:
        await session.close_consumer(loop)
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))


async def unsubscribe(session: Session, frame: Frame) -> None:
    body = frame.body
    loop = _consumer(session, body)
    del session.consumers[body["consumer_id"]]
    await session.close_consumer(loop, unsubscribe=True)
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))


async def get_last_message_id(session: Session, frame: Frame) -> None:
    """The last entry, and the subscription's mark-delete position (the client compares
    them: a reader at the last entry, inclusive, has a message available)."""
    body = frame.body
    wire = _consumer(session, body).wire
    broker = session.service.broker

    def last() -> tuple[Position, Position]:
        state = broker.analysis.cursor_state(session.role, wire.topic, wire.subscription)
        return broker.reading.last_position(session.role, wire.topic), state.mark_delete

    position, mark_delete = await session.service.store.run(last)

    def message_id(at: Position) -> Proto:
        mid: Proto = {"ledgerId": at.ledger_id, "entryId": at.entry_id, "batch_index": -1}
        if wire.partition >= 0:
            mid["partition"] = wire.partition
        return mid

    session.send(
        command(
            CommandType.GET_LAST_MESSAGE_ID_RESPONSE,
            last_message_id=message_id(position),
            consumer_mark_delete_position=message_id(mark_delete),
            request_id=body["request_id"],
        )
    )


async def seek(session: Session, frame: Frame) -> None:
    """Pulsar 4's seek: the subscription's consumers on this partition stop, its cursor
    is reset, and they are disconnected (``CommandCloseConsumer``); each client
    subscribes again and reads from the new position. A refused seek (an
    approval namespace's durable subscription, an unknown id) changes nothing."""
    body = frame.body
    wire = _consumer(session, body).wire
    service = session.service
    mid: Proto | None = body.get("message_id")
    publish_time: int | None = body.get("message_publish_time")
    if mid is None and publish_time is None:
        raise InvalidArgumentError("A seek needs a message id or a publish time")
    position = None
    bits = None
    if mid is not None:
        position = Position(signed64(mid["ledgerId"]), signed64(mid["entryId"]))
        if mid.get("ack_set"):
            bits = ack_set.from_words(mid["ack_set"])
        publish_time = None
    affected = service.consumers_of(wire.topic, wire.subscription)
    for _, loop in affected:
        await stop(loop)

    def reset() -> None:
        reset_slice.seek(
            service.broker.gated,
            session.role,
            wire.topic,
            wire.subscription,
            position=position,
            timestamp_ms=publish_time,
            ack_bits=bits,
            non_durable=not wire.durable,
        )

    try:
        await service.store.run(reset)
    except BaseException:
        for connection, loop in affected:
            connection.resume(loop)
        raise
    for connection, loop in affected:
        await connection.disconnect_for_seek(loop)
    session.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

"""The read path: a subscription's dispatcher and its consumers.

What a consumer receives, per Pulsar's dispatchers:

- Messages of one partition arrive in position order (then batch index);
  partitions are served round-robin.
- Never a message whose entry or batch index is acknowledged (batch-index
  acknowledgement is always on, PIP-391), skipped ones included.
- On Shared and Key_Shared, never a delayed message before its ``deliver_at``;
  Exclusive and Failover deliver delayed messages at once.
- A delivered message stays *pending* on its consumer until acknowledged.
  Negative acknowledgement, ``redeliver_unacknowledged_messages`` or closing
  the consumer makes it available again (redeliveries go first).
- Exclusive and Failover consumers carry a consumer epoch (PIP-84):
  ``redeliver_unacknowledged_messages`` bumps it, the dispatcher rewinds to the
  mark-delete position, and messages stamped with an older epoch that were
  already on their way are dropped by the consumer. So after a redeliver the
  consumer never sees a message newer than the first unacknowledged one.

The dispatcher is in memory and serves one process; acknowledgements go
through :class:`~core.managed_cursor.ManagedCursor` and are durable on return.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from core.cursor import AckTarget
from core.errors import ConflictError, InvalidArgumentError
from core.managed_cursor import ManagedCursor
from core.message_id import MessageId
from core.position import Position
from core.producer import key_partition
from core.subscription import SubscriptionType

_Key = tuple[int, int, int, int]
_MESSAGE_COLUMNS = ("payload", "key", "properties", "publish_time", "producer_name", "sequence_id")
"""(partition slot, ledger, entry, batch index): the order messages are served in."""


@dataclass(frozen=True, slots=True)
class Message:
    message_id: MessageId
    topic: str
    payload: bytes
    key: str | None
    properties: dict[str, str]
    publish_time: int
    deliver_at: int | None
    producer_name: str
    sequence_id: int
    redelivery_count: int = 0
    consumer_epoch: int = -1

    @property
    def position(self) -> Position:
        return self.message_id.position


@dataclass
class PartitionSource:
    """One topic partition as the dispatcher reads it."""

    topic: str
    partition: int
    cursor: ManagedCursor
    load_rows: Callable[[Position], pa.Table]
    """Rows of the partition's entries strictly after a position, in order."""


@dataclass
class _PartitionReader:
    """The partition's rows after mark-delete, as plain column lists, and a read index."""

    source: PartitionSource
    ledger_id: list[int] = field(default_factory=list)
    entry_id: list[int] = field(default_factory=list)
    batch_index: list[int] = field(default_factory=list)
    batch_size: list[int] = field(default_factory=list)
    deliver_at: list[int | None] = field(default_factory=list)
    rest: dict[str, list[Any]] = field(default_factory=dict)
    """payload, key, properties, publish_time, producer_name, sequence_id."""
    next_row: int = 0

    def rewind(self) -> None:
        table = self.source.load_rows(self.source.cursor.mark_delete)
        self.ledger_id = table.column("ledger_id").to_pylist()
        self.entry_id = table.column("entry_id").to_pylist()
        self.batch_index = table.column("batch_index").to_pylist()
        self.batch_size = table.column("batch_size").to_pylist()
        self.deliver_at = table.column("deliver_at").to_pylist()
        self.rest = {name: table.column(name).to_pylist() for name in _MESSAGE_COLUMNS}
        self.next_row = 0

    def __len__(self) -> int:
        return len(self.ledger_id)

    def message(self, row: int) -> Message:
        rest = self.rest
        properties = rest["properties"][row]
        return Message(
            message_id=MessageId.of_store(
                self.ledger_id[row],
                self.entry_id[row],
                self.source.partition,
                self.batch_index[row],
                self.batch_size[row],
            ),
            topic=self.source.topic,
            payload=rest["payload"][row],
            key=rest["key"][row],
            properties=dict(properties) if properties else {},
            publish_time=rest["publish_time"][row],
            deliver_at=self.deliver_at[row],
            producer_name=rest["producer_name"][row],
            sequence_id=rest["sequence_id"][row],
        )


class Consumer:
    """A consumer on a subscription (pulsar-client habits)."""

    def __init__(self, dispatcher: Dispatcher, name: str, receiver_queue_size: int) -> None:
        self.dispatcher = dispatcher
        self.name = name
        self.receiver_queue_size = receiver_queue_size
        self.epoch = 0 if dispatcher.subscription_type.uses_consumer_epoch else -1
        self._incoming: deque[Message] = deque()
        self.wire: deque[Message] = deque()
        """Messages the dispatcher has sent that the client has not taken in yet."""
        self.closed = False

    def receive_many(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` messages available now (never waits)."""
        received: list[Message] = []
        while len(received) < max_messages:
            if not self._incoming:
                self._take_from_wire()
            if not self._incoming:
                self.dispatcher.flow(self, self.receiver_queue_size)
                self._take_from_wire()
            if not self._incoming:
                break
            received.append(self._incoming.popleft())
            if len(self._incoming) + len(self.wire) <= self.receiver_queue_size // 2:
                # Like the client's flow permits: ask for more before running dry.
                self.dispatcher.flow(self, self.receiver_queue_size // 2)
        return received

    def receive(self) -> Message | None:
        got = self.receive_many(1)
        return got[0] if got else None

    def _take_from_wire(self) -> None:
        while self.wire:
            message = self.wire.popleft()
            # PIP-84: drop what was read for an older epoch (-1 = unknown: kept).
            if message.consumer_epoch != -1 and message.consumer_epoch < self.epoch:
                continue
            self._incoming.append(message)

    def acknowledge(self, messages: Message | Sequence[Message]) -> None:
        """Individual acknowledgement; durable when it returns."""
        batch = [messages] if isinstance(messages, Message) else list(messages)
        self.dispatcher.acknowledge(self, batch)

    def acknowledge_cumulative(self, message: Message) -> None:
        """Everything up to this message on its partition (Exclusive and Failover only)."""
        self.dispatcher.acknowledge_cumulative(self, message)

    def negative_acknowledge(self, message: Message) -> None:
        self.dispatcher.negative_acknowledge(self, message)

    def redeliver_unacknowledged_messages(self) -> None:
        if self.epoch >= 0:
            self.epoch += 1
        self._incoming.clear()
        self.dispatcher.redeliver_unacknowledged(self)

    def close(self) -> None:
        self.dispatcher.remove_consumer(self)
        self._incoming.clear()
        self.closed = True


class Dispatcher:
    """Serves one subscription's messages to its consumers."""

    def __init__(
        self,
        subscription_type: SubscriptionType,
        sources: Sequence[PartitionSource],
        clock: Callable[[], int],
    ) -> None:
        self.subscription_type = subscription_type
        self.clock = clock
        self._readers = [_PartitionReader(source) for source in sources]
        self._slots = {source.topic: slot for slot, source in enumerate(sources)}
        for reader in self._readers:
            reader.rewind()
        self._consumers: list[Consumer] = []
        self._pending: dict[_Key, tuple[Consumer, Message]] = {}
        self._redeliver: list[tuple[_Key, Message]] = []
        self._delayed: list[tuple[int, _Key, Message]] = []
        self._redelivery_counts: dict[_Key, int] = {}
        self._turn = itertools.count()

    # -- consumers ------------------------------------------------------------

    def subscribe(self, name: str, receiver_queue_size: int = 1000) -> Consumer:
        exclusive = self.subscription_type is SubscriptionType.EXCLUSIVE
        if exclusive and self._consumers:
            raise ConflictError("Exclusive consumer is already connected")
        if receiver_queue_size < 1:
            raise InvalidArgumentError("receiver_queue_size must be at least 1")
        consumer = Consumer(self, name, receiver_queue_size)
        self._consumers.append(consumer)
        return consumer

    def _active(self) -> Consumer | None:
        """Failover: the first consumer by name is the active one."""
        live = [c for c in self._consumers if not c.closed]
        return min(live, key=lambda c: c.name) if live else None

    def remove_consumer(self, consumer: Consumer) -> None:
        self._release(consumer)
        self._consumers = [c for c in self._consumers if c is not consumer]

    # -- dispatching ----------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Send up to ``permits`` messages to ``consumer``'s wire, redeliveries first."""
        if self.subscription_type is SubscriptionType.FAILOVER and consumer is not self._active():
            return
        for key, message in self._take(consumer, permits):
            stamped = _restamp(message, self._redelivery_counts.get(key, 0), consumer.epoch)
            self._pending[key] = (consumer, stamped)
            consumer.wire.append(stamped)

    def _take(self, consumer: Consumer, permits: int) -> list[tuple[_Key, Message]]:
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, key, message = heapq.heappop(self._delayed)
            heapq.heappush(self._redeliver, (key, message))
        taken: list[tuple[_Key, Message]] = []
        held: list[tuple[_Key, Message]] = []
        while self._redeliver and len(taken) < permits:
            key, message = heapq.heappop(self._redeliver)
            if key in self._pending or self._is_acked(key, message):
                continue
            (taken if self._routes_to(consumer, message) else held).append((key, message))
        for item in held:
            heapq.heappush(self._redeliver, item)
        if len(taken) < permits:
            for key, message in self._read_forward(now):
                if self._routes_to(consumer, message):
                    taken.append((key, message))
                    if len(taken) >= permits:
                        break
                else:
                    heapq.heappush(self._redeliver, (key, message))
        return taken

    def _read_forward(self, now: int) -> Iterator[tuple[_Key, Message]]:
        honour_delay = self.subscription_type.honours_delayed_delivery
        active = [i for i, r in enumerate(self._readers) if r.next_row < len(r)]
        while active:
            for slot in list(active):
                reader = self._readers[slot]
                row = reader.next_row
                if row >= len(reader):
                    active.remove(slot)
                    continue
                reader.next_row += 1
                position = Position(reader.ledger_id[row], reader.entry_id[row])
                key: _Key = (slot, position.ledger_id, position.entry_id, reader.batch_index[row])
                state = reader.source.cursor.state
                if key in self._pending or state.is_acked(position, key[3]):
                    continue
                deliver_at = reader.deliver_at[row]
                if honour_delay and deliver_at is not None and deliver_at > now:
                    heapq.heappush(self._delayed, (deliver_at, key, reader.message(row)))
                    continue
                yield key, reader.message(row)

    def _routes_to(self, consumer: Consumer, message: Message) -> bool:
        if self.subscription_type is not SubscriptionType.KEY_SHARED:
            return True
        live = sorted((c for c in self._consumers if not c.closed), key=lambda c: c.name)
        return live[key_partition(message.key or "", len(live))] is consumer

    def _is_acked(self, key: _Key, message: Message) -> bool:
        cursor = self._readers[key[0]].source.cursor
        return cursor.state.is_acked(message.position, message.message_id.batch_index)

    # -- acknowledgements -----------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: Sequence[Message]) -> None:
        by_slot: dict[int, list[AckTarget]] = {}
        keys = [self._key_of(message) for message in messages]
        for key, message in zip(keys, messages, strict=True):
            by_slot.setdefault(key[0], []).append(_target(message))
        for slot, targets in by_slot.items():
            self._readers[slot].source.cursor.acknowledge(targets)
        for key in keys:
            self._pending.pop(key, None)
            self._redelivery_counts.pop(key, None)

    def acknowledge_cumulative(self, consumer: Consumer, message: Message) -> None:
        if not self.subscription_type.uses_consumer_epoch:
            raise ConflictError(
                f"Cumulative acknowledgement is not supported on a {self.subscription_type.value}"
                " subscription"
            )
        key = self._key_of(message)
        mid = message.message_id
        self._readers[key[0]].source.cursor.acknowledge_cumulative(
            mid.position, mid.batch_index, mid.batch_size
        )
        for pending_key in [k for k in self._pending if k[0] == key[0] and k <= key]:
            del self._pending[pending_key]

    def negative_acknowledge(self, consumer: Consumer, message: Message) -> None:
        key = self._key_of(message)
        if self._pending.pop(key, None) is not None:
            self._redelivery_counts[key] = self._redelivery_counts.get(key, 0) + 1
            heapq.heappush(self._redeliver, (key, message))

    def redeliver_unacknowledged(self, consumer: Consumer) -> None:
        self._release(consumer)
        if self.subscription_type.uses_consumer_epoch:
            # Rewind to mark-delete: everything unacknowledged comes again, in order.
            self._redeliver.clear()
            self._delayed.clear()
            for reader in self._readers:
                reader.source.cursor.refresh()
                reader.rewind()

    def _release(self, consumer: Consumer) -> None:
        for key, (owner, message) in list(self._pending.items()):
            if owner is consumer:
                del self._pending[key]
                self._redelivery_counts[key] = self._redelivery_counts.get(key, 0) + 1
                heapq.heappush(self._redeliver, (key, message))

    def _key_of(self, message: Message) -> _Key:
        slot = self._slots.get(message.topic)
        if slot is None:
            raise InvalidArgumentError(
                f"Message {message.message_id} is not from this subscription"
            )
        mid = message.message_id
        return (slot, mid.ledger_id, mid.entry_id, mid.batch_index)


def _target(message: Message) -> AckTarget:
    mid = message.message_id
    return AckTarget(mid.position, mid.batch_index, mid.batch_size)


def _restamp(message: Message, redelivery_count: int, epoch: int) -> Message:
    if message.redelivery_count == redelivery_count and message.consumer_epoch == epoch:
        return message
    return Message(
        message.message_id,
        message.topic,
        message.payload,
        message.key,
        message.properties,
        message.publish_time,
        message.deliver_at,
        message.producer_name,
        message.sequence_id,
        redelivery_count,
        epoch,
    )

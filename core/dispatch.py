"""The read path: a subscription's dispatcher and its consumers, shared by every process.

What a consumer receives, per Pulsar's dispatchers:

- Messages of one partition arrive in position order (then batch index);
  partitions are served round-robin.
- Never a message whose entry or batch index is acknowledged (batch-index
  acknowledgement is always on, PIP-391), skipped ones included.
- On Shared and Key_Shared, never a delayed message before its ``deliver_at``;
  Exclusive and Failover deliver delayed messages at once.
- A delivered message stays *pending* on its consumer until acknowledged, and
  no other consumer receives it meanwhile. Negative acknowledgement,
  ``redeliver_unacknowledged_messages``, closing the consumer or the lapse of
  its lease makes it deliverable again, with its redelivery count bumped.
- Exclusive refuses a second live consumer ("Exclusive consumer is already
  connected"). Failover: consumers sorted by priority then name; partition
  ``i`` is served by consumer ``i % n`` (a non-partitioned topic by the first).
  Shared: whoever asks gets the next messages nobody holds. Key_Shared: a
  key's hash (Murmur3, ``0..65535``) goes to its consumer on the consistent-
  hashing ring of the live consumers (:mod:`core.key_hash`); a hash whose
  messages are still pending at another consumer is blocked until those are
  acknowledged (PIP-379 draining hashes), so per-key order holds when
  consumers join or leave.
- Exclusive and Failover consumers carry a consumer epoch (PIP-84):
  ``redeliver_unacknowledged_messages`` bumps it and releases the consumer's
  pending messages, so the next read starts again from the first
  unacknowledged one, and messages stamped with an older epoch that were
  already on their way are dropped by the consumer.

Where the state lives: consumers (with leases) and the pending-ack set are in
the metadata store (:mod:`core.store.dispatch_state`). Every dispatch,
acknowledgement and consumer change is one transaction under the
subscription's row lock: dispatch picks the next deliverable messages, records
them pending, commits, and only then hands them over. So consumers of one
subscription in different processes behave as Pulsar's consumers of one
broker. Reads are lazy and start at the partition's stored read position
(Pulsar's ``readPosition``: everything before it is acknowledged or held), so
a dispatch costs what it delivers, not the backlog or the pending set: the
pending rows are looked up per record batch read, and the cursor is loaded
incrementally (only the journal deltas this dispatcher has not seen).
Releasing a message rewinds the read position to it.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from core import cursor_codec
from core.cursor import AckTarget, CursorState
from core.errors import ConflictError, ConsumerBusyError, InvalidArgumentError
from core.key_hash import HashRing, sticky_key_hash
from core.ledger_layout import LedgerLayout
from core.managed_cursor import COMPACT_AFTER_DELTAS
from core.message_id import MessageId
from core.position import Position
from core.store.dispatch_state import (
    ConsumerInfo,
    CursorJournal,
    NewPending,
    PendingInfo,
    PendingKey,
    ReadPosition,
    SubscriptionTransaction,
)
from core.store.metadata import MetadataStore
from core.subscription import SubscriptionType

DEFAULT_LEASE_MS = 30_000


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
    layout: Callable[[], LedgerLayout]
    """The partition's ledgers now."""
    read_after: Callable[[Position], Iterator[pa.RecordBatch]]
    """Record batches of the partition's rows strictly after a position, in order, lazily."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    """An unacknowledged row met while reading a partition."""

    source: PartitionSource
    batch: pa.RecordBatch
    row: int
    ledger_id: int
    entry_id: int
    batch_index: int
    deliver_at: int | None
    key: str | None
    held: PendingInfo | None = None
    """Its pending row, released (no consumer) when it is to be redelivered."""

    @property
    def pending_key(self) -> PendingKey:
        return (self.source.topic, self.ledger_id, self.entry_id, self.batch_index)


_PAYLOAD_COLUMNS = (
    "batch_size",
    "payload",
    "properties",
    "publish_time",
    "producer_name",
    "sequence_id",
)


def _messages(picked: Sequence[tuple[_Candidate, int, int]]) -> list[Message]:
    """Messages of (candidate, redelivery count, epoch), converting each record batch once."""
    rows: dict[int, list[int]] = {}
    batches: dict[int, pa.RecordBatch] = {}
    for candidate, _, _ in picked:
        rows.setdefault(id(candidate.batch), []).append(candidate.row)
        batches[id(candidate.batch)] = candidate.batch
    values: dict[tuple[int, int], dict[str, Any]] = {}
    for key, wanted in rows.items():
        taken = batches[key].select(list(_PAYLOAD_COLUMNS)).take(pa.array(wanted, pa.int64()))
        for row, value in zip(wanted, taken.to_pylist(), strict=True):
            values[(key, row)] = value
    out = []
    for candidate, redelivery_count, epoch in picked:
        value = values[(id(candidate.batch), candidate.row)]
        properties = value["properties"]
        out.append(
            Message(
                message_id=MessageId.of_store(
                    candidate.ledger_id,
                    candidate.entry_id,
                    candidate.source.partition,
                    candidate.batch_index,
                    value["batch_size"],
                ),
                topic=candidate.source.topic,
                payload=value["payload"],
                key=candidate.key,
                properties=dict(properties) if properties else {},
                publish_time=value["publish_time"],
                deliver_at=candidate.deliver_at,
                producer_name=value["producer_name"],
                sequence_id=value["sequence_id"],
                redelivery_count=redelivery_count,
                consumer_epoch=epoch,
            )
        )
    return out


def _unacked(source: PartitionSource, state: CursorState) -> Iterator[_Candidate]:
    """The partition's unacknowledged rows after mark-delete, in order, read lazily."""
    for batch in source.read_after(state.mark_delete):
        ledger = batch.column("ledger_id").to_pylist()
        entry = batch.column("entry_id").to_pylist()
        index = batch.column("batch_index").to_pylist()
        deliver = batch.column("deliver_at").to_pylist()
        keys = batch.column("key").to_pylist()
        for row in range(batch.num_rows):
            if state.is_acked(Position(ledger[row], entry[row]), index[row]):
                continue
            yield _Candidate(
                source, batch, row, ledger[row], entry[row], index[row], deliver[row], keys[row]
            )


class _Scan:
    """One partition read on from its read position in a dispatch, noting how far is settled.

    A message is settled when it is acknowledged or held by a consumer. The
    read position may move to the last entry whose messages were all examined
    and settled, before the first message that was not (delayed, another
    consumer's Key_Shared hash, or not reached).
    """

    def __init__(
        self,
        txn: SubscriptionTransaction,
        source: PartitionSource,
        state: CursorState,
        start: Position,
    ) -> None:
        self.source = source
        self.state = state
        self.start = start
        self.settled_through: Position | None = None
        self._blocked = False
        self._txn = txn

    def unsettled(self) -> None:
        """The message just yielded stays deliverable: the read position stops before it."""
        self._blocked = True

    def candidates(self) -> Iterator[_Candidate]:
        """Unacknowledged messages nobody holds, in order (released ones included)."""
        source, is_acked = self.source, self.state.is_acked
        previous: Position | None = None
        for batch in source.read_after(self.start):
            ledger = batch.column("ledger_id").to_pylist()
            entry = batch.column("entry_id").to_pylist()
            index = batch.column("batch_index").to_pylist()
            pending = self._txn.pending_between(
                source.topic, Position(ledger[0], entry[0]), Position(ledger[-1], entry[-1])
            )
            deliver = keys = None
            for row in range(batch.num_rows):
                position = Position(ledger[row], entry[row])
                if position != previous:
                    if previous is not None and not self._blocked:
                        self.settled_through = previous
                    previous = position
                if is_acked(position, index[row]):
                    continue
                held = pending.get((ledger[row], entry[row], index[row]))
                if held is not None and held.consumer_id is not None:
                    continue
                if deliver is None or keys is None:
                    deliver = batch.column("deliver_at").to_pylist()
                    keys = batch.column("key").to_pylist()
                yield _Candidate(
                    source,
                    batch,
                    row,
                    ledger[row],
                    entry[row],
                    index[row],
                    deliver[row],
                    keys[row],
                    held,
                )
        if previous is not None and not self._blocked:
            self.settled_through = previous


@dataclass
class _CachedCursor:
    """A cursor's state as this dispatcher last read it, to read only newer deltas."""

    cursor_id: int
    snapshot_version: int
    version: int
    state: CursorState
    last_reset: int
    """Version of the last replacing delta read after the snapshot (0: none)."""


def _round_robin(streams: Sequence[Iterator[_Candidate]]) -> Iterator[_Candidate]:
    """One item from each stream in turn, until all are exhausted."""
    active = deque(streams)
    while active:
        stream = active.popleft()
        item = next(stream, None)
        if item is not None:
            yield item
            active.append(stream)


def peek(
    sources: Sequence[PartitionSource], states: Sequence[CursorState], count: int
) -> list[Message]:
    """The next ``count`` unacknowledged messages, delayed and pending ones included."""
    streams = [_unacked(s, state) for s, state in zip(sources, states, strict=True)]
    picked: list[tuple[_Candidate, int, int]] = []
    for candidate in _round_robin(streams):
        picked.append((candidate, 0, -1))
        if len(picked) >= count:
            break
    return _messages(picked)


class Consumer:
    """A consumer on a subscription (pulsar-client habits)."""

    def __init__(
        self, dispatcher: Dispatcher, name: str, receiver_queue_size: int, priority: int = 0
    ) -> None:
        self.dispatcher = dispatcher
        self.name = name
        self.consumer_id = uuid.uuid4().hex
        """Identity in the consumer registry: names may repeat, as in Pulsar."""
        self.priority = priority
        self.receiver_queue_size = receiver_queue_size
        self.epoch = 0 if dispatcher.subscription_type.uses_consumer_epoch else -1
        self._incoming: deque[Message] = deque()
        self.wire: deque[Message] = deque()
        """Messages the dispatcher has sent that the client has not taken in yet."""
        self.closed = False

    def receive_many(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` messages available now (never waits)."""
        received: list[Message] = []
        dry = False
        while len(received) < max_messages:
            if not self._incoming:
                self._take_from_wire()
            if not self._incoming:
                self.dispatcher.flow(self, self.receiver_queue_size)
                self._take_from_wire()
            if not self._incoming:
                break
            received.append(self._incoming.popleft())
            buffered = len(self._incoming) + len(self.wire)
            if not dry and buffered <= self.receiver_queue_size // 2:
                # Like the client's flow permits: ask for more before running dry; once
                # the dispatcher had nothing more, drain the buffer before asking again.
                self.dispatcher.flow(self, self.receiver_queue_size // 2)
                dry = len(self._incoming) + len(self.wire) == buffered
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
        if not self.closed:
            self.dispatcher.remove_consumer(self)
        self._incoming.clear()
        self.wire.clear()
        self.closed = True


class Dispatcher:
    """Serves one subscription's messages to its consumers, in any number of processes."""

    def __init__(
        self,
        subscription_type: SubscriptionType,
        store: MetadataStore,
        topic: str,
        subscription: str,
        sources: Sequence[PartitionSource],
        clock: Callable[[], int],
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        if lease_ms < 1:
            raise InvalidArgumentError("The consumer lease must be at least 1 ms")
        self.subscription_type = subscription_type
        self.store = store
        self.topic = topic
        self.subscription = subscription
        self.clock = clock
        self.lease_ms = lease_ms
        self._sources = list(sources)
        self._by_topic = {source.topic: source for source in sources}
        self._cursors: dict[str, _CachedCursor] = {}

    def _transaction(self) -> AbstractContextManager[SubscriptionTransaction]:
        return self.store.subscription_transaction(self.topic, self.subscription, self.clock())

    # -- consumers ------------------------------------------------------------

    def subscribe(self, name: str, receiver_queue_size: int = 1000, priority: int = 0) -> Consumer:
        if receiver_queue_size < 1:
            raise InvalidArgumentError("receiver_queue_size must be at least 1")
        consumer = Consumer(self, name, receiver_queue_size, priority)
        with self._transaction() as txn:
            self._join(txn, consumer)
        return consumer

    def _join(self, txn: SubscriptionTransaction, consumer: Consumer) -> list[ConsumerInfo]:
        """Register or renew ``consumer``; the live consumers after it joined."""
        txn.expire_leases()
        if self.subscription_type is SubscriptionType.EXCLUSIVE:
            others = [c for c in txn.consumers() if c.consumer_id != consumer.consumer_id]
            if others:
                raise ConsumerBusyError("Exclusive consumer is already connected")
        txn.upsert_consumer(
            consumer.consumer_id, consumer.name, consumer.priority, consumer.epoch, self.lease_ms
        )
        return txn.consumers()

    def remove_consumer(self, consumer: Consumer) -> None:
        with self._transaction() as txn:
            txn.remove_consumer(consumer.consumer_id)

    # -- dispatching ----------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Send up to ``permits`` messages to ``consumer``'s wire.

        One transaction under the subscription's lock: choose, record pending,
        move the read positions, commit; the messages reach the wire only once
        they are recorded.
        """
        if consumer.closed or permits < 1:
            return
        layouts = {source.topic: source.layout() for source in self._sources}
        compact: list[tuple[str, CursorState, int]] = []
        with self._transaction() as txn:
            live = self._join(txn, consumer)
            served = self._served(consumer, live)
            if self.subscription_type is SubscriptionType.FAILOVER:
                self._take_over(txn, consumer, served)
            scans = []
            versions = []
            for source in served:
                state, journal, start = self._cursor(txn, source.topic, layouts[source.topic])
                scans.append(_Scan(txn, source, state, start))
                versions.append(journal.version)
                if journal.version - journal.snapshot_version >= COMPACT_AFTER_DELTAS:
                    compact.append((source.topic, state, journal.version))
            chosen = self._choose(txn, consumer, live, scans, permits)
            txn.record_pending(
                [p for p, redelivery, _ in chosen if not redelivery],
                [p for p, redelivery, _ in chosen if redelivery],
            )
            for scan, version in zip(scans, versions, strict=True):
                if scan.settled_through is not None and scan.settled_through > scan.start:
                    txn.set_read_position(
                        scan.source.topic, ReadPosition(scan.settled_through, version)
                    )
            messages = _messages([picked for _, _, picked in chosen])
        for topic, state, version in compact:
            self.store.compact_cursor(topic, self.subscription, cursor_codec.encode(state), version)
        consumer.wire.extend(messages)

    def _cursor(
        self, txn: SubscriptionTransaction, topic: str, layout: LedgerLayout
    ) -> tuple[CursorState, CursorJournal, Position]:
        """The cursor's state now, its journal read, and where this dispatch reads on from.

        Only deltas this dispatcher has not seen are read and merged. Pending
        rows through mark-delete are dropped when it moves (acknowledged by
        other means, such as a skip). The read position counts only when no
        reset can have happened since it was set.
        """
        cached = self._cursors.get(topic)
        known = (
            None if cached is None else (cached.cursor_id, cached.snapshot_version, cached.version)
        )
        journal = txn.cursor_since(topic, known)
        before = None if cached is None else cached.state.mark_delete
        if journal.reloaded or cached is None:
            state = CursorState()
            if journal.snapshot is not None:
                state, _ = cursor_codec.decode(journal.snapshot)
            last_reset = 0
            for version, payload in journal.deltas:
                delta, replace = cursor_codec.decode(payload)
                if replace:
                    state, last_reset = delta, version
                else:
                    state.merge(delta, None)
            state.normalize(layout)
        else:
            state, last_reset = cached.state, cached.last_reset
            for version, payload in journal.deltas:
                delta, replace = cursor_codec.decode(payload)
                if replace:
                    state, last_reset = delta, version
                    state.normalize(layout)
                else:
                    state.merge(delta, layout)
            if not journal.deltas:
                # New ledgers may let mark-delete advance; an empty merge costs no sweep.
                state.merge(CursorState(), layout)
        self._cursors[topic] = _CachedCursor(
            journal.cursor_id, journal.snapshot_version, journal.version, state, last_reset
        )
        if before is None or state.mark_delete != before:
            txn.drop_pending_through(topic, state.mark_delete, -1)
        start = state.mark_delete
        read = journal.read_position
        if (
            read is not None
            and read.cursor_version >= journal.snapshot_version
            and read.cursor_version >= last_reset
            and read.settled_through > start
        ):
            start = read.settled_through
        return state, journal, start

    def _served(self, consumer: Consumer, live: Sequence[ConsumerInfo]) -> list[PartitionSource]:
        """The partitions ``consumer`` may read: all, or on Failover those it is active on."""
        if self.subscription_type is not SubscriptionType.FAILOVER:
            return self._sources
        ordered = [c.consumer_id for c in live]
        return [
            source
            for source in self._sources
            if ordered[max(source.partition, 0) % len(ordered)] == consumer.consumer_id
        ]

    @staticmethod
    def _take_over(
        txn: SubscriptionTransaction, consumer: Consumer, served: Sequence[PartitionSource]
    ) -> None:
        """Failover: what a former active consumer of these partitions holds comes to this one."""
        for source in served:
            for holder in sorted(txn.holders(source.topic) - {consumer.consumer_id}):
                txn.release(holder, topic_partition=source.topic)

    @staticmethod
    def _draining(
        txn: SubscriptionTransaction, consumer: Consumer, scans: Sequence[_Scan]
    ) -> set[int]:
        """PIP-379: hashes still pending at another consumer are blocked for this one.

        A held message acknowledged by other means (a skip) no longer blocks its
        hash: its pending row is dropped.
        """
        states = {scan.source.topic: scan.state for scan in scans}
        held = txn.held_elsewhere(consumer.consumer_id)
        done = [
            key
            for key in held
            if key[0] in states and states[key[0]].is_acked(Position(key[1], key[2]), key[3])
        ]
        if done:
            txn.drop_pending(done)
            for key in done:
                del held[key]
        return set(held.values())

    def _choose(
        self,
        txn: SubscriptionTransaction,
        consumer: Consumer,
        live: Sequence[ConsumerInfo],
        scans: Sequence[_Scan],
        permits: int,
    ) -> list[tuple[NewPending, bool, tuple[_Candidate, int, int]]]:
        """The next messages for ``consumer``: (pending row, is it a redelivery, message)."""
        me = consumer.consumer_id
        now = self.clock()
        honour_delay = self.subscription_type.honours_delayed_delivery
        key_shared = self.subscription_type is SubscriptionType.KEY_SHARED
        ring = HashRing([c.consumer_id for c in live]) if key_shared else None
        draining = self._draining(txn, consumer, scans) if key_shared else set()
        by_topic = {scan.source.topic: scan for scan in scans}
        chosen: list[tuple[NewPending, bool, tuple[_Candidate, int, int]]] = []
        for candidate in _round_robin([scan.candidates() for scan in scans]):
            held = candidate.held
            if honour_delay and candidate.deliver_at is not None and candidate.deliver_at > now:
                by_topic[candidate.source.topic].unsettled()
                continue
            key_hash = None
            if ring is not None:
                key_hash = sticky_key_hash(candidate.key)
                if ring.select(key_hash) != me or key_hash in draining:
                    by_topic[candidate.source.topic].unsettled()
                    continue
            count = held.redelivery_count if held is not None else 0
            pending_row = NewPending(candidate.pending_key, me, count, key_hash)
            chosen.append((pending_row, held is not None, (candidate, count, consumer.epoch)))
            if len(chosen) >= permits:
                break
        return chosen

    # -- acknowledgements -----------------------------------------------------

    def acknowledge(self, consumer: Consumer, messages: Sequence[Message]) -> None:
        by_topic: dict[str, list[AckTarget]] = {}
        keys: list[PendingKey] = []
        for message in messages:
            key = self._key_of(message)
            keys.append(key)
            mid = message.message_id
            by_topic.setdefault(key[0], []).append(
                AckTarget(mid.position, mid.batch_index, mid.batch_size)
            )
        if not keys:
            return
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            for topic in sorted(by_topic):
                delta = CursorState.ack_delta(by_topic[topic])
                txn.append_cursor_delta(topic, cursor_codec.encode(delta))
            txn.drop_pending(keys)

    def acknowledge_cumulative(self, consumer: Consumer, message: Message) -> None:
        if not self.subscription_type.uses_consumer_epoch:
            raise ConflictError(
                f"Cumulative acknowledgement is not supported on a {self.subscription_type.value}"
                " subscription"
            )
        topic = self._key_of(message)[0]
        mid = message.message_id
        layout = self._by_topic[topic].layout()
        delta = CursorState().acknowledge_cumulative(
            mid.position, layout, mid.batch_index, mid.batch_size
        )
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            txn.append_cursor_delta(topic, cursor_codec.encode(delta))
            txn.drop_pending_through(topic, mid.position, mid.batch_index)

    def negative_acknowledge(self, consumer: Consumer, message: Message) -> None:
        key = self._key_of(message)
        with self._transaction() as txn:
            txn.renew_lease(consumer.consumer_id, self.lease_ms)
            txn.release(consumer.consumer_id, [key])

    def redeliver_unacknowledged(self, consumer: Consumer) -> None:
        """Release everything the consumer holds; on Exclusive/Failover it reads again in order."""
        with self._transaction() as txn:
            txn.release(consumer.consumer_id)
            if txn.renew_lease(consumer.consumer_id, self.lease_ms):
                txn.upsert_consumer(
                    consumer.consumer_id,
                    consumer.name,
                    consumer.priority,
                    consumer.epoch,
                    self.lease_ms,
                )

    def _key_of(self, message: Message) -> PendingKey:
        if message.topic not in self._by_topic:
            raise InvalidArgumentError(
                f"Message {message.message_id} is not from this subscription"
            )
        mid = message.message_id
        return (message.topic, mid.ledger_id, mid.entry_id, mid.batch_index)

"""The façade every front door calls: CLI, REST plugin, Airflow tasks.

A :class:`Broker` owns the two stores and answers admin and client
operations with Pulsar's semantics, checking the caller's role first. It holds
no cursor state between calls: each call loads what it needs from the stores,
so several processes may share one installation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core import authz, backlog, cursor_codec, skip
from core.authz import Operation
from core.backlog import PartitionAnalysis
from core.config import Config
from core.cursor import CursorState
from core.dispatch import Dispatcher, Message, PartitionSource
from core.errors import (
    InvalidArgumentError,
    NotAuthorizedError,
    NotFoundError,
    PositionOutOfRangeError,
    UnsupportedSubscriptionTypeError,
)
from core.filters import EntryFilters, first_messages
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor, acknowledge_together
from core.message_id import MessageId
from core.position import EARLIEST, Position
from core.producer import OutgoingMessage, Producer
from core.store.ledger import LedgerStore
from core.store.metadata import MetadataStore, SubscriptionInfo, TopicInfo
from core.subscription import SubscriptionType
from core.topic_name import TopicName


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: Config, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        self.metadata = MetadataStore.from_config(config)
        self.ledgers = LedgerStore.from_config(config, self.metadata)

    def close(self) -> None:
        self.metadata.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- authorization -------------------------------------------------------

    def _check(
        self,
        role: str,
        operation: Operation,
        tenant: str,
        resource: str,
        namespace: str | None = None,
    ) -> None:
        """Authorize before anything is looked up, so a refusal never reveals what exists."""
        if role in self.config.superuser_roles:
            return
        if operation is Operation.SUPERUSER:
            authz.check(role, operation, resource, superusers=self.config.superuser_roles)
            return
        try:
            tenant_admins = self.metadata.get_tenant(tenant).admin_roles
            granted: Iterable[str] = ()
            if namespace is not None and operation is not Operation.ADMIN_TENANT:
                granted = self.metadata.get_namespace(namespace).permissions.get(role, ())
        except NotFoundError as exc:
            raise NotAuthorizedError(
                f"Role '{role}' is not authorized to {operation.value} on {resource}"
            ) from exc
        authz.check(
            role,
            operation,
            resource,
            superusers=self.config.superuser_roles,
            tenant_admins=tenant_admins,
            granted_actions=granted,
        )

    def authorized_topic(self, role: str, operation: Operation, topic: str) -> TopicInfo:
        """Parse ``topic``, check ``role`` for ``operation`` on it, and load it.

        The one authorization rule of every topic operation, for the Python
        path and for the Spark jobs alike. A partition's name is refused: give
        the topic.
        """
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidArgumentError(f"'{topic}' names a partition; give the topic '{name.base}'")
        self._check(role, operation, name.tenant, str(name), name.namespace_name)
        return self.metadata.get_topic(str(name))

    # -- tenants, namespaces, topics, subscriptions --------------------------

    def create_tenant(self, role: str, tenant: str, admin_roles: Iterable[str] = ()) -> None:
        self._check(role, Operation.SUPERUSER, tenant, f"creating tenant {tenant}")
        self.metadata.create_tenant(tenant, admin_roles)

    def list_tenants(self, role: str) -> list[str]:
        """Superusers only, as in Pulsar."""
        self._check(role, Operation.SUPERUSER, "", "listing tenants")
        return self.metadata.list_tenants()

    def list_topics(self, role: str, namespace: str) -> list[TopicInfo]:
        """Pulsar's GET_TOPICS: tenant admins, or any role that may produce or consume there."""
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.LOOKUP, tenant, f"namespace {namespace}", namespace)
        return self.metadata.list_topics(namespace)

    def create_namespace(self, role: str, namespace: str) -> None:
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.ADMIN_TENANT, tenant, f"namespace {namespace}")
        self.metadata.create_namespace(namespace)

    def grant_permission(
        self, role: str, namespace: str, grantee: str, actions: Iterable[str]
    ) -> None:
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.ADMIN_TENANT, tenant, f"namespace {namespace}")
        self.metadata.grant_permission(namespace, grantee, actions)

    def create_topic(self, role: str, topic: str, partitions: int = 0) -> TopicInfo:
        name = TopicName.parse(topic)
        self._check(role, Operation.ADMIN_TENANT, name.tenant, str(name))
        return self.metadata.create_topic(str(name), partitions)

    def create_subscription(
        self,
        role: str,
        topic: str,
        subscription: str,
        type: SubscriptionType = SubscriptionType.EXCLUSIVE,
        properties: Mapping[str, str] | None = None,
        initial_position: str = "latest",
    ) -> SubscriptionInfo:
        """Create a subscription at the latest (default, like pulsar-admin) or earliest position."""
        info = self.authorized_topic(role, Operation.CONSUME, topic)
        if initial_position not in ("latest", "earliest"):
            raise InvalidArgumentError(
                f"Invalid initial position '{initial_position}': latest or earliest"
            )
        if not subscription or not subscription.strip():
            raise InvalidArgumentError("Subscription name must not be empty")
        snapshots = {}
        for partition in info.partition_names():
            state = CursorState()
            if initial_position == "latest":
                state.mark_delete = self._layout(partition).last_position
            snapshots[partition] = cursor_codec.encode(state)
        return self.metadata.create_subscription(
            info.name, subscription, type, dict(properties or {}), snapshots
        )

    # -- producing -----------------------------------------------------------

    def produce(
        self,
        role: str,
        topic: str,
        messages: Sequence[OutgoingMessage],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> list[MessageId]:
        info = self.authorized_topic(role, Operation.PRODUCE, topic)
        producer = Producer(self.ledgers, info, producer_name=producer_name, batch_size=batch_size)
        return producer.send(messages, self.clock())

    # -- cursors -------------------------------------------------------------

    def _layout(self, topic_partition: str) -> LedgerLayout:
        return LedgerLayout.of(
            (info.ledger_id, info.entries) for info in self.metadata.ledgers(topic_partition)
        )

    def _cursor(
        self, topic_partition: str, subscription: str, layout: LedgerLayout | None = None
    ) -> ManagedCursor:
        """Open a cursor; pass ``layout`` when the caller already read the ledger list."""
        return ManagedCursor.open(
            self.metadata,
            topic_partition,
            subscription,
            layout if layout is not None else self._layout(topic_partition),
        )

    def _entry_arrays(self, topic_partition: str) -> skip.EntryFacts:
        index = self.ledgers.entry_index(TopicName.parse(topic_partition))
        return skip.EntryFacts(
            layout=self._layout(topic_partition),
            ledger_ids=np.asarray(index.ledger_id, dtype=np.int64),
            entry_ids=np.asarray(index.entry_id, dtype=np.int64),
            batch_sizes=np.asarray(index.batch_size, dtype=np.int64),
            deliver_at=np.asarray(index.deliver_at, dtype=np.int64),
        )

    def skip_messages(
        self, role: str, topic: str, subscription: str, ids: Sequence[MessageId]
    ) -> skip.SkipOutcome:
        """PIP-423 skip: validate everything, then acknowledge, per partition.

        Raises before writing anything when any id is bad. Shared and Key_Shared
        only ("Unsupported subscription type." otherwise).
        """
        items = self.plan_skip(role, topic, subscription, ids)
        return self.apply_skip(role, topic, subscription, items)

    def plan_skip(
        self, role: str, topic: str, subscription: str, ids: Sequence[MessageId]
    ) -> list[skip.SkipItem]:
        """Validate and route ``ids`` without changing anything (the preview)."""
        info = self.authorized_topic(role, Operation.SKIP, topic)
        sub = self.metadata.get_subscription(info.name, subscription)
        if not sub.type.allows_skip:
            raise UnsupportedSubscriptionTypeError(
                f"Unsupported subscription type. Skipping messages needs a Shared or "
                f"Key_Shared subscription; '{subscription}' is {sub.type.value}"
            )
        if not ids:
            raise InvalidArgumentError("No message ids given")
        owners: dict[int, tuple[str, int]] = {}
        for index, partition in enumerate(info.partition_names()):
            for ledger in self.metadata.ledgers(partition):
                owners[ledger.ledger_id] = (partition, index if info.partitions else -1)
        wanted = {owners[m.ledger_id][0] for m in ids if m.ledger_id in owners}
        facts = {name: self._entry_arrays(name) for name in wanted}
        states = {
            name: self._cursor(name, subscription, facts[name].layout).state for name in wanted
        }
        return skip.validate(ids, owners, facts, states)

    def apply_skip(
        self, role: str, topic: str, subscription: str, items: Sequence[skip.SkipItem]
    ) -> skip.SkipOutcome:
        """Acknowledge validated items; idempotent (already acknowledged ones are reported)."""
        info = self.authorized_topic(role, Operation.SKIP, topic)
        outcome = skip.SkipOutcome(info.name, subscription)
        work = []
        applied: set[tuple[Position, int]] = set()
        for name, targets in skip.group_targets(items).items():
            cursor = self._cursor(name, subscription)
            fresh = [t for t in targets if not cursor.state.is_acked(t.position, t.batch_index)]
            if fresh:
                work.append((cursor, fresh))
            applied.update((t.position, t.batch_index) for t in fresh)
            outcome.per_partition[name] = len(fresh)
        acknowledge_together(work)
        for item in items:
            key = (item.message_id.position, item.message_id.batch_index)
            (outcome.skipped if key in applied else outcome.already_acknowledged).append(
                item.message_id
            )
        self.metadata.record_audit(
            "skip",
            info.name,
            subscription,
            role,
            outcome.to_json(),
            self.clock(),
        )
        return outcome

    def reset_cursor(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> dict[str, str]:
        """Reset to a position (non-partitioned topics) or to a publish time (any topic).

        With a time, each partition's next entry becomes its first entry
        published at or after that time. Returns the new mark-delete per partition.
        """
        info = self.authorized_topic(role, Operation.CONSUME, topic)
        self.metadata.get_subscription(info.name, subscription)
        if (position is None) == (timestamp_ms is None):
            raise InvalidArgumentError("Give exactly one of a message id or a time")
        if position is not None and info.partitions:
            raise InvalidArgumentError(
                "Reset to a message id needs a non-partitioned topic; use a time on "
                f"partitioned topic {info.name}"
            )
        layout = self._layout(info.name) if position is not None else None
        if position is not None and layout is not None:
            last = layout.last_position
            end = Position(last.ledger_id, last.entry_id + 1)
            if position not in (EARLIEST, end) and not layout.contains(position):
                raise PositionOutOfRangeError(
                    f"Cannot reset to {position}: no such entry (the last entry is {last})"
                )
        result = {}
        for name in info.partition_names():
            cursor = self._cursor(name, subscription, layout)
            target = position if position is not None else self._first_at(name, timestamp_ms or 0)
            cursor.reset(target)
            result[name] = str(cursor.mark_delete)
        return result

    def _first_at(self, topic_partition: str, timestamp_ms: int) -> Position:
        index = self.ledgers.entry_index(TopicName.parse(topic_partition))
        publish = np.asarray(index.publish_time, dtype=np.int64)
        rows = np.flatnonzero(publish >= timestamp_ms)
        if rows.size == 0:
            layout = self._layout(topic_partition)
            last = layout.last_position
            return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST
        row = int(rows[0])
        return Position(int(index.ledger_id[row]), int(index.entry_id[row]))

    # -- reading -------------------------------------------------------------

    def _sources(self, info: TopicInfo, subscription: str) -> list[PartitionSource]:
        sources = []
        for index, name in enumerate(info.partition_names()):
            topic_name = TopicName.parse(name)
            cursor = self._cursor(name, subscription)

            def load(after: Position, topic_name: TopicName = topic_name) -> pa.Table:
                table = self.ledgers.read_table(topic_name)
                keep = pc.or_(
                    pc.greater(table["ledger_id"], after.ledger_id),
                    pc.and_(
                        pc.equal(table["ledger_id"], after.ledger_id),
                        pc.greater(table["entry_id"], after.entry_id),
                    ),
                )
                return table.filter(keep)

            sources.append(PartitionSource(name, index if info.partitions else -1, cursor, load))
        return sources

    def dispatcher(self, role: str, topic: str, subscription: str) -> Dispatcher:
        info = self.authorized_topic(role, Operation.CONSUME, topic)
        sub = self.metadata.get_subscription(info.name, subscription)
        return Dispatcher(sub.type, self._sources(info, subscription), self.clock)

    def consume(
        self, role: str, topic: str, subscription: str, count: int, *, ack: bool = False
    ) -> list[Message]:
        """Receive up to ``count`` messages available now; acknowledge them when ``ack``."""
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        dispatcher = self.dispatcher(role, topic, subscription)
        consumer = dispatcher.subscribe("cursorops-cli", receiver_queue_size=min(count, 1000))
        messages = consumer.receive_many(count)
        if ack and messages:
            consumer.acknowledge(messages)
        consumer.close()
        return messages

    def peek_messages(self, role: str, topic: str, subscription: str, count: int) -> list[Message]:
        """The next ``count`` unacknowledged messages, delayed ones included, without delivering."""
        info = self.authorized_topic(role, Operation.LOOKUP, topic)
        self.metadata.get_subscription(info.name, subscription)
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        dispatcher = Dispatcher(
            SubscriptionType.EXCLUSIVE, self._sources(info, subscription), self.clock
        )
        return dispatcher.subscribe("peek", receiver_queue_size=count).receive_many(count)

    # -- backlog -------------------------------------------------------------

    def analyze_backlog(
        self, role: str, topic: str, subscription: str | None = None
    ) -> list[PartitionAnalysis]:
        """PIP-187 analysis, exact and uncapped, per partition and subscription.

        ``subscription`` None analyses every subscription of the topic. Each
        subscription's entry filters (its ``entryFilter.*`` properties) decide the
        accepted / rejected / rescheduled split, from each entry's first message.
        """
        info = self.authorized_topic(role, Operation.LOOKUP, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        filters = {sub.name: EntryFilters.from_properties(sub.properties) for sub in subs}
        needed = sorted(frozenset().union(*(f.columns for f in filters.values())))
        out = []
        for name in info.partition_names():
            facts = self._entry_arrays(name)
            first_rows = None
            if needed:
                table = self.ledgers.read_table(
                    TopicName.parse(name), columns=["ledger_id", "entry_id", "batch_index", *needed]
                )
                first_rows = first_messages(table)
            for sub in subs:
                state = self._cursor(name, sub.name, facts.layout).state
                chosen = filters[sub.name]
                verdicts = (
                    chosen.verdicts(first_rows) if chosen and first_rows is not None else None
                )
                result = backlog.analyze(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes, verdicts
                )
                out.append(PartitionAnalysis(name, sub.name, result))
        return out

    def topic_stats(self, role: str, topic: str) -> dict[str, object]:
        """Pulsar-style topic stats; ``msgBacklog`` here is exact in messages."""
        info = self.authorized_topic(role, Operation.LOOKUP, topic)
        subs = self.metadata.list_subscriptions(info.name)
        stats: dict[str, object] = {"topic": info.name, "partitions": info.partitions}
        entries = messages = 0
        sub_stats: dict[str, dict[str, object]] = {
            s.name: {
                "type": s.type.value,
                "properties": s.properties,
                "msgBacklog": 0,
                "backlogEntries": 0,
                "markDeletePosition": {},
                "individuallyDeletedRanges": 0,
                "partlyAckedBatches": 0,
            }
            for s in subs
        }
        for name in info.partition_names():
            facts = self._entry_arrays(name)
            entries += int(facts.ledger_ids.size)
            messages += int(np.maximum(facts.batch_sizes, 1).sum())
            for sub in subs:
                state = self._cursor(name, sub.name, facts.layout).state
                counts = backlog.backlog(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes
                )
                one = sub_stats[sub.name]
                one["msgBacklog"] = int(one["msgBacklog"]) + counts.messages  # type: ignore[call-overload]
                one["backlogEntries"] = int(one["backlogEntries"]) + counts.entries  # type: ignore[call-overload]
                one["markDeletePosition"][name] = str(state.mark_delete)  # type: ignore[index]
                one["individuallyDeletedRanges"] = (
                    int(one["individuallyDeletedRanges"])  # type: ignore[call-overload]
                    + state.individually_deleted.range_count()
                )
                one["partlyAckedBatches"] = int(one["partlyAckedBatches"]) + len(state.batch_acks)  # type: ignore[call-overload]
        stats["entries"] = entries
        stats["messages"] = messages
        stats["subscriptions"] = sub_stats
        return stats

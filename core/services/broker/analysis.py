"""Backlog and stats: the exact backlog analysis, topic stats, cursor state, backlog ages and
history, and the reads that Spark jobs and reviewers make (a topic scan, a plan's projection,
its messages described)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import PartitionAnalysis
from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.analysis.entry_filters import EntryFilters, first_messages
from cursorops.core.domain.analysis.poison_radar import (
    PendingCounts,
    RadarLimits,
    StuckMessage,
    SubscriptionRadar,
    merge,
    scan_partition,
)
from cursorops.core.domain.analysis.topic_scan import ScanPartition, ScanSubscription, TopicScan
from cursorops.core.domain.analysis.topic_stats import SubscriptionStats, TopicStats
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import InvalidArgumentError, TopicNotFoundError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.context import Collaborator

PAYLOAD_EXCERPT_BYTES = 120
"""Bytes of payload :meth:`Analysis.describe_messages` returns per message."""


@dataclass(frozen=True)
class PartitionProjection:
    """One touched partition's exact backlog (messages) now and after a plan."""

    topic_partition: str
    items: int
    before: int
    after: int


@dataclass(frozen=True)
class BacklogProjection:
    """A subscription's exact backlog (messages) now and after a plan, whole topic."""

    topic: str
    subscription: str
    before: int
    after: int
    partitions: tuple[PartitionProjection, ...]


@dataclass(frozen=True)
class MessageDescription:
    """What a reviewer sees of one planned message."""

    message_id: MessageId
    topic_partition: str
    key: str | None
    publish_time_ms: int | None
    deliver_at_ms: int | None
    properties: tuple[tuple[str, str], ...]
    payload_excerpt: bytes
    payload_size: int
    whole_batch_of: int
    """The batch size when the item is a whole batched entry, else 0."""
    already_acknowledged: bool
    encryption_keys: tuple[str, ...] | None = None
    """The names of the keys an encrypted payload is encrypted with (its excerpt is then
    empty, its size the entry's as stored); None when it is not encrypted."""
    chunks: int = 0
    """A chunked message: its number of chunks (``payload_size`` is the whole message's)."""


class Analysis(Collaborator):
    """Counts and reads that change nothing."""

    def analyze_backlog(
        self, role: str, topic: str | TopicName, subscription: str | None = None
    ) -> list[PartitionAnalysis]:
        """PIP-187 analysis, exact and uncapped, per partition and subscription.

        ``subscription`` None analyses every subscription of the topic. Each
        subscription's entry filters (its ``entryFilter.*`` properties) decide the
        accepted / rejected / rescheduled split, from each entry's first message.
        """
        info = self.access.authorized_topic(role, Operation.CONSUME, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        filters = {sub.name: EntryFilters.from_properties(sub.properties) for sub in subs}
        needed = sorted(frozenset().union(*(f.columns for f in filters.values())))
        out = []
        for part in self.context.partition_topics(info):
            name = str(part)
            facts = self.context.entry_arrays(part)
            first_rows = None
            if needed:
                table = self.ledgers.read_table(
                    part, columns=["ledger_id", "entry_id", "batch_index", *needed]
                )
                first_rows = first_messages(table)
            for sub in subs:
                state = self.context.cursor_state(name, sub.name, facts.layout)
                chosen = filters[sub.name]
                verdicts = (
                    chosen.verdicts(first_rows) if chosen and first_rows is not None else None
                )
                result = backlog.analyze(
                    state,
                    facts.ledger_ids,
                    facts.entry_ids,
                    facts.batch_sizes,
                    verdicts,
                    chunk_rest=facts.chunk_rest,
                )
                out.append(PartitionAnalysis(name, sub.name, result))
        return out

    def topic_stats(self, role: str, topic: str | TopicName) -> TopicStats:
        """Pulsar-style topic stats; ``msgBacklog`` here is exact in messages.

        As in Pulsar, a partition's name (``t-partition-2``) gives that partition's stats.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.is_partition:
            info = self.access.authorized_topic(role, Operation.GET_STATS, name.base)
            if name.partition_index >= info.partitions:
                raise TopicNotFoundError(
                    f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
                )
            partitions = [name]
        else:
            info = self.access.authorized_topic(role, Operation.GET_STATS, name)
            partitions = self.context.partition_topics(info)
        subs = self.metadata.list_subscriptions(info.name)
        entries = messages = 0
        totals = {s.name: [0, 0, 0, 0] for s in subs}
        marks: dict[str, dict[str, str]] = {s.name: {} for s in subs}
        for partition in partitions:
            facts = self.context.entry_arrays(partition)
            entries += int(facts.ledger_ids.size)
            messages += int(np.maximum(facts.batch_sizes, 1).sum())
            for sub in subs:
                state = self.context.cursor_state(str(partition), sub.name, facts.layout)
                counts = backlog.backlog(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes, facts.chunk_rest
                )
                one = totals[sub.name]
                one[0] += counts.messages
                one[1] += counts.entries
                one[2] += state.individually_deleted.range_count()
                one[3] += len(state.batch_acks)
                marks[sub.name][str(partition)] = str(state.mark_delete)
        return TopicStats(
            topic=str(name),
            partitions=info.partitions,
            entries=entries,
            messages=messages,
            subscriptions={
                sub.name: SubscriptionStats(
                    type=sub.type.value,
                    properties=dict(sub.properties),
                    msg_backlog=totals[sub.name][0],
                    backlog_entries=totals[sub.name][1],
                    mark_delete_position=marks[sub.name],
                    individually_deleted_ranges=totals[sub.name][2],
                    partly_acked_batches=totals[sub.name][3],
                )
                for sub in subs
            },
            partition_index=name.partition_index if name.is_partition else None,
        )

    def cursor_state(
        self, role: str, topic_partition: str | TopicName, subscription: str
    ) -> CursorState:
        """The state of one partition's cursor (a topic's, when not partitioned); a copy.

        Authorized as CONSUME on the topic. A partition's name must be one of
        the topic's partitions.
        """
        name = (
            topic_partition
            if isinstance(topic_partition, TopicName)
            else TopicName.parse(topic_partition)
        )
        info = self.access.authorized_topic(role, Operation.CONSUME, name.base)
        if name.is_partition and name.partition_index >= info.partitions:
            raise TopicNotFoundError(
                f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
            )
        if info.partitions and not name.is_partition:
            raise InvalidArgumentError(
                f"{info.name} has {info.partitions} partitions: name one, e.g. "
                f"'{name.partition(0)}'"
            )
        self.metadata.get_subscription(info.name, subscription)
        return self.context.cursor_state(str(name), subscription)

    def entry_count(self, role: str, topic: str | TopicName) -> int:
        """Committed entries of every partition of ``topic``, from the ledger list only.

        Cheap (no segment is read), so a front door may pick how to scan by it.
        Authorized as CONSUME, as the analysis it sizes.
        """
        info = self.access.authorized_topic(role, Operation.CONSUME, topic)
        return sum(
            ledger.entries
            for name in info.partition_names()
            for ledger in self.metadata.ledgers(name)
        )

    def backlog_ages(self, role: str, topic: str) -> dict[str, int | None]:
        """Per subscription, the publish time (epoch ms) of its oldest unacknowledged message.

        None when the backlog is empty. Authorized as GET_STATS.
        """
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        subs = self.metadata.list_subscriptions(info.name)
        oldest: dict[str, int | None] = {s.name: None for s in subs}
        for name in info.partition_names():
            facts = self.context.entry_arrays(name)
            if facts.ledger_ids.size == 0:
                continue
            index = self.ledgers.entry_index(TopicName.parse(name))
            publish = np.asarray(index.publish_time, dtype=np.int64)
            for sub in subs:
                state = self.context.cursor_state(name, sub.name, facts.layout)
                counts = backlog.unacked_messages(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes, facts.chunk_rest
                )
                live = np.flatnonzero(counts)
                if live.size:
                    first = int(publish[live].min())
                    seen = oldest[sub.name]
                    oldest[sub.name] = first if seen is None else min(seen, first)
        return oldest

    def poison_radar(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        limits: RadarLimits | None = None,
    ) -> list[SubscriptionRadar]:
        """The messages stuck at the head of each subscription
        (:mod:`cursorops.core.domain.analysis.poison_radar`).

        ``subscription`` None covers every subscription. Authorized as CONSUME, as
        the backlog analysis. Reads each partition's entry index (cached), each
        cursor, the subscription's pending messages with their redelivery counts and
        its consumer-ack marks (snapshots, no lock); then the listed findings' rows, for
        their keys.
        """
        chosen = limits or RadarLimits()
        info = self.access.authorized_topic(role, Operation.CONSUME, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        now = self.clock()
        numbers = {str(p): n for n, p in enumerate(self.context.partition_topics(info))}
        indexes = {name: self.ledgers.entry_index(TopicName.parse(name)) for name in numbers}
        out = []
        for sub in subs:
            pending = self.metadata.pending_members(info.name, sub.name)
            marks = self.metadata.consumer_acks(info.name, sub.name)
            parts = []
            for name, index in indexes.items():
                got = pending.get(name)
                counts = (
                    PendingCounts(got.ledger, got.entry, got.index, got.redelivery)
                    if got is not None
                    else PendingCounts.empty()
                )
                found = scan_partition(
                    self.context.cursor_state(name, sub.name),
                    index.ledger_id,
                    index.entry_id,
                    index.batch_size,
                    index.publish_time,
                    counts,
                    now,
                    chosen,
                    index.chunk_rest,
                    consumer_ack=marks.get(name),
                    deliver_at=index.deliver_at if sub.type.honours_delayed_delivery else None,
                )
                parts.append(found.placed(name, numbers[name] if info.partitions else -1))
            result = merge(parts, chosen.max_listed)
            result = replace(result, listed=self._with_keys(result.listed))
            out.append(
                SubscriptionRadar(
                    info.name, sub.name, sub.type.value, now, chosen, result, info.approval_required
                )
            )
        return out

    def _with_keys(self, listed: Sequence[StuckMessage]) -> tuple[StuckMessage, ...]:
        """The findings with each message's key, read from its entry's rows."""
        keys: dict[tuple[str, int, int, int], str | None] = {}
        for name in sorted({m.topic_partition for m in listed}):
            positions = sorted(
                {Position(m.ledger_id, m.entry_id) for m in listed if m.topic_partition == name}
            )
            rows = self.ledgers.read_entries(TopicName.parse(name), positions)
            for row in rows.select(["ledger_id", "entry_id", "batch_index", "key"]).to_pylist():
                key = (name, row["ledger_id"], row["entry_id"], row["batch_index"])
                keys[key] = row["key"]
        return tuple(
            replace(m, key=keys.get((m.topic_partition, m.ledger_id, m.entry_id, m.batch_index)))
            for m in listed
        )

    def record_backlog_audit(self, role: str, run_id: str, samples: Sequence[BacklogSample]) -> int:
        """Store one history row per sample (one per subscription of a run); how many were new.

        Each sample's topic needs GET_STATS. Idempotent per ``(run_id, topic,
        subscription)``: a retried run writes no second row.
        """
        for topic in sorted({s.topic for s in samples}):
            self.access.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.record_backlog_samples(run_id, samples)

    def backlog_history(
        self,
        role: str,
        topic: str,
        subscription: str | None = None,
        *,
        since_ms: int | None = None,
        limit: int = 10_000,
    ) -> list[BacklogSample]:
        """The backlog history of ``topic`` (one subscription, or all), oldest first.

        Authorized as GET_STATS.
        """
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.backlog_samples(info.name, subscription, since_ms, limit)

    def scan_plan(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        *,
        operation: Operation = Operation.CONSUME,
    ) -> TopicScan:
        """What a distributed job needs to scan ``topic``: segments, ledgers, cursors, filters.

        ``subscription`` None covers every subscription. ``operation`` is what
        the job does with the data (CONSUME for an analysis, PEEK_MESSAGES to
        look for messages); the role is authorized for it before anything is
        read. Only committed segments are listed, so a file a crashed append
        left behind is never read. The result is frozen and picklable.
        """
        if operation not in (Operation.CONSUME, Operation.PEEK_MESSAGES):
            raise InvalidArgumentError(
                f"A topic scan reads messages: CONSUME or PEEK_MESSAGES, not {operation.value}"
            )
        info = self.access.authorized_topic(role, operation, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        partitions = []
        states: dict[tuple[str, str], bytes] = {}
        for number, part in enumerate(self.context.partition_topics(info)):
            name = str(part)
            ledgers = tuple(
                (ledger.ledger_id, ledger.entries) for ledger in self.metadata.ledgers(name)
            )
            layout = LedgerLayout.of(ledgers)
            paths = tuple(self.ledgers.segment_paths(part))
            partitions.append(
                ScanPartition(name, number if info.partitions else -1, paths, ledgers)
            )
            for sub in subs:
                states[(name, sub.name)] = cursor_codec.encode(
                    self.context.cursor_state(name, sub.name, layout)
                )
        return TopicScan(
            info.name,
            info.partitions,
            tuple(partitions),
            tuple(ScanSubscription(sub.name, sub.type, dict(sub.properties)) for sub in subs),
            states,
        )

    def project_backlog(self, role: str, plan: SkipPlan) -> BacklogProjection:
        """The subscription's exact backlog now, and after ``plan`` were applied now.

        Authorized as GET_STATS. Per touched partition and in total (the total
        covers every partition, touched or not). Nothing is written: the
        projection acknowledges the plan's items on a copy of each cursor.
        """
        info = self.access.authorized_topic(role, Operation.GET_STATS, plan.topic)
        self.metadata.get_subscription(info.name, plan.subscription)
        touched = set(plan.partitions())
        rows: list[PartitionProjection] = []
        before_total = after_total = 0
        for name in info.partition_names():
            facts = self.context.entry_arrays(name)
            state = self.context.cursor_state(name, plan.subscription, facts.layout)
            args = (facts.ledger_ids, facts.entry_ids, facts.batch_sizes, facts.chunk_rest)
            before = backlog.backlog(state, *args).messages
            after = before
            if name in touched:
                group = [i for i in plan.items if i.topic_partition == name]
                targets = [
                    AckTarget(Position(i.ledger_id, i.entry_id), i.batch_index, i.batch_size)
                    for i in group
                ]
                projected = state.copy()
                projected.merge(CursorState.ack_delta(targets), facts.layout)
                after = backlog.backlog(projected, *args).messages
                rows.append(PartitionProjection(name, len(group), before, after))
            before_total += before
            after_total += after
        return BacklogProjection(
            info.name, plan.subscription, before_total, after_total, tuple(rows)
        )

    def describe_messages(self, role: str, plan: SkipPlan, limit: int) -> list[MessageDescription]:
        """The first ``limit`` messages of ``plan`` as a reviewer sees them (PEEK_MESSAGES).

        Key, publish time, delivery time, properties and the payload's first
        :data:`PAYLOAD_EXCERPT_BYTES` bytes, read from the ledgers; an item
        whose entry is gone is described with what the plan knows.
        """
        info = self.access.authorized_topic(role, Operation.PEEK_MESSAGES, plan.topic)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgumentError(f"Invalid limit {limit!r}: expected an integer >= 0")
        chosen = plan.items[:limit]
        out: list[MessageDescription] = []
        for name in info.partition_names():
            group = [i for i in chosen if i.topic_partition == name]
            if not group:
                continue
            table = self.ledgers.read_entries(
                TopicName.parse(name), [Position(i.ledger_id, i.entry_id) for i in group]
            )
            rows: dict[tuple[int, int, int], dict[str, object]] = {}
            for row in table.to_pylist():
                rows.setdefault((row["ledger_id"], row["entry_id"], row["batch_index"]), row)
                rows.setdefault((row["ledger_id"], row["entry_id"], -2), row)
            for item in group:
                row = rows.get((item.ledger_id, item.entry_id, item.batch_index)) or rows.get(
                    (item.ledger_id, item.entry_id, -2), {}
                )
                payload = row.get("payload")
                data = bytes(payload) if isinstance(payload, (bytes, bytearray)) else b""
                keys = row.get("encryption_keys") if row.get("encrypted") else None
                if keys is not None:  # never the bytes: the size as stored, the keys' names
                    data = cast("bytes", row.get("entry_payload") or b"")
                size = cast("int", row.get("total_chunk_msg_size") or len(data))
                chunks = row.get("num_chunks_from_msg")
                publish = row.get("publish_time")
                key = row.get("key")
                properties = row.get("properties")
                out.append(
                    MessageDescription(
                        message_id=item.message_id,
                        topic_partition=name,
                        key=key if isinstance(key, str) else None,
                        publish_time_ms=publish if isinstance(publish, int) else None,
                        deliver_at_ms=item.deliver_at,
                        properties=tuple(sorted(dict(properties or []).items()))
                        if isinstance(properties, (list, dict))
                        else (),
                        payload_excerpt=b"" if keys is not None else data[:PAYLOAD_EXCERPT_BYTES],
                        payload_size=size,
                        whole_batch_of=item.batch_size if item.batch_index < 0 else 0,
                        already_acknowledged=item.already_acknowledged,
                        encryption_keys=tuple(keys) if isinstance(keys, list) else None,
                        chunks=chunks if isinstance(chunks, int) else 0,
                    )
                )
        order = {(i.ledger_id, i.entry_id, i.batch_index): n for n, i in enumerate(chosen)}
        out.sort(
            key=lambda d: order[
                (d.message_id.ledger_id, d.message_id.entry_id, d.message_id.batch_index)
            ]
        )
        return out

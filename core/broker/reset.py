"""Reset a subscription's cursor to a message id or a publish time: planned, then applied
to every partition in one transaction with its audit record."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cursorops.core.acks import cursor_codec
from cursorops.core.acks.cursor import AckTarget, CursorState
from cursorops.core.acks.ledger_layout import LedgerLayout
from cursorops.core.analysis import backlog
from cursorops.core.authz import Operation
from cursorops.core.broker.context import Collaborator
from cursorops.core.errors import InvalidArgumentError, PositionOutOfRangeError, TopicNotFoundError
from cursorops.core.gating.operation import Approval
from cursorops.core.ids.chunked_messages import ChunkedMessages
from cursorops.core.ids.position import EARLIEST, Position
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.resetting.reset_plan import PartitionReset, ResetPlan
from cursorops.core.skipping.skip import SkipLookup
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import AuditEntry, TopicInfo


class Resets(Collaborator):
    """Moves a cursor backwards or forwards, as pulsar-admin's ``reset-cursor``."""

    def reset_cursor(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> dict[str, str]:
        """Reset to a position (a non-partitioned topic, or one partition) or to a publish
        time (any topic, or one partition), at once; refused where the namespace requires
        approval (the ``cursorops_reset_cursor`` workflow applies there).

        Every partition moves in one transaction, with a ``reset-cursor`` audit record.
        Returns the new mark-delete per partition.
        """
        info = self.access.authorized_topic(
            role, Operation.RESET_CURSOR, TopicName.parse(topic).base
        )
        self.access.refuse_without_approval(
            info,
            "reset-cursor (it acknowledges or redelivers)",
            "the cursorops_reset_cursor workflow",
        )
        plan = self.plan_reset(
            role, topic, subscription, position=position, timestamp_ms=timestamp_ms
        )
        return self._apply(role, plan, "broker", None)

    def seek(
        self,
        role: str,
        topic_partition: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
        ack_bits: int | None = None,
        non_durable: bool = False,
    ) -> Position:
        """A consumer's seek (Pulsar's ``CommandSeek``) on one partition (or a
        non-partitioned topic): a reset-cursor by message id or publish time, recorded
        with a ``reset-cursor`` audit record (``via`` "seek"). Returns the new mark-delete.

        A message id seeks to the first entry at or after it: before the first entry
        is the start (``MessageId.earliest``), past the last the end
        (``MessageId.latest``). ``ack_bits`` is the ack set a client sends with a
        batch message id (Pulsar's layout: a set bit is a message still to deliver):
        the target entry's other indexes stay acknowledged, as Pulsar's cursor keeps
        the batch-deleted indexes of the position it resets to.

        A durable subscription's seek is refused where the namespace requires
        approval, as reset-cursor is; ``non_durable`` (a reader's own subscription,
        which lives as long as the reader) moves freely there.
        """
        name = TopicName.parse(topic_partition)
        info = self.access.authorized_topic(role, Operation.RESET_CURSOR, name.base)
        if not non_durable:
            self.access.refuse_without_approval(
                info,
                f"a seek of durable subscription '{subscription}' (it acknowledges or"
                " redelivers; readers seek freely)",
                "the cursorops_reset_cursor workflow",
            )
        if info.partitions and not name.is_partition:
            raise InvalidArgumentError(
                f"{info.name} has {info.partitions} partitions: a seek names one"
            )
        if position is not None:
            position = seek_target(position, self.context.layout(str(name)))
        plan = self.plan_reset(
            role, str(name), subscription, position=position, timestamp_ms=timestamp_ms
        )
        (move,) = plan.partitions
        acked: tuple[AckTarget, ...] = ()
        if ack_bits is not None and position is not None:
            lookup = self.context.entry_arrays(move.topic_partition)
            (row,) = lookup.rows_of([move.target])
            size = int(lookup.batch_sizes[row]) if row >= 0 else 0
            acked = tuple(
                AckTarget(move.target, i, size) for i in range(size) if not (ack_bits >> i) & 1
            )
        # A reader's own subscription is no one's cursor: it moves freely (and audited).
        reader = Ticket.not_a_move("a reader's own subscription") if non_durable else None
        self._apply(role, plan, "seek", None, acked, ticket=reader)
        return self.context.cursor_state(move.topic_partition, subscription).mark_delete

    def plan_reset(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> ResetPlan:
        """Where each partition's cursor would go, and its backlog before and after; changes
        nothing.

        A partition's name (``t-partition-2``) resets that partition only, as
        pulsar-admin's does. With a time, each partition's next entry becomes its
        first entry published at or after that time, resolved now. A target inside a
        chunked message moves to its first chunk: the message is delivered again whole,
        never from a middle chunk.
        """
        parsed = TopicName.parse(topic)
        info = self.access.authorized_topic(role, Operation.RESET_CURSOR, parsed.base)
        partitions = info.partition_names()
        if parsed.is_partition:
            if parsed.partition_index >= info.partitions:
                raise TopicNotFoundError(
                    f"Topic '{parsed}' not found: {info.name} has {info.partitions} partitions"
                )
            partitions = [str(parsed)]
        self.metadata.get_subscription(info.name, subscription)
        if (position is None) == (timestamp_ms is None):
            raise InvalidArgumentError("Give exactly one of a message id or a time")
        if position is not None and len(partitions) > 1:
            raise InvalidArgumentError(
                "Reset to a message id needs a non-partitioned topic or one partition; use a "
                f"time on partitioned topic {info.name}"
            )
        moves = []
        for name in partitions:
            layout = self.context.layout(name)
            if position is not None:
                check_reset_target(position, layout)
            target = position if position is not None else self._first_at(name, timestamp_ms or 0)
            lookup = self.context.entry_arrays(name, layout)
            if lookup.chunk_rest is not None:
                target = message_start(self.context.chunked_messages(name), target)
            state = self.context.cursor_state(name, subscription, layout)
            args = (lookup.ledger_ids, lookup.entry_ids, lookup.batch_sizes, lookup.chunk_rest)
            moves.append(
                PartitionReset(
                    name,
                    target,
                    state.mark_delete,
                    backlog.backlog(state, *args).messages,
                    messages_from(lookup, target),
                )
            )
        return ResetPlan(info.name, subscription, tuple(moves), self.clock(), timestamp_ms)

    def apply_reset(self, role: str, plan: ResetPlan, *, via: str = "broker") -> dict[str, str]:
        """Move every partition of ``plan`` to its target in one transaction, with its audit
        record. Refused where the namespace requires approval: only an approved plan record
        applies there (:meth:`apply_approved_reset`)."""
        info = self.access.authorized_topic(role, Operation.RESET_CURSOR, plan.topic)
        self.access.refuse_without_approval(
            info,
            "reset-cursor (it acknowledges or redelivers)",
            "the cursorops_reset_cursor workflow",
        )
        self._check(info, plan)
        return self._apply(role, plan, via, None)

    def apply_approved_reset(self, plan: ResetPlan, approval: Approval) -> dict[str, str]:
        """:meth:`apply_reset` of an approved plan record's plan, as its requester's role,
        with the record's claim in the same transaction."""
        info = self.access.authorized_topic(approval.role, Operation.RESET_CURSOR, plan.topic)
        self._check(info, plan)
        return self._apply(approval.role, plan, approval.via, approval)

    def _check(self, info: TopicInfo, plan: ResetPlan) -> None:
        """Every move of the plan is on a partition of the topic, to a position it has."""
        known = set(info.partition_names())
        for move in plan.partitions:
            if move.topic_partition not in known:
                raise InvalidArgumentError(
                    f"Invalid reset plan: {move.topic_partition} is not a partition of {info.name}"
                )
            check_reset_target(move.target, self.context.layout(move.topic_partition))

    def _apply(
        self,
        role: str,
        plan: ResetPlan,
        via: str,
        approval: Approval | None,
        acked: Sequence[AckTarget] = (),
        *,
        ticket: Ticket | None = None,
    ) -> dict[str, str]:
        """``acked``: batch indexes of a target entry that stay acknowledged (a seek to a
        batch index). ``ticket``: what entitles the move, by default the approval's (or
        none, refused by the cursor door where the namespace requires approval)."""
        layouts = {
            m.topic_partition: self.context.layout(m.topic_partition) for m in plan.partitions
        }
        at_ms = self.clock()
        result: dict[str, str] = {}
        moves = sorted(plan.partitions, key=lambda m: m.topic_partition)
        # The subscription's topic, from its partitions (checked against the topic's).
        topic = str(TopicName.parse(moves[0].topic_partition).base) if moves else plan.topic
        if ticket is None:
            ticket = Ticket.gated([approval.digest if approval else None], "reset-cursor")
        with self.metadata.cursor_transaction() as work:
            read = work.read(topic, plan.subscription, [m.topic_partition for m in moves])
            moved = []
            for move, (cursor_id, record) in zip(moves, read, strict=True):
                layout = layouts[move.topic_partition]
                before = replay(record, layout).mark_delete
                after = CursorState()
                after.reset(move.target, layout)
                mine = [a for a in acked if a.position == move.target]
                if mine:
                    after.acknowledge(mine, layout)
                work.append(cursor_id, [cursor_codec.encode(after, replace=True)], ticket=ticket)
                # What consumers acknowledged beyond the new place may be unacknowledged
                # now: no consumer acknowledgement is known until one comes.
                work.forget_consumer_ack(cursor_id, ticket=ticket)
                result[move.topic_partition] = str(after.mark_delete)
                moved.append(
                    {
                        "partition": move.topic_partition,
                        "target": str(move.target),
                        "markDeleteBefore": str(before),
                        "markDeleteAfter": str(after.mark_delete),
                    }
                )
            detail = {
                "planId": plan.plan_id,
                "publishTime": plan.timestamp_ms,
                "partitions": moved,
                "via": via,
                **(approval.detail() if approval else {}),
            }
            audit_id = work.record_audit(
                AuditEntry("reset-cursor", plan.topic, plan.subscription, role, detail, at_ms)
            )
            if approval is not None:
                work.claim_plan(approval.digest, at_ms, approval.claim(audit_id, moved=moved))
        return result

    def _first_at(self, topic_partition: str, timestamp_ms: int) -> Position:
        index = self.ledgers.entry_index(TopicName.parse(topic_partition))
        publish = np.asarray(index.publish_time, dtype=np.int64)
        rows = np.flatnonzero(publish >= timestamp_ms)
        if rows.size == 0:
            layout = self.context.layout(topic_partition)
            last = layout.last_position
            return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST
        row = int(rows[0])
        return Position(int(index.ledger_id[row]), int(index.entry_id[row]))


def check_reset_target(position: Position, layout: LedgerLayout) -> None:
    """A cursor may start at an entry of the topic, at its start or just past its end."""
    last = layout.last_position
    end = Position(last.ledger_id, last.entry_id + 1)
    if position not in (EARLIEST, end) and not layout.contains(position):
        raise PositionOutOfRangeError(
            f"Cannot start at {position}: no such entry (the last entry is {last})"
        )


def messages_from(lookup: SkipLookup, target: Position) -> int:
    """Messages in the entries at or after ``target``: a reset's backlog (a batch counts its
    messages, a chunked message one, at its last chunk)."""
    ledgers, entries = lookup.ledger_ids, lookup.entry_ids
    at_or_after = (ledgers > target.ledger_id) | (
        (ledgers == target.ledger_id) & (entries >= target.entry_id)
    )
    if lookup.chunk_rest is not None:
        at_or_after &= ~lookup.chunk_rest
    sizes = np.maximum(np.asarray(lookup.batch_sizes, dtype=np.int64)[at_or_after], 1)
    return int(sizes.sum())


def message_start(chunks: ChunkedMessages, target: Position) -> Position:
    """``target``, or the first chunk of the chunked message ``target`` is a later chunk of:
    a cursor reset there delivers that message again whole."""
    (at,) = chunks.index_of([target.ledger_id], [target.entry_id]).tolist()
    if at < 0:
        return target
    first = int(np.flatnonzero(chunks.message == chunks.message[at])[0])
    return Position(int(chunks.ledger_id[first]), int(chunks.entry_id[first]))


def seek_target(position: Position, layout: LedgerLayout) -> Position:
    """Where a seek to ``position`` starts: the first entry at or after it, else the end
    (just past the last entry; the start when there is none)."""
    if layout.contains(position):
        return position
    found = layout.next_position(Position(position.ledger_id, position.entry_id - 1))
    if found is not None:
        return found
    last = layout.last_position
    return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST

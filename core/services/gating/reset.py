"""Reset-cursor, the gated operation: each partition's cursor moved to a message id's
position or to the first message published at or after a time.

A reset moves messages in both directions: back, it redelivers everything after
the target (Pulsar forgets the individual acknowledgements past it); forward, it
acknowledges everything before it. The plan (:class:`ResetPlan`) resolves the request
(a message id, or a publish time) to one target entry per partition when it is made,
so the approver sees, and apply makes, exactly those moves: a message published after
planning never changes where a time-based reset lands. It is portable JSON with an id
derived from its content (:class:`~cursorops.core.domain.portable_plan.PortablePlan`); a
document whose id does not match its content is refused.

Here are the request's arguments (:class:`ResetCursor`), the plan, its preview, and the
apply (at once, or of an approved record): every partition in one cursor transaction
with its audit record. A consumer's seek (:func:`seek`) is a reset of one partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.cursor_targets import check_reset_target, seek_target
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import InvalidArgumentError, TopicNotFoundError
from cursorops.core.domain.ids.chunked_messages import ChunkedMessages
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.plans.preview import (
    Effects,
    PartitionChange,
    Preview,
    count,
    request_of,
    time_text,
)
from cursorops.core.domain.portable_plan import PreviewedPlan, Spelling
from cursorops.core.services.gating import apply_record
from cursorops.core.services.gating.operation import (
    RESET_CURSOR,
    Applied,
    Approval,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.values import AuditEntry

if TYPE_CHECKING:
    from cursorops.core.domain.acks.skip import SkipLookup
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


RESET_PLAN_FORMAT = 1


@dataclass(frozen=True)
class PartitionReset:
    """One partition's move: from its mark-delete position to ``target`` as the next read."""

    topic_partition: str
    target: Position
    mark_delete_before: Position
    backlog_before: int
    backlog_after: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.topic_partition,
            "target": str(self.target),
            "markDeleteBefore": str(self.mark_delete_before),
            "backlogBefore": self.backlog_before,
            "backlogAfter": self.backlog_after,
        }

    @classmethod
    def from_json(cls, body: object, where: str) -> PartitionReset:
        if not isinstance(body, dict) or set(body) != {
            "partition",
            "target",
            "markDeleteBefore",
            "backlogBefore",
            "backlogAfter",
        }:
            raise InvalidArgumentError(f"Invalid reset plan: {where} is malformed")
        counts = [body["backlogBefore"], body["backlogAfter"]]
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise InvalidArgumentError(f"Invalid reset plan: {where} has a bad backlog")
        if not isinstance(body["partition"], str) or not body["partition"]:
            raise InvalidArgumentError(f"Invalid reset plan: {where} names no partition")
        return cls(
            body["partition"],
            _position(body["target"], where),
            _position(body["markDeleteBefore"], where),
            counts[0],
            counts[1],
        )


def _position(text: object, where: str) -> Position:
    try:
        ledger, entry = str(text).split(":")
        return Position(int(ledger), int(entry))
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"Invalid reset plan: {where}: {text!r} is no position") from exc


@dataclass(frozen=True)
class ResetPlan(PreviewedPlan):
    """Every partition's move of one reset-cursor; immutable."""

    SPELLING: ClassVar[Spelling] = Spelling.SORTED
    KIND: ClassVar[str] = "reset plan"

    topic: str
    subscription: str
    partitions: tuple[PartitionReset, ...]
    planned_at_ms: int
    timestamp_ms: int | None
    """The publish time asked for; None for a reset to a message id."""

    @property
    def messages(self) -> int:
        """Messages whose state the reset changes, at planning time: redelivered plus
        acknowledged (what the approval quorum counts)."""
        return sum(abs(p.backlog_after - p.backlog_before) for p in self.partitions)

    def content(self) -> dict[str, Any]:
        return {
            "format": RESET_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "partitions": [p.to_json() for p in self.partitions],
            "plannedAt": self.planned_at_ms,
            "timestamp": self.timestamp_ms,
        }

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> ResetPlan:
        fields = {"format", "topic", "subscription", "partitions", "plannedAt", "timestamp"}
        if set(content) != fields:
            raise InvalidArgumentError("Invalid reset plan: unexpected fields")
        if content["format"] != RESET_PLAN_FORMAT or not isinstance(content["partitions"], list):
            raise InvalidArgumentError("Invalid reset plan: unknown format")
        timestamp = content["timestamp"]
        if timestamp is not None and (
            isinstance(timestamp, bool) or not isinstance(timestamp, int)
        ):
            raise InvalidArgumentError("Invalid reset plan: bad timestamp")
        planned = content["plannedAt"]
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 0:
            raise InvalidArgumentError("Invalid reset plan: bad plannedAt")
        return cls(
            topic=str(content["topic"]),
            subscription=str(content["subscription"]),
            partitions=tuple(
                PartitionReset.from_json(p, f"partitions[{i}]")
                for i, p in enumerate(content["partitions"])
            ),
            planned_at_ms=planned,
            timestamp_ms=timestamp,
        )

    def preview(self) -> dict[str, Any]:
        """What the approver reads: each partition's move and its backlog before and after."""
        return {
            "resetTo": "message id" if self.timestamp_ms is None else "publish time",
            "publishTime": self.timestamp_ms,
            "backlogBefore": sum(p.backlog_before for p in self.partitions),
            "backlogAfter": sum(p.backlog_after for p in self.partitions),
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True, kw_only=True)
class ResetCursor(GatedArguments):
    """Reset to ``position`` (a non-partitioned topic, or one partition named as ``topic``) or
    to the publish time ``timestamp_ms`` (epoch ms, any topic): exactly one of them."""

    position: Position | None = None
    timestamp_ms: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.position is None) == (self.timestamp_ms is None):
            raise InvalidArgumentError("Give exactly one of a message id or a time")
        if self.position is not None and not isinstance(self.position, Position):
            raise InvalidArgumentError(f"Invalid position {self.position!r}")
        stamp = self.timestamp_ms
        if stamp is not None and (isinstance(stamp, bool) or not isinstance(stamp, int)):
            raise InvalidArgumentError(f"Invalid time {stamp!r}: expected epoch milliseconds")
        if stamp is not None and stamp < 0:
            raise InvalidArgumentError(f"Invalid time {stamp!r}: expected epoch milliseconds")


def reset_preview(record: PlanRecord, plan: ResetPlan) -> Preview:
    """Each partition's move: moving back redelivers what lies after the target, moving
    forward acknowledges what lies before it (the backlog's change, exact at planning)."""
    rows = tuple(
        PartitionChange(
            p.topic_partition,
            backlog_before=p.backlog_before,
            backlog_after=p.backlog_after,
            mark_delete_before=str(p.mark_delete_before),
            next_read_after=str(p.target),
            acknowledged=max(p.backlog_before - p.backlog_after, 0),
            redelivered=max(p.backlog_after - p.backlog_before, 0),
        )
        for p in plan.partitions
    )
    acknowledged = sum(r.acknowledged or 0 for r in rows)
    redelivered = sum(r.redelivered or 0 for r in rows)
    moves = [f"redeliver {count(redelivered)}"] if redelivered else []
    moves += [f"acknowledge {count(acknowledged)}"] if acknowledged else []
    if plan.timestamp_ms is None:
        target = "the message id " + ", ".join(str(p.target) for p in plan.partitions)
    else:
        target = f"the first message published at or after {time_text(plan.timestamp_ms)}"
    return Preview(
        operation=RESET_CURSOR,
        heading="Reset cursor: " + (" and ".join(moves) if moves else "no message changes"),
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record),
        partitions=rows,
        effects=Effects(acknowledged=acknowledged, redelivered=redelivered),
        details=(
            ("Reset to", target),
            ("Planned at", time_text(plan.planned_at_ms)),
        ),
        moves_mark_delete=True,
        backlog=(
            sum(p.backlog_before for p in plan.partitions),
            sum(p.backlog_after for p in plan.partitions),
        ),
    )


def reset_cursor(
    services: GatingServices,
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
    info = services.access.authorized_topic(
        role, Operation.RESET_CURSOR, TopicName.parse(topic).base
    )
    services.access.refuse_without_approval(
        info,
        "reset-cursor (it acknowledges or redelivers)",
        "the cursorops_reset_cursor workflow",
    )
    plan = plan_reset(
        services, role, topic, subscription, position=position, timestamp_ms=timestamp_ms
    )
    return _apply(services, role, plan, "broker", None)


def seek(
    services: GatingServices,
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
    info = services.access.authorized_topic(role, Operation.RESET_CURSOR, name.base)
    if not non_durable:
        services.access.refuse_without_approval(
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
        position = seek_target(position, services.context.layout(str(name)))
    plan = plan_reset(
        services, role, str(name), subscription, position=position, timestamp_ms=timestamp_ms
    )
    (move,) = plan.partitions
    acked: tuple[AckTarget, ...] = ()
    if ack_bits is not None and position is not None:
        lookup = services.context.entry_arrays(move.topic_partition)
        (row,) = lookup.rows_of([move.target])
        size = int(lookup.batch_sizes[row]) if row >= 0 else 0
        acked = tuple(
            AckTarget(move.target, i, size) for i in range(size) if not (ack_bits >> i) & 1
        )
    # A reader's own subscription is no one's cursor: it moves freely (and audited).
    reader = Ticket.not_a_move("a reader's own subscription") if non_durable else None
    _apply(services, role, plan, "seek", None, acked, ticket=reader)
    return services.context.cursor_state(move.topic_partition, subscription).mark_delete


def plan_reset(
    services: GatingServices,
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
    info = services.access.authorized_topic(role, Operation.RESET_CURSOR, parsed.base)
    partitions = info.partition_names()
    if parsed.is_partition:
        if parsed.partition_index >= info.partitions:
            raise TopicNotFoundError(
                f"Topic '{parsed}' not found: {info.name} has {info.partitions} partitions"
            )
        partitions = [str(parsed)]
    services.metadata.get_subscription(info.name, subscription)
    if (position is None) == (timestamp_ms is None):
        raise InvalidArgumentError("Give exactly one of a message id or a time")
    if position is not None and len(partitions) > 1:
        raise InvalidArgumentError(
            "Reset to a message id needs a non-partitioned topic or one partition; use a "
            f"time on partitioned topic {info.name}"
        )
    moves = []
    for name in partitions:
        layout = services.context.layout(name)
        if position is not None:
            check_reset_target(position, layout)
        target = position if position is not None else _first_at(services, name, timestamp_ms or 0)
        lookup = services.context.entry_arrays(name, layout)
        if lookup.chunk_rest is not None:
            target = message_start(services.context.chunked_messages(name), target)
        state = services.context.cursor_state(name, subscription, layout)
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
    return ResetPlan(info.name, subscription, tuple(moves), services.clock(), timestamp_ms)


def apply_reset(
    services: GatingServices, role: str, plan: ResetPlan, *, via: str = "broker"
) -> dict[str, str]:
    """Move every partition of ``plan`` to its target in one transaction, with its audit
    record. Refused where the namespace requires approval: only an approved plan record
    applies there (:meth:`ResetCursorOperation.apply_approved`)."""
    return _apply_plan(services, role, plan, via, None)


def _apply_plan(
    services: GatingServices, role: str, plan: ResetPlan, via: str, approval: Approval | None
) -> dict[str, str]:
    """:func:`_apply` of ``plan`` as ``role``, each move checked against the topic as it is
    now; at once (refused where approval is required) or approved (with the claim)."""
    info = services.access.authorized_topic(role, Operation.RESET_CURSOR, plan.topic)
    if approval is None:
        services.access.refuse_without_approval(
            info,
            "reset-cursor (it acknowledges or redelivers)",
            "the cursorops_reset_cursor workflow",
        )
    _check(services, info, plan)
    return _apply(services, role, plan, via, approval)


def _check(services: GatingServices, info: TopicInfo, plan: ResetPlan) -> None:
    """Every move of the plan is on a partition of the topic, to a position it has."""
    known = set(info.partition_names())
    for move in plan.partitions:
        if move.topic_partition not in known:
            raise InvalidArgumentError(
                f"Invalid reset plan: {move.topic_partition} is not a partition of {info.name}"
            )
        check_reset_target(move.target, services.context.layout(move.topic_partition))


def _apply(
    services: GatingServices,
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
        m.topic_partition: services.context.layout(m.topic_partition) for m in plan.partitions
    }
    at_ms = services.clock()
    result: dict[str, str] = {}
    moves = sorted(plan.partitions, key=lambda m: m.topic_partition)
    # The subscription's topic, from its partitions (checked against the topic's).
    topic = str(TopicName.parse(moves[0].topic_partition).base) if moves else plan.topic
    if ticket is None:
        ticket = apply_record.ticket(approval, RESET_CURSOR)
    with services.metadata.cursor_transaction() as work:
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
        fields = {"planId": plan.plan_id, "publishTime": plan.timestamp_ms, "partitions": moved}
        detail = apply_record.audit_detail(fields, via, approval)
        entry = AuditEntry(RESET_CURSOR, plan.topic, plan.subscription, role, detail, at_ms)
        apply_record.record_apply(work, entry, approval, moved=moved)
    return result


def _first_at(services: GatingServices, topic_partition: str, timestamp_ms: int) -> Position:
    index = services.ledgers.entry_index(TopicName.parse(topic_partition))
    publish = np.asarray(index.publish_time, dtype=np.int64)
    rows = np.flatnonzero(publish >= timestamp_ms)
    if rows.size == 0:
        layout = services.context.layout(topic_partition)
        last = layout.last_position
        return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST
    row = int(rows[0])
    return Position(int(index.ledger_id[row]), int(index.entry_id[row]))


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


class ResetCursorOperation(PreviewedOperation[ResetPlan, ResetCursor]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        # No message content in it: ids, counts, positions, the skip's own record.
        return reset_preview(record, self.plan_of(record))

    def targets(
        self, services: GatingServices, role: str, arguments: ResetCursor
    ) -> Sequence[TopicInfo]:
        base = TopicName.parse(arguments.topic).base
        return (services.access.authorized_topic(role, Operation.RESET_CURSOR, base),)

    def plan_for(self, services: GatingServices, role: str, arguments: ResetCursor) -> ResetPlan:
        return plan_reset(
            services,
            role,
            arguments.topic,
            arguments.subscription,
            position=arguments.position,
            timestamp_ms=arguments.timestamp_ms,
        )

    def apply_plan(
        self,
        services: GatingServices,
        role: str,
        plan: ResetPlan,
        via: str,
        approval: Approval | None,
    ) -> Applied:
        moved = _apply_plan(services, role, plan, via, approval)
        return Applied(RESET_CURSOR, plan.messages, 0, {"markDelete": moved})


OPERATION: ResetCursorOperation = ResetCursorOperation(
    "reset-cursor",
    RESET_CURSOR,
    ResetPlan,
    ResetCursor,
    "cursorops_reset_cursor",
    "reset",
    "Reset a cursor",
)


__all__ = [
    "OPERATION",
    "RESET_PLAN_FORMAT",
    "PartitionReset",
    "ResetCursor",
    "ResetPlan",
    "apply_reset",
    "plan_reset",
    "reset_cursor",
    "seek",
]

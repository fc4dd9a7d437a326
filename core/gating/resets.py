"""The gated reset-cursor: each partition's cursor moved to a message id's position or to the
first message published at or after a time (:class:`~cursorops.core.resetting.reset_plan.ResetPlan`
resolves the target when it plans, so the approver sees the very moves applied)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cursorops.core.authz import Operation
from cursorops.core.errors import InvalidArgumentError
from cursorops.core.gating.operation import (
    RESET_CURSOR,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.gating.preview import (
    Effects,
    PartitionChange,
    Preview,
    count,
    request_of,
    time_text,
)
from cursorops.core.ids.position import Position
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.resetting.reset_plan import ResetPlan

if TYPE_CHECKING:
    from cursorops.core.skipping.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


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
        return services.resets.plan_reset(
            role,
            arguments.topic,
            arguments.subscription,
            position=arguments.position,
            timestamp_ms=arguments.timestamp_ms,
        )

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: ResetCursor
    ) -> Applied:
        plan = self.plan_for(services, caller.role, arguments)
        moved = services.resets.apply_reset(caller.role, plan, via=caller.via)
        return Applied(RESET_CURSOR, plan.messages, 0, {"markDelete": moved})

    def apply_approved(
        self, services: GatingServices, plan: ResetPlan, approval: Approval
    ) -> Applied:
        moved = services.resets.apply_approved_reset(plan, approval)
        return Applied(RESET_CURSOR, plan.messages, 0, {"markDelete": moved})


OPERATION = ResetCursorOperation(
    "reset-cursor",
    RESET_CURSOR,
    ResetPlan,
    ResetCursor,
    "cursorops_reset_cursor",
    "reset",
    "Reset a cursor",
)

__all__ = ["OPERATION", "ResetCursor"]

"""The gated reset-cursor: each partition's cursor moved to a message id's position or to the
first message published at or after a time (:class:`~core.resetting.reset_plan.ResetPlan`
resolves the target when it plans, so the approver sees the very moves applied)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.authz import Operation
from core.errors import InvalidArgumentError
from core.gating.operation import (
    RESET_CURSOR,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from core.ids.position import Position
from core.ids.topic_name import TopicName
from core.resetting.reset_plan import ResetPlan

if TYPE_CHECKING:
    from core.store.values import TopicInfo


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


class ResetCursorOperation(PreviewedOperation[ResetPlan, ResetCursor]):
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

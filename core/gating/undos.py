"""The gated undo of a skip: exactly the messages one applied skip acknowledged, taken back
once (:class:`~core.skipping.undo.UndoPlan`, planned from the skip's audit record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.authz import Operation
from core.gating.operation import (
    UNDO_SKIP,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from core.skipping.undo import UndoOutcome, UndoPlan, check_skip_id

if TYPE_CHECKING:
    from core.store.values import TopicInfo


@dataclass(frozen=True, kw_only=True)
class UndoSkip(GatedArguments):
    """Undo skip ``skip_id`` (the id of its audit record) of the subscription."""

    skip_id: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_skip_id(self.skip_id)


def _applied(outcome: UndoOutcome) -> Applied:
    return Applied(
        UNDO_SKIP,
        len(outcome.unacknowledged),
        len(outcome.not_acknowledged),
        outcome.to_json(),
        result=outcome,
    )


class UndoSkipOperation(PreviewedOperation[UndoPlan, UndoSkip]):
    def targets(
        self, services: GatingServices, role: str, arguments: UndoSkip
    ) -> Sequence[TopicInfo]:
        return (services.access.authorized_topic(role, Operation.SKIP, arguments.topic),)

    def plan_for(self, services: GatingServices, role: str, arguments: UndoSkip) -> UndoPlan:
        return services.undo.plan_undo_skip(
            role, arguments.topic, arguments.subscription, arguments.skip_id
        )

    def apply_now(self, services: GatingServices, caller: Caller, arguments: UndoSkip) -> Applied:
        plan = self.plan_for(services, caller.role, arguments)
        return _applied(services.undo.apply_undo_skip(caller.role, plan, via=caller.via))

    def apply_approved(
        self, services: GatingServices, plan: UndoPlan, approval: Approval
    ) -> Applied:
        return _applied(services.undo.apply_approved_undo(plan, approval))


OPERATION = UndoSkipOperation(
    "undo-skip", UNDO_SKIP, UndoPlan, UndoSkip, "cursorops_undo_skip", "undo_skip", "Undo a skip"
)

__all__ = ["OPERATION", "UndoSkip"]

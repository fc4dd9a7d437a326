"""The gated undo of a skip: exactly the messages one applied skip acknowledged, taken back
once (:class:`~cursorops.core.skipping.undo.UndoPlan`, planned from the skip's audit record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cursorops.core.authz import Operation
from cursorops.core.gating.operation import (
    UNDO_SKIP,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.gating.preview import (
    Effects,
    MessageRow,
    PartitionChange,
    Preview,
    count,
    request_of,
    time_text,
)
from cursorops.core.skipping.undo import PREVIEW_IDS, UndoOutcome, UndoPlan, check_skip_id

if TYPE_CHECKING:
    from cursorops.core.gating.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


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


def _short(partition: str) -> str:
    return partition.rsplit("-partition-", 1)[-1] if "-partition-" in partition else ""


def undo_preview(record: PlanRecord, plan: UndoPlan) -> Preview:
    """What the undo takes back: the skip's messages still acknowledged are redelivered,
    those no longer acknowledged are left as is; the skip itself (when, by whom, why, and who
    approved it: from its audit record) as details and in the request."""
    listed: list[MessageRow] = []
    for part in plan.partitions:
        for triplet in part.triplets()[: PREVIEW_IDS - len(listed)]:
            listed.append(MessageRow(triplet, _short(part.topic_partition), content=False))
    left = max(plan.messages - plan.still_acknowledged, 0)
    heading = f"Undo skip {plan.skip_id}: redeliver {count(plan.still_acknowledged)}"
    if left:
        heading += f"; {left} no longer acknowledged"
    skip = f"{plan.skip_id}, applied at {time_text(plan.skipped_at_ms)} by {plan.skipped_by}"
    if plan.skipped_via:
        skip += f" via {plan.skipped_via}"
    return Preview(
        operation=UNDO_SKIP,
        heading=heading,
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record, undone_skip_approvals=plan.approved_by),
        partitions=tuple(
            PartitionChange(part.topic_partition, ids=len(part)) for part in plan.partitions
        ),
        effects=Effects(
            redelivered=plan.still_acknowledged,
            unchanged=left,
            unchanged_as="no longer acknowledged",
        ),
        details=(
            ("Skip undone", skip),
            ("Its reason", plan.reason or "none given"),
            ("Its ticket", plan.ticket or "none"),
            (
                "Its approvals",
                ", ".join(plan.approved_by)
                if plan.approved_by
                else "none (applied where no approval was required)",
            ),
            ("Messages it acknowledged", f"{plan.messages} ({count(plan.ids, 'id')})"),
            ("Planned at", time_text(plan.planned_at_ms)),
        ),
        messages=tuple(listed),
        messages_not_listed=max(plan.ids - len(listed), 0),
    )


class UndoSkipOperation(PreviewedOperation[UndoPlan, UndoSkip]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        # No message content in it: ids, counts, positions, the skip's own record.
        return undo_preview(record, self.plan_of(record))

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

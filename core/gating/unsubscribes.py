"""The gated unsubscribe: a subscription deleted with whatever it has not acknowledged
(:class:`~cursorops.core.resetting.unsubscribe_plan.UnsubscribePlan` counts it, per partition)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cursorops.core.authz import Operation
from cursorops.core.errors import InvalidArgumentError
from cursorops.core.gating.operation import (
    UNSUBSCRIBE,
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
from cursorops.core.resetting.unsubscribe_plan import UnsubscribePlan

if TYPE_CHECKING:
    from cursorops.core.gating.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


@dataclass(frozen=True, kw_only=True)
class Unsubscribe(GatedArguments):
    """Delete the subscription; ``force``: even while consumers are connected."""

    force: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.force, bool):
            raise InvalidArgumentError(f"Invalid force {self.force!r}: expected true or false")


class UnsubscribeOperation(PreviewedOperation[UnsubscribePlan, Unsubscribe]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        plan = self.plan_of(record)
        return Preview(
            operation=UNSUBSCRIBE,
            heading=f"Unsubscribe: delete the subscription and drop {count(plan.messages)}",
            topic=record.topic,
            subscription=record.subscription,
            request=request_of(record),
            partitions=tuple(
                PartitionChange(p, backlog_before=c, gone=True) for p, c in plan.backlog
            ),
            effects=Effects(dropped=plan.messages),
            details=(
                (
                    "Deleted",
                    "the subscription, its cursor and every message it has not acknowledged",
                ),
                (
                    "Even with consumers connected",
                    "yes (they are disconnected)" if plan.force else "no",
                ),
                ("Planned at", time_text(plan.planned_at_ms)),
                ("Arrived since", "dropped too; the audit record counts what was dropped"),
            ),
        )

    def targets(
        self, services: GatingServices, role: str, arguments: Unsubscribe
    ) -> Sequence[TopicInfo]:
        return (services.access.authorized_topic(role, Operation.UNSUBSCRIBE, arguments.topic),)

    def plan_for(
        self, services: GatingServices, role: str, arguments: Unsubscribe
    ) -> UnsubscribePlan:
        return services.admin.plan_unsubscribe(
            role, arguments.topic, arguments.subscription, force=arguments.force
        )

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: Unsubscribe
    ) -> Applied:
        # As pulsar-admin's: no count of what is dropped (that would analyze the backlog).
        services.admin.delete_subscription(
            caller.role,
            arguments.topic,
            arguments.subscription,
            force=arguments.force,
            via=caller.via,
        )
        outcome = {"subscription": arguments.subscription, "force": arguments.force}
        return Applied(UNSUBSCRIBE, None, None, outcome)

    def apply_approved(
        self, services: GatingServices, plan: UnsubscribePlan, approval: Approval
    ) -> Applied:
        dropped = services.admin.apply_approved_unsubscribe(plan, approval)
        return Applied(UNSUBSCRIBE, dropped, 0, {"dropped": dropped})


OPERATION = UnsubscribeOperation(
    "unsubscribe",
    UNSUBSCRIBE,
    UnsubscribePlan,
    Unsubscribe,
    "cursorops_unsubscribe",
    "unsubscribe",
    "Unsubscribe",
)

__all__ = ["OPERATION", "Unsubscribe"]

"""The gated redrive: a subscription's dead-letter messages published back to its topic for
it alone (:class:`~core.redriving.redrive_plan.RedrivePlan`). It moves cursors on both
topics, so both gate it: the stricter namespace policy counts, and an approver must be
permitted on both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import InvalidArgumentError
from core.gating.operation import (
    REDRIVE,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from core.redriving.redrive_plan import RedriveOutcome, RedrivePlan

if TYPE_CHECKING:
    from core.store.values import TopicInfo


@dataclass(frozen=True, kw_only=True)
class RedriveDeadLetters(GatedArguments):
    """Redrive the subscription's dead-letter topic (``<topic>-<subscription>-DLQ``, or
    ``dead_letter_topic``): every message on it, or those ``predicate`` matches."""

    dead_letter_topic: str | None = None
    predicate: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dead_letter_topic is not None and not isinstance(self.dead_letter_topic, str):
            raise InvalidArgumentError("Invalid dead-letter topic: must be a text")
        object.__setattr__(self, "dead_letter_topic", self.dead_letter_topic or None)
        if self.predicate is not None and not isinstance(self.predicate, Mapping):
            raise InvalidArgumentError("Invalid predicate: expected a predicate document")


def _applied(outcome: RedriveOutcome) -> Applied:
    return Applied(
        REDRIVE,
        len(outcome.redriven),
        len(outcome.acknowledged_meanwhile),
        outcome.to_json(),
        result=outcome,
    )


class RedriveOperation(PreviewedOperation[RedrivePlan, RedriveDeadLetters]):
    def topics(self, plan: RedrivePlan) -> tuple[str, ...]:
        return (plan.topic, plan.dead_letter_topic)

    def targets(
        self, services: GatingServices, role: str, arguments: RedriveDeadLetters
    ) -> Sequence[TopicInfo]:
        return services.redrive.authorized(
            role, arguments.topic, arguments.subscription, arguments.dead_letter_topic
        )

    def plan_for(
        self, services: GatingServices, role: str, arguments: RedriveDeadLetters
    ) -> RedrivePlan:
        return services.redrive.plan_redrive(
            role,
            arguments.topic,
            arguments.subscription,
            predicate=arguments.predicate,
            dead_letter=arguments.dead_letter_topic,
        )

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: RedriveDeadLetters
    ) -> Applied:
        plan = self.plan_for(services, caller.role, arguments)
        return _applied(services.redrive.apply_redrive(caller.role, plan, via=caller.via))

    def apply_approved(
        self, services: GatingServices, plan: RedrivePlan, approval: Approval
    ) -> Applied:
        return _applied(services.redrive.apply_approved_redrive(plan, approval))


OPERATION = RedriveOperation(
    "redrive",
    REDRIVE,
    RedrivePlan,
    RedriveDeadLetters,
    "cursorops_redrive",
    "redrive",
    "Redrive dead letters",
)

__all__ = ["OPERATION", "RedriveDeadLetters"]

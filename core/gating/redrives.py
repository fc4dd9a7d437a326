"""The gated redrive: a subscription's dead-letter messages published back to its topic for
it alone (:class:`~cursorops.core.redriving.redrive_plan.RedrivePlan`). It moves cursors on both
topics, so both gate it: the stricter namespace policy counts, and an approver must be
permitted on both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cursorops.core.content import masked_value, shown
from cursorops.core.errors import InvalidArgumentError
from cursorops.core.gating.operation import (
    REDRIVE,
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
    predicate_text,
    request_of,
    time_text,
)
from cursorops.core.redriving.redrive_plan import RedriveOutcome, RedrivePlan, id_text

if TYPE_CHECKING:
    from cursorops.core.gating.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


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


def redrive_preview(record: PlanRecord, plan: RedrivePlan, content: bool = True) -> Preview:
    """The dead letters published again to the topic for the subscription alone (redelivered
    to it), acknowledged on the dead-letter topic by its subscriptions; per dead-letter
    partition, the ids named."""
    per_partition: dict[str, int] = {}
    for m in plan.ids:
        name = (
            plan.dead_letter_topic
            if m.partition < 0
            else f"{plan.dead_letter_topic}-partition-{m.partition}"
        )
        per_partition[name] = per_partition.get(name, 0) + 1
    dead = plan.dead_letter_subscriptions
    others = plan.other_subscriptions
    keyed = sum(1 for k in plan.keys if k is not None)
    return Preview(
        operation=REDRIVE,
        heading=f"Redrive {count(plan.messages)} from the dead-letter topic",
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record),
        partitions=tuple(PartitionChange(p, ids=n) for p, n in per_partition.items()),
        effects=Effects(redelivered=plan.messages, acknowledged=plan.messages if dead else 0),
        details=(
            ("From the dead-letter topic", plan.dead_letter_topic),
            (
                "Which",
                predicate_text(shown(plan.predicate, content), none="every message on it"),
            ),
            (
                "Redelivered as",
                f"new messages on the topic, delivered to subscription {plan.subscription} only",
            ),
            (
                "Acknowledged on the dead-letter topic by",
                ", ".join(dead) if dead else "no subscription (it has none)",
            ),
            (
                "Acknowledged at once on the topic's other subscriptions",
                ", ".join(others) if others else "none (it has no other)",
            ),
            ("Ids", f"{len(plan.ids)} ({keyed} with a key)"),
            ("Planned at", time_text(plan.planned_at)),
        ),
        messages=tuple(
            MessageRow(
                id_text(m.message_id),
                "" if m.message_id.partition < 0 else str(m.message_id.partition),
                key=m.key if content else masked_value("key", m.key),
                publish_time=time_text(m.publish_time),
                properties=dict(m.properties)
                if content
                else masked_value("properties", dict(m.properties)),
            )
            for m in plan.sample
        ),
        messages_not_listed=max(len(plan.ids) - len(plan.sample), 0),
    )


class RedriveOperation(PreviewedOperation[RedrivePlan, RedriveDeadLetters]):
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        return redrive_preview(record, self.plan_of(record), content)

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

"""Unsubscribe, the gated operation: a subscription deleted with every message it has not
acknowledged.

Unsubscribing deletes the subscription's cursor with its backlog: where the namespace
requires approval, that is a gated operation. The plan (:class:`UnsubscribePlan`)
records the backlog per partition at planning time, which the approver reads; apply
deletes the subscription (whatever arrived since is dropped with it, and the audit
record says how much that was). The plan is portable JSON with an id derived from its
content (:class:`~cursorops.core.domain.portable_plan.PortablePlan`).

Here are the request's arguments (:class:`Unsubscribe`), the plan, its preview, and the
apply: at once (:func:`delete_subscription`, pulsar-admin's ``topics unsubscribe``), or
of an approved record, through the cursor door with its audit record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    SubscriptionBusyError,
)
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
    UNSUBSCRIBE,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatingServices,
    PreviewedOperation,
)
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.values import AuditEntry

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.store.values import TopicInfo


UNSUBSCRIBE_PLAN_FORMAT = 1


@dataclass(frozen=True)
class UnsubscribePlan(PreviewedPlan):
    """One subscription to delete, and its backlog per partition when planned."""

    SPELLING: ClassVar[Spelling] = Spelling.SORTED
    KIND: ClassVar[str] = "unsubscribe plan"

    topic: str
    subscription: str
    backlog: tuple[tuple[str, int], ...]
    """(partition, messages not acknowledged) at planning time."""
    force: bool
    """Delete it even while consumers are connected (they are disconnected)."""
    planned_at_ms: int

    @property
    def messages(self) -> int:
        """Messages the subscription drops, at planning time (what the quorum counts)."""
        return sum(count for _, count in self.backlog)

    def content(self) -> dict[str, Any]:
        return {
            "format": UNSUBSCRIBE_PLAN_FORMAT,
            "topic": self.topic,
            "subscription": self.subscription,
            "backlog": [[p, c] for p, c in self.backlog],
            "force": self.force,
            "plannedAt": self.planned_at_ms,
        }

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> UnsubscribePlan:
        fields = {"format", "topic", "subscription", "backlog", "force", "plannedAt"}
        if set(content) != fields:
            raise InvalidArgumentError("Invalid unsubscribe plan: unexpected fields")
        backlog = content["backlog"]
        if (
            content["format"] != UNSUBSCRIBE_PLAN_FORMAT
            or not isinstance(content["force"], bool)
            or not isinstance(backlog, list)
            or not all(
                isinstance(row, list)
                and len(row) == 2
                and isinstance(row[0], str)
                and isinstance(row[1], int)
                and not isinstance(row[1], bool)
                and row[1] >= 0
                for row in backlog
            )
        ):
            raise InvalidArgumentError("Invalid unsubscribe plan: malformed")
        planned = content["plannedAt"]
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 0:
            raise InvalidArgumentError("Invalid unsubscribe plan: bad plannedAt")
        return cls(
            topic=str(content["topic"]),
            subscription=str(content["subscription"]),
            backlog=tuple((row[0], row[1]) for row in backlog),
            force=content["force"],
            planned_at_ms=planned,
        )

    def preview(self) -> dict[str, Any]:
        """What the approver reads: the subscription, what it drops, per partition."""
        return {
            "unsubscribe": self.subscription,
            "messagesDropped": self.messages,
            "evenWithConsumersConnected": self.force,
            "partitions": [{"partition": p, "backlog": c} for p, c in self.backlog],
        }


@dataclass(frozen=True, kw_only=True)
class Unsubscribe(GatedArguments):
    """Delete the subscription; ``force``: even while consumers are connected."""

    force: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.force, bool):
            raise InvalidArgumentError(f"Invalid force {self.force!r}: expected true or false")


def delete_subscription(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    *,
    force: bool = False,
    via: str = "broker",
) -> None:
    """``topics unsubscribe``: Pulsar's UNSUBSCRIBE, which needs ``consume``.

    As in Pulsar, refused while a consumer is connected (its lease has not
    lapsed), unless ``force``. Where the namespace requires approval it is refused,
    backlog or not (a subscription gone for a while misses what is published
    meanwhile): the ``cursorops_unsubscribe`` workflow deletes it once approved.
    Audited: the record is the name's history (``create_subscription``).
    """
    info = services.access.authorized_topic(role, Operation.UNSUBSCRIBE, topic)
    if info.approval_required:
        left = plan_unsubscribe(services, role, info.name, subscription, force=force).messages
        services.access.refuse_without_approval(
            info,
            f"unsubscribing '{subscription}', which has {left} message(s) left",
            "the cursorops_unsubscribe workflow",
        )
    _refuse_while_connected(services, info.name, subscription, force)
    with services.metadata.cursor_transaction() as work:
        work.remove_subscription(info.name, subscription, ticket=Ticket.ungated("unsubscribe"))
        # The name's history: a subscription created again under it later is a cursor
        # move where the namespace requires approval (see create_subscription).
        detail = {"via": via, "force": force}
        work.record_audit(
            AuditEntry("unsubscribe", info.name, subscription, role, detail, services.clock())
        )


def plan_unsubscribe(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    *,
    force: bool = False,
) -> UnsubscribePlan:
    """What unsubscribing would drop: the backlog per partition now; changes nothing."""
    info = services.access.authorized_topic(role, Operation.UNSUBSCRIBE, topic)
    rows = services.analysis.analyze_backlog(role, info.name, subscription)
    backlog = tuple((row.topic_partition, row.result.messages) for row in rows)
    return UnsubscribePlan(info.name, subscription, backlog, force, services.clock())


def apply_unsubscribe(
    services: GatingServices, role: str, plan: UnsubscribePlan, *, via: str = "broker"
) -> int:
    """:func:`_apply_unsubscribe` at once; refused where the namespace requires approval."""
    return _apply_unsubscribe(services, role, plan, via, None)


def _apply_unsubscribe(
    services: GatingServices, role: str, plan: UnsubscribePlan, via: str, approval: Approval | None
) -> int:
    """Delete the plan's subscription with an ``unsubscribe`` audit record (and an approved
    record's claim), in one transaction; the messages it dropped, counted now.

    Refused where the namespace requires approval unless approved, and while a
    consumer is connected unless the plan says ``force``."""
    info = services.access.authorized_topic(role, Operation.UNSUBSCRIBE, plan.topic)
    if approval is None:
        services.access.refuse_without_approval(
            info, f"unsubscribing '{plan.subscription}'", "the cursorops_unsubscribe workflow"
        )
    if info.name != plan.topic:
        raise InvalidArgumentError(f"Invalid unsubscribe plan: '{plan.topic}' is not canonical")
    _refuse_while_connected(services, info.name, plan.subscription, plan.force)
    dropped = sum(
        row.result.messages
        for row in services.analysis.analyze_backlog(role, info.name, plan.subscription)
    )
    at_ms = services.clock()
    with services.metadata.cursor_transaction() as work:
        work.remove_subscription(
            info.name, plan.subscription, ticket=apply_record.ticket(approval, UNSUBSCRIBE)
        )
        fields = {"planId": plan.plan_id, "plannedBacklog": plan.messages, "dropped": dropped}
        detail = apply_record.audit_detail(fields, via, approval)
        entry = AuditEntry(UNSUBSCRIBE, info.name, plan.subscription, role, detail, at_ms)
        apply_record.record_apply(work, entry, approval, dropped=dropped)
    return dropped


def _refuse_while_connected(
    services: GatingServices, topic: str, subscription: str, force: bool
) -> None:
    if force:
        return
    now = services.clock()
    with services.metadata.subscription_transaction(topic, subscription, now) as txn:
        live = [c for c in txn.consumers() if c.lease_expires_ms > now]
    if live:
        raise SubscriptionBusyError(
            f"Subscription '{subscription}' of {topic} has {len(live)} active "
            "connected consumer(s); use force to delete it anyway"
        )


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
        return plan_unsubscribe(
            services, role, arguments.topic, arguments.subscription, force=arguments.force
        )

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: Unsubscribe
    ) -> Applied:
        # As pulsar-admin's: no count of what is dropped (that would analyze the backlog).
        delete_subscription(
            services,
            caller.role,
            arguments.topic,
            arguments.subscription,
            force=arguments.force,
            via=caller.via,
        )
        outcome = {"subscription": arguments.subscription, "force": arguments.force}
        return Applied(UNSUBSCRIBE, None, None, outcome)

    def apply_plan(
        self,
        services: GatingServices,
        role: str,
        plan: UnsubscribePlan,
        via: str,
        approval: Approval | None,
    ) -> Applied:
        dropped = _apply_unsubscribe(services, role, plan, via, approval)
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


__all__ = [
    "OPERATION",
    "UNSUBSCRIBE_PLAN_FORMAT",
    "Unsubscribe",
    "UnsubscribePlan",
    "apply_unsubscribe",
    "delete_subscription",
    "plan_unsubscribe",
]

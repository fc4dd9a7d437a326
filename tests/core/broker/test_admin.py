"""Tenancy and admin through ``Broker.admin``: what it creates is what the stores hold."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    NotAuthorizedError,
    PositionOutOfRangeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating import unsubscribe

from .conftest import TOPIC


def test_tenants_and_namespaces(broker: Broker) -> None:
    admin = broker.admin
    admin.create_tenant("admin", "beta", ["beta-admin"])
    admin.create_namespace("beta-admin", "beta/one")
    assert admin.list_tenants("admin") == sorted(broker.metadata.list_tenants())
    assert "beta" in admin.list_tenants("admin")
    assert admin.list_namespaces("beta-admin", "beta") == ["beta/one"]
    with pytest.raises(NotAuthorizedError):
        admin.list_tenants("beta-admin")
    with pytest.raises(NotAuthorizedError):
        admin.create_namespace("beta-admin", "acme/theirs")


def test_topics_are_listed_for_who_may_use_them(broker: Broker) -> None:
    broker.admin.create_topic("acme-admin", TOPIC, 2)
    assert [t.name for t in broker.admin.list_topics("acme-admin", "acme/ops")] == [TOPIC]
    with pytest.raises(NotAuthorizedError):
        broker.admin.list_topics("ops", "acme/ops")
    broker.admin.grant_permission("acme-admin", "acme/ops", "ops", ["consume"])
    assert [t.partitions for t in broker.admin.list_topics("ops", "acme/ops")] == [2]


def test_too_many_partitions_are_refused(broker: Broker) -> None:
    limit = broker.config.max_partitions_per_topic
    with pytest.raises(InvalidArgumentError, match="max_partitions_per_topic"):
        broker.admin.create_topic("admin", TOPIC, limit + 1)
    assert broker.metadata.list_topics("acme/ops") == []


def test_policies_of_a_namespace(broker: Broker, ids: list[MessageId]) -> None:
    admin = broker.admin
    assert not admin.skip_requires_approval("admin", TOPIC)
    admin.set_namespace_policy("acme-admin", "acme/ops", skip_requires_approval=True)
    assert admin.skip_requires_approval("admin", TOPIC)
    admin.set_approval_quorum("acme-admin", "acme/ops", large_above_messages=5, approvals=2)
    policy = admin.approval_policy("admin", TOPIC)
    assert policy.approvals_for(5) == 1
    assert policy.approvals_for(6) == 2


def test_a_subscription_at_an_entry_starts_there(broker: Broker, ids: list[MessageId]) -> None:
    broker.admin.create_subscription(
        "admin", TOPIC, "at", SubscriptionType.SHARED, initial_position=ids[4].position
    )
    assert [m.payload for m in broker.reading.peek_messages("admin", TOPIC, "at", 2)] == [
        b"4",
        b"5",
    ]
    with pytest.raises(PositionOutOfRangeError):
        broker.admin.create_subscription(
            "admin", TOPIC, "nowhere", initial_position=Position(ids[-1].ledger_id, 99)
        )
    broker.admin.create_subscription("admin", TOPIC, "after", start_after=ids[7].position)
    assert [m.payload for m in broker.reading.peek_messages("admin", TOPIC, "after", 5)] == [
        b"8",
        b"9",
    ]


def test_subscriptions_are_listed_updated_and_deleted(broker: Broker, ids: list[MessageId]) -> None:
    admin = broker.admin
    admin.update_subscription_properties("admin", TOPIC, "s", {"team": "billing"})
    [sub] = admin.list_subscriptions("admin", TOPIC)
    assert (sub.name, dict(sub.properties)) == ("s", {"team": "billing"})
    unsubscribe.delete_subscription(broker.gated, "admin", TOPIC, "s")
    assert admin.list_subscriptions("admin", TOPIC) == []


def test_unsubscribing_with_a_backlog_needs_approval_there(
    broker: Broker, ids: list[MessageId]
) -> None:
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError, match="10 message"):
        unsubscribe.delete_subscription(broker.gated, "admin", TOPIC, "s")
    assert [s.name for s in broker.admin.list_subscriptions("admin", TOPIC)] == ["s"]


def test_an_approved_unsubscribe_drops_the_subscription_once(
    broker: Broker, ids: list[MessageId]
) -> None:
    from cursorops.core.domain.errors import PlanAlreadyAppliedError
    from cursorops.core.domain.plans.plan_record import UNSUBSCRIBE, PlanBinding
    from cursorops.core.services.gating.unsubscribe import UnsubscribePlan

    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    plan = unsubscribe.plan_unsubscribe(broker.gated, "admin", TOPIC, "s")
    assert plan.messages == 10 and plan.preview()["messagesDropped"] == 10
    assert UnsubscribePlan.from_json(plan.dumps()) == plan
    with pytest.raises(ApprovalRequiredError, match="cursorops_unsubscribe"):
        unsubscribe.apply_unsubscribe(broker.gated, "admin", plan)
    record = broker.workflow.save_plan_record(
        PlanBinding("d", "r", "ann", "admin", UNSUBSCRIBE), plan, {"reason": "retired"}
    )
    applied = broker.apply_approved_plan(record, [{"approver": "bob"}])
    assert applied.changed == 10
    assert broker.admin.list_subscriptions("admin", TOPIC) == []
    [audit] = broker.workflow.audit_log("admin", TOPIC, kind="unsubscribe")
    assert audit.detail["dropped"] == 10 and audit.detail["approvedBy"] == ["bob"]
    with pytest.raises(PlanAlreadyAppliedError):
        broker.apply_approved_plan(broker.workflow.current_plan_record("admin", "d", "r"), [])  # type: ignore[arg-type]


def test_an_empty_subscription_needs_approval_there_too(
    broker: Broker, ids: list[MessageId]
) -> None:
    """Gone for a while, it misses what is published meanwhile; deleted and created again at
    earliest, it would deliver every acknowledged message again."""
    skips.skip_head(broker.gated, "admin", TOPIC, "s", None)
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError, match="0 message"):
        unsubscribe.delete_subscription(broker.gated, "admin", TOPIC, "s")
    assert [s.name for s in broker.admin.list_subscriptions("admin", TOPIC)] == ["s"]

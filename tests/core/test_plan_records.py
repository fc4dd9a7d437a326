"""Plan records and the approval policy: what a gated operation previews is what it applies.

A record is content-addressed (any change to it is seen), bound to one run,
applied at most once (even by racing appliers), and applied only inside its
approved set. On a namespace that requires approval every other door of an
irreversible operation refuses and writes nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    InvalidSkipPlanError,
    PlanAlreadyAppliedError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.plans.plan_record import (
    MAX_APPROVALS,
    ApprovalPolicy,
    PlanBinding,
    PlanRecord,
)
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset, unsubscribe
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from tests.core.conftest import in_threads

TOPIC = "persistent://acme/ops/orders"
SUB = "s"


@pytest.fixture
def seeded(broker: Broker) -> Broker:
    """acme/ops/orders: 20 messages in batches of 5, then 5 single ones; alice may consume."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, SUB, SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(20)], batch_size=5
    )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x%d" % i) for i in range(5)])
    broker.admin.grant_permission("admin", "acme/ops", "alice", ["consume"])
    return broker


def ids(broker: Broker) -> list:  # type: ignore[type-arg]
    return [m.message_id for m in broker.reading.peek_messages("admin", TOPIC, SUB, 100)]


def binding(run: str = "manual__1") -> PlanBinding:
    return PlanBinding("cursorops_skip_messages", run, "alice", "alice")


def unacked(broker: Broker) -> int:
    return len(broker.reading.peek_messages("admin", TOPIC, SUB, 1000))


def test_messages_count_a_whole_batch_by_its_size(seeded: Broker) -> None:
    all_ids = ids(seeded)
    whole = type(all_ids[0])(all_ids[0].ledger_id, all_ids[0].entry_id, -1, -1)
    plan = skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, [whole, all_ids[22]])
    assert plan.messages == 6 and len(plan) == 2


def test_the_digest_covers_every_field_and_a_changed_record_is_refused(seeded: Broker) -> None:
    plan = skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, ids(seeded)[:2])
    record = seeded.workflow.save_plan_record(binding(), plan, {"reason": "r", "backlog": {}})
    assert (
        seeded.workflow.current_plan_record("alice", binding().dag_id, binding().run_id) == record
    )
    other = SkipPlan(plan.topic, plan.subscription, plan.items[:1], plan.planned_at_ms)
    changes = {
        "binding": replace(record.binding, requester="mallory"),
        "document": {"reason": "other", "backlog": {}},
        "messages": 99,
        "required_approvals": 2,
        "created_at_ms": record.created_at_ms + 1,
        "plan_json": other.dumps(),
        "plan_id": other.plan_id,
        "subscription": "other",
    }
    for field, value in changes.items():
        with pytest.raises(InvalidArgumentError, match="does not match its content"):
            replace(record, **{field: value}).verified()
    with pytest.raises(InvalidArgumentError, match="1 to 3"):
        PlanRecord.create(
            binding(), plan, {}, required_approvals=MAX_APPROVALS + 1, created_at_ms=1
        )


def test_a_run_is_bound_to_its_newest_record(seeded: Broker, clock) -> None:  # type: ignore[no-untyped-def]
    first = seeded.workflow.save_plan_record(
        binding(), skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, ids(seeded)[:1]), {}
    )
    clock.advance(1)
    second = seeded.workflow.save_plan_record(
        binding(), skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, ids(seeded)[:1]), {}
    )
    assert first.digest != second.digest  # the same ids planned again: a new record
    assert (
        seeded.workflow.current_plan_record("alice", "cursorops_skip_messages", "manual__1")
        == second
    )
    assert seeded.workflow.current_plan_record("alice", "cursorops_skip_messages", "other") is None


def test_a_record_is_applied_at_most_once_even_by_racing_appliers(seeded: Broker) -> None:
    before = unacked(seeded)
    plan = skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, ids(seeded)[:3])
    record = seeded.workflow.save_plan_record(binding(), plan, {})
    results: list[object] = []

    def apply(_: int) -> None:
        try:
            results.append(seeded.apply_approved_plan(record, [{"approver": "bob"}]))
        except PlanAlreadyAppliedError as exc:
            results.append(exc)

    in_threads(apply, 4)
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert unacked(seeded) == before - 3
    applied = seeded.workflow.current_plan_record("alice", "cursorops_skip_messages", "manual__1")
    assert applied is not None and applied.applied is not None
    assert applied.applied["approvedBy"] == ["bob"] and applied.applied["skipped"] == 3
    [skip] = [r for r in seeded.workflow.audit_log("admin", TOPIC) if r.kind == "skip"]
    assert skip.detail["planDigest"] == record.digest and skip.detail["approvedBy"] == ["bob"]


def test_apply_refuses_a_record_changed_in_the_store(
    seeded: Broker,
) -> None:
    before = unacked(seeded)
    plan = skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, ids(seeded)[:2])
    record = seeded.workflow.save_plan_record(binding(), plan, {})
    # A plan whose stored item claims a batch index the entry does not have: planning it
    # again cannot give the approved set.
    forged = replace(record, plan_json=plan.dumps().replace('"batchIndex":0', '"batchIndex":9'))
    with pytest.raises((InvalidArgumentError, InvalidSkipPlanError)):
        seeded.apply_approved_plan(forged, [{"approver": "bob"}])
    assert unacked(seeded) == before


def test_the_quorum_policy_counts_messages(seeded: Broker) -> None:
    assert seeded.admin.approval_policy("alice", TOPIC) == ApprovalPolicy()
    seeded.admin.set_approval_quorum("admin", "acme/ops", large_above_messages=5, approvals=2)
    policy = seeded.admin.approval_policy("alice", TOPIC)
    assert (policy.approvals_for(5), policy.approvals_for(6)) == (1, 2)
    all_ids = ids(seeded)
    small = seeded.workflow.save_plan_record(
        binding("a"), skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, all_ids[:5]), {}
    )
    large = seeded.workflow.save_plan_record(
        binding("b"), skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, all_ids[:6]), {}
    )
    assert (small.required_approvals, large.required_approvals) == (1, 2)
    with pytest.raises(InvalidArgumentError, match="1 to 3"):
        seeded.admin.set_approval_quorum("admin", "acme/ops", large_above_messages=1, approvals=4)


def test_every_door_of_an_approval_namespace_refuses_and_writes_nothing(seeded: Broker) -> None:
    seeded.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    before = unacked(seeded)
    some = ids(seeded)[:2]
    plan = skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, some)  # previewing is allowed
    doors = {
        "skip-messages": lambda: skips.skip_messages(seeded.gated, "alice", TOPIC, SUB, some),
        "apply a plan": lambda: skips.apply_skip(seeded.gated, "alice", plan),
        "reset by time": lambda: reset.reset_cursor(
            seeded.gated, "alice", TOPIC, SUB, timestamp_ms=2**62
        ),
        "reset by id": lambda: reset.reset_cursor(
            seeded.gated, "alice", TOPIC, SUB, position=Position(0, 0)
        ),
        "unsubscribe with a backlog": lambda: unsubscribe.delete_subscription(
            seeded.gated, "alice", TOPIC, SUB
        ),
        "a superuser too": lambda: skips.skip_messages(seeded.gated, "admin", TOPIC, SUB, some),
    }
    for door, call in doors.items():
        with pytest.raises(ApprovalRequiredError, match="requires a second person's approval"):
            call()
        assert unacked(seeded) == before, door
    # An approved record is the one door open.
    record = seeded.workflow.save_plan_record(binding(), plan, {})
    seeded.apply_approved_plan(record, [{"approver": "bob"}])
    assert unacked(seeded) == before - 2
    # A subscription with nothing left goes through the workflow too: gone for a while, it
    # misses what is published meanwhile.
    seeded.admin.create_subscription("admin", TOPIC, "empty", SubscriptionType.SHARED)
    with pytest.raises(ApprovalRequiredError, match="cursorops_unsubscribe"):
        unsubscribe.delete_subscription(seeded.gated, "alice", TOPIC, "empty")
    assert "empty" in {s.name for s in seeded.admin.list_subscriptions("admin", TOPIC)}


def test_a_drained_subscription_comes_back_only_at_latest_on_an_approval_namespace(
    seeded: Broker,
) -> None:
    """The trial's door: drain, delete, create again at earliest (or at a message id) gave
    back every acknowledged message with no approval and no audit record."""
    skips.skip_messages(
        seeded.gated, "admin", TOPIC, SUB, ids(seeded)
    )  # drained, before the policy
    assert unacked(seeded) == 0
    seeded.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError, match="cursorops_unsubscribe"):
        unsubscribe.delete_subscription(seeded.gated, "alice", TOPIC, SUB)
    # The approved workflow's apply deletes it, audited: the name now has history.
    plan = unsubscribe.plan_unsubscribe(seeded.gated, "alice", TOPIC, SUB)
    record = seeded.workflow.save_plan_record(
        PlanBinding("cursorops_unsubscribe", "manual__u", "alice", "alice", "unsubscribe"),
        plan,
        {},
    )
    seeded.apply_approved_plan(record, [{"approver": "bob"}])
    doors = {
        "earliest": lambda: seeded.admin.create_subscription(
            "alice", TOPIC, SUB, SubscriptionType.SHARED, initial_position="earliest"
        ),
        "a message id": lambda: seeded.admin.create_subscription(
            "alice", TOPIC, SUB, SubscriptionType.SHARED, initial_position=Position(0, 0)
        ),
        "after a message id (a reader)": lambda: seeded.admin.create_subscription(
            "alice", TOPIC, SUB, SubscriptionType.SHARED, start_after=Position(0, 0)
        ),
        "a superuser too": lambda: seeded.admin.create_subscription(
            "admin", TOPIC, SUB, SubscriptionType.SHARED, initial_position="earliest"
        ),
    }
    for door, call in doors.items():
        with pytest.raises(ApprovalRequiredError, match="cursorops_reset_cursor"):
            call()
        assert SUB not in {s.name for s in seeded.admin.list_subscriptions("admin", TOPIC)}, door
    # At latest it comes back with nothing to deliver; a name without history may start
    # anywhere (it moves no one's cursor).
    seeded.admin.create_subscription("alice", TOPIC, SUB, SubscriptionType.SHARED)
    assert unacked(seeded) == 0
    seeded.admin.create_subscription(
        "alice", TOPIC, "fresh", SubscriptionType.SHARED, initial_position="earliest"
    )
    assert len(seeded.reading.peek_messages("admin", TOPIC, "fresh", 100)) == 25


def test_every_unsubscribe_is_audited(seeded: Broker) -> None:
    unsubscribe.delete_subscription(seeded.gated, "alice", TOPIC, SUB)
    [entry] = seeded.workflow.audit_log("admin", TOPIC, kind="unsubscribe")
    assert (entry.subscription, entry.role, entry.detail["via"]) == (SUB, "alice", "broker")


def test_a_request_is_recorded_when_planned_and_listed_until_it_is_closed(seeded: Broker) -> None:
    """A run forced green (or failed, or abandoned) never writes its closing record: its
    request stays listed, its plan not applied."""
    some = ids(seeded)[:2]
    record = seeded.workflow.save_plan_record(
        binding("forced"),
        skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, some),
        {"reason": "why"},
    )
    [planned] = seeded.workflow.audit_log("admin", TOPIC, kind="skip-planned")
    assert planned.detail["planDigest"] == record.digest and planned.detail["reason"] == "why"
    [open_request] = seeded.workflow.open_requests("alice", TOPIC)
    assert open_request.to_json()["planDigest"] == record.digest
    assert open_request.to_json()["applied"] is False
    # A cleared planning task replaces the run's plan: only the newest is open.
    newer = seeded.workflow.save_plan_record(
        binding("forced"), skips.plan_skip(seeded.gated, "alice", TOPIC, SUB, some[:1]), {}
    )
    assert [
        r.planned.detail["planDigest"] for r in seeded.workflow.open_requests("alice", TOPIC)
    ] == [newer.digest]
    seeded.workflow.record_audit("alice", "skip-request", TOPIC, SUB, {"planDigest": newer.digest})
    assert seeded.workflow.open_requests("alice", TOPIC) == []
    assert unacked(seeded) == 25

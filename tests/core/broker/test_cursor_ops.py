"""Skip and reset through the Broker and the skip slice."""

from __future__ import annotations

import pytest

from cursorops.core.domain.acks.cursor_targets import check_reset_target
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    PositionOutOfRangeError,
    UnsupportedSubscriptionTypeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.plans.plan_record import PlanBinding
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.operation import Approval

from .conftest import TOPIC, chunk_entries, plain_entry


def backlog(broker: Broker) -> int:
    return sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s"))


def test_a_plan_changes_nothing_and_its_apply_skips_it(
    broker: Broker, ids: list[MessageId]
) -> None:
    plan = skip_slice.plan_skip(broker.gated, "admin", TOPIC, "s", [ids[2], ids[5]])
    assert len(plan) == 2
    assert backlog(broker) == 10
    outcome = skip_slice.apply_skip(broker.gated, "admin", plan, via="cli")
    assert len(outcome.skipped) == 2
    assert backlog(broker) == 8
    again = skip_slice.apply_skip(broker.gated, "admin", plan)
    assert (len(again.skipped), len(again.acknowledged_meanwhile)) == (0, 2)
    [audit] = [
        r
        for r in broker.workflow.audit_log("admin", TOPIC, kind="skip")
        if r.detail["via"] == "cli"
    ]
    assert audit.detail["planId"] == plan.plan_id


def test_skip_messages_plans_and_applies(broker: Broker, ids: list[MessageId]) -> None:
    outcome = skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:3])
    assert [m.position for m in outcome.skipped] == [m.position for m in ids[:3]]
    assert broker.analysis.cursor_state("admin", TOPIC, "s").mark_delete == ids[2].position
    with pytest.raises(InvalidArgumentError, match="No message ids"):
        skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", [])


def test_skips_need_a_shared_subscription(broker: Broker, ids: list[MessageId]) -> None:
    broker.admin.create_subscription("admin", TOPIC, "x", SubscriptionType.EXCLUSIVE)
    with pytest.raises(UnsupportedSubscriptionTypeError):
        skip_slice.plan_skip(broker.gated, "admin", TOPIC, "x", ids[:1])


def test_skip_and_reset_are_refused_without_approval_there(
    broker: Broker, ids: list[MessageId]
) -> None:
    plan = skip_slice.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:1])
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError):
        skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:1])
    with pytest.raises(ApprovalRequiredError):
        skip_slice.apply_skip(broker.gated, "admin", plan)
    with pytest.raises(ApprovalRequiredError):
        reset.reset_cursor(broker.gated, "admin", TOPIC, "s", timestamp_ms=0)
    assert backlog(broker) == 10


def test_reset_to_a_position_and_to_a_time(broker: Broker, ids: list[MessageId]) -> None:
    marks = reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=ids[4].position)
    assert marks == {TOPIC: str(broker.analysis.cursor_state("admin", TOPIC, "s").mark_delete)}
    assert [m.payload for m in broker.reading.peek_messages("admin", TOPIC, "s", 1)] == [b"4"]
    reset.reset_cursor(broker.gated, "admin", TOPIC, "s", timestamp_ms=0)
    assert backlog(broker) == 10
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        reset.reset_cursor(broker.gated, "admin", TOPIC, "s")


def test_a_reset_target_is_an_entry_the_start_or_the_end(
    broker: Broker, ids: list[MessageId]
) -> None:
    layout = broker.context.layout(TOPIC)
    last = ids[-1].position
    for fine in (EARLIEST, ids[3].position, Position(last.ledger_id, last.entry_id + 1)):
        check_reset_target(fine, layout)
    with pytest.raises(PositionOutOfRangeError):
        check_reset_target(Position(last.ledger_id, last.entry_id + 2), layout)


def test_an_approved_plan_applies_where_approval_is_required(
    broker: Broker, ids: list[MessageId]
) -> None:
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    plan = skip_slice.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:2])
    binding = PlanBinding(dag_id="d", run_id="r", requester="ann", role="admin")
    record = broker.workflow.save_plan_record(binding, plan, {"plan": "document"})
    approval = Approval(record, ("bob",))
    outcome = skips.apply_approved_skip(broker.gated, plan, approval, any_type=False)
    assert len(outcome.skipped) == 2
    assert backlog(broker) == 8
    [audit] = broker.workflow.audit_log("admin", TOPIC, kind="skip")
    assert (audit.detail["approvedBy"], audit.detail["via"]) == (["bob"], "airflow")


def test_a_skip_of_one_chunk_id_skips_its_message_whole(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    positions = broker.producing.append_entries(
        "admin", TOPIC, [a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"y")]
    )
    ledger = positions[0].ledger_id
    outcome = skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", [MessageId(ledger, 2)])
    assert sorted(m.entry_id for m in outcome.skipped) == [0, 2, 3]
    assert sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s")) == 2

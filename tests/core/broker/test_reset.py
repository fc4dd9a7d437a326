"""reset-cursor planned, then applied: every partition in one transaction, audited, and gated
where the namespace requires approval."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    PlanAlreadyAppliedError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.plans.plan_record import RESET_CURSOR, PlanBinding
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.reset import ResetPlan
from cursorops.core.services.producer import OutgoingMessage

from .conftest import TOPIC, chunk_entries, plain_entry


def backlog(broker: Broker, topic: str = TOPIC) -> int:
    return sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", topic, "s"))


def test_a_plan_shows_both_directions_and_changes_nothing(
    broker: Broker, ids: list[MessageId]
) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:6])
    back = reset.plan_reset(broker.gated, "admin", TOPIC, "s", position=ids[2].position)
    forward = reset.plan_reset(broker.gated, "admin", TOPIC, "s", position=ids[8].position)
    assert [(p.backlog_before, p.backlog_after) for p in back.partitions] == [(4, 8)]
    assert [(p.backlog_before, p.backlog_after) for p in forward.partitions] == [(4, 2)]
    assert (back.messages, forward.messages) == (4, 2)
    assert backlog(broker) == 4
    assert ResetPlan.from_json(back.dumps()) == back
    with pytest.raises(InvalidArgumentError, match="does not match"):
        ResetPlan.from_json(back.dumps().replace('"backlogAfter":8', '"backlogAfter":0'))


def test_a_time_reset_moves_every_partition_in_one_audited_transaction(broker: Broker) -> None:
    topic = "persistent://acme/ops/parted"
    broker.admin.create_topic("admin", topic, partitions=3)
    broker.admin.create_subscription(
        "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 12, batch_size=2)
    skips.skip_head(broker.gated, "admin", topic, "s", None)
    assert backlog(broker, topic) == 0
    moved = reset.reset_cursor(broker.gated, "admin", topic, "s", timestamp_ms=0)
    assert len(moved) == 3 and backlog(broker, topic) == 12
    [audit] = broker.workflow.audit_log("admin", topic, kind="reset-cursor")
    assert len(audit.detail["partitions"]) == 3 and audit.detail["via"] == "broker"


def test_refused_there_until_an_approved_record_applies_once(
    broker: Broker, ids: list[MessageId]
) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:6])
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError, match="cursorops_reset_cursor"):
        reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=ids[0].position)
    plan = reset.plan_reset(broker.gated, "admin", TOPIC, "s", position=ids[0].position)
    with pytest.raises(ApprovalRequiredError):
        reset.apply_reset(broker.gated, "admin", plan)
    assert backlog(broker) == 4
    binding = PlanBinding("d", "r", "ann", "admin", RESET_CURSOR)
    record = broker.workflow.save_plan_record(binding, plan, {"reason": "replay"})
    applied = broker.apply_approved_plan(record, [{"approver": "bob"}])
    assert (applied.operation, applied.changed) == (RESET_CURSOR, 6)
    assert backlog(broker) == 10
    [audit] = broker.workflow.audit_log("admin", TOPIC, kind="reset-cursor")
    assert audit.detail["approvedBy"] == ["bob"] and audit.detail["via"] == "airflow"
    with pytest.raises(PlanAlreadyAppliedError):
        broker.apply_approved_plan(broker.workflow.current_plan_record("admin", "d", "r"), [])  # type: ignore[arg-type]


def test_a_reset_plan_cannot_pose_as_a_skip(broker: Broker, ids: list[MessageId]) -> None:
    plan = reset.plan_reset(broker.gated, "admin", TOPIC, "s", position=ids[0].position)
    with pytest.raises(InvalidArgumentError, match="not a skip plan"):
        broker.workflow.save_plan_record(PlanBinding("d", "r", "ann", "admin"), plan, {})


def test_a_reset_or_seek_into_a_chunked_message_starts_at_its_first_chunk(
    broker: Broker,
) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    entries = [plain_entry(b"before"), a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"y")]
    positions = broker.producing.append_entries("admin", TOPIC, entries)
    skips.skip_head(broker.gated, "admin", TOPIC, "s", None)
    plan = reset.plan_reset(broker.gated, "admin", TOPIC, "s", position=positions[3])  # A's chunk 1
    (move,) = plan.partitions
    assert move.target == positions[1]
    assert (move.backlog_before, move.backlog_after) == (0, 3)  # A once, x, y
    reset.apply_reset(broker.gated, "admin", plan)
    assert [m.payload for m in broker.reading.consume("admin", TOPIC, "s", 10, ack=True)] == [
        b"A" * 10,
        b"x",
        b"A" * 10,
        b"A" * 10,
        b"y",
    ]
    reset.seek(broker.gated, "admin", TOPIC, "s", position=positions[4])  # A's last chunk
    assert len(broker.reading.consume("admin", TOPIC, "s", 10)) == 5

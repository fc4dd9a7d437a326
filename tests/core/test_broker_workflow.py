"""The Broker's workflow entry points: project_backlog, describe_messages, the audit log,
backlog ages and the backlog history. Real stores (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError, NotAuthorizedError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker, wall_clock_ms
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/orders/events"
SUB = "billing"


@pytest.fixture
def broker(tmp_path, metadata_url):
    clock = [1_000_000]
    config = Config.from_home(tmp_path, metadata_url=metadata_url)
    with Broker(config, clock=lambda: clock[0]) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/orders")
        broker.admin.grant_permission("admin", "acme/orders", "ops", ["consume"])
        broker.admin.create_topic("admin", TOPIC, 2)
        broker.admin.create_subscription(
            "admin", TOPIC, SUB, SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.admin.create_subscription(
            "admin", TOPIC, "other", SubscriptionType.SHARED, initial_position="earliest"
        )
        messages = [
            OutgoingMessage(
                payload=f"order #{i}".encode() * 20, key=f"k{i}", properties={"n": str(i)}
            )
            for i in range(20)
        ]
        broker.producing.produce("admin", TOPIC, messages, batch_size=4)
        clock[0] = 2_000_000
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(payload=b"late", key="late")])
        broker.test_clock = clock  # type: ignore[attr-defined]
        yield broker


def plan_of(broker, ids):
    return skips.plan_skip(broker.gated, "admin", TOPIC, SUB, ids)


def exact_backlog(broker) -> int:
    return sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, SUB))


def test_project_backlog_equals_the_backlog_after_applying(broker):
    peeked = broker.reading.peek_messages("admin", TOPIC, SUB, 100)
    chosen = [m.message_id for m in peeked[1:6]]
    plan = plan_of(broker, chosen)
    projection = broker.analysis.project_backlog("ops", plan)
    assert projection.before == exact_backlog(broker) == 21
    assert projection.after == 16
    assert sum(p.items for p in projection.partitions) == 5
    assert {p.topic_partition for p in projection.partitions} == set(plan.partitions())
    assert exact_backlog(broker) == 21  # nothing written
    skips.apply_skip(broker.gated, "admin", plan)
    assert exact_backlog(broker) == projection.after
    assert broker.analysis.project_backlog("ops", plan).after == projection.after  # idempotent


def test_describe_messages_reads_the_ledgers_in_plan_order(broker):
    peeked = broker.reading.peek_messages("admin", TOPIC, SUB, 100)
    chosen = [m.message_id for m in reversed(peeked[:4])]
    plan = plan_of(broker, chosen)
    described = broker.analysis.describe_messages("ops", plan, 3)
    assert [d.message_id for d in described] == [i.message_id for i in plan.items[:3]]
    by_id = {
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index): m for m in peeked
    }
    for d in described:
        m = by_id[(d.message_id.ledger_id, d.message_id.entry_id, d.message_id.batch_index)]
        assert d.key == m.key
        assert d.publish_time_ms == m.publish_time
        assert dict(d.properties) == dict(m.properties)
        assert d.payload_size == len(m.payload)
        assert d.payload_excerpt == m.payload[: len(d.payload_excerpt)]
        assert len(d.payload_excerpt) == 120
    assert broker.analysis.describe_messages("ops", plan, 0) == []
    with pytest.raises(InvalidArgumentError):
        broker.analysis.describe_messages("ops", plan, -1)
    with pytest.raises(NotAuthorizedError):
        broker.analysis.describe_messages("nobody", plan, 3)


def test_audit_log_entry_points_authorize_and_filter(broker):
    first = broker.workflow.record_audit("ops", "note", TOPIC, SUB, {"n": 1})
    second = broker.workflow.record_audit("ops", "other", TOPIC, None, {"n": 2})
    assert second > first
    records = broker.workflow.audit_log("ops", TOPIC)
    assert [r.kind for r in records] == ["other", "note"]
    [note] = broker.workflow.audit_log("ops", TOPIC, kind="note")
    assert (note.role, note.subscription, note.detail, note.at_ms) == (
        "ops",
        SUB,
        {"n": 1},
        2_000_000,
    )
    with pytest.raises(NotAuthorizedError):
        broker.workflow.record_audit("nobody", "note", TOPIC, SUB, {})
    with pytest.raises(NotAuthorizedError):
        broker.workflow.audit_log("nobody", TOPIC)
    with pytest.raises(InvalidArgumentError):
        broker.workflow.record_audit("ops", "note", TOPIC, SUB, {"x": object()})
    assert len(broker.workflow.audit_log("ops", TOPIC)) == 2


def test_backlog_ages_are_the_oldest_unacknowledged_publish_time(broker):
    ages = broker.analysis.backlog_ages("ops", TOPIC)
    assert ages == {SUB: 1_000_000, "other": 1_000_000}
    everything = [m.message_id for m in broker.reading.peek_messages("admin", TOPIC, SUB, 100)]
    [late] = [m for m in broker.reading.peek_messages("admin", TOPIC, SUB, 100) if m.key == "late"]
    skips.apply_skip(
        broker.gated, "admin", plan_of(broker, [m for m in everything if m != late.message_id])
    )
    assert broker.analysis.backlog_ages("ops", TOPIC) == {
        SUB: late.publish_time,
        "other": 1_000_000,
    }
    skips.apply_skip(broker.gated, "admin", plan_of(broker, [late.message_id]))
    assert broker.analysis.backlog_ages("ops", TOPIC)[SUB] is None


def test_backlog_history_round_trip_idempotent_per_run(broker):
    rows = [
        BacklogSample(TOPIC, SUB, 10, 21, 6, 1_000_000),
        BacklogSample(TOPIC, "other", 10, 21, 6, None),
    ]
    assert broker.analysis.record_backlog_audit("ops", "run-1", rows) == 2
    assert broker.analysis.record_backlog_audit("ops", "run-1", rows) == 0  # a retried run
    assert (
        broker.analysis.record_backlog_audit(
            "ops", "run-2", [BacklogSample(TOPIC, SUB, 20, 5, 2, 7)]
        )
        == 1
    )
    history = broker.analysis.backlog_history("ops", TOPIC, SUB)
    assert [(s.at_ms, s.messages, s.entries, s.oldest_publish_ms, s.run_id) for s in history] == [
        (10, 21, 6, 1_000_000, "run-1"),
        (20, 5, 2, 7, "run-2"),
    ]
    assert len(broker.analysis.backlog_history("ops", TOPIC)) == 3
    assert [s.at_ms for s in broker.analysis.backlog_history("ops", TOPIC, since_ms=15)] == [20]
    assert [s.at_ms for s in broker.analysis.backlog_history("ops", TOPIC, SUB, limit=1)] == [20]
    with pytest.raises(NotAuthorizedError):
        broker.analysis.backlog_history("nobody", TOPIC)
    with pytest.raises(NotAuthorizedError):
        broker.analysis.record_backlog_audit("nobody", "run-3", rows)
    with pytest.raises(InvalidArgumentError):
        broker.analysis.record_backlog_audit(
            "ops", "run-3", [BacklogSample(TOPIC, SUB, 1, -1, 0, None)]
        )
    assert len(broker.analysis.backlog_history("ops", TOPIC)) == 3


def test_wall_clock_is_epoch_ms():
    assert wall_clock_ms() > 1_700_000_000_000

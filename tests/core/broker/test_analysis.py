"""Backlog, stats and the Spark reads through ``Broker.analysis``."""

from __future__ import annotations

from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips

from .conftest import TOPIC


def test_backlog_and_stats_agree(broker: Broker, ids: list[MessageId]) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[0], ids[4]])
    [row] = broker.analysis.analyze_backlog("admin", TOPIC, "s")
    assert (row.topic_partition, row.subscription, row.result.messages) == (TOPIC, "s", 8)
    stats = broker.analysis.topic_stats("admin", TOPIC)
    assert (stats.entries, stats.messages) == (10, 10)
    assert stats.subscriptions["s"].msg_backlog == 8
    assert stats.subscriptions["s"].individually_deleted_ranges == 1
    assert broker.analysis.entry_count("admin", TOPIC) == 10


def test_cursor_state_is_a_copy(broker: Broker, ids: list[MessageId]) -> None:
    state = broker.analysis.cursor_state("admin", TOPIC, "s")
    state.mark_delete = ids[-1].position
    assert broker.analysis.cursor_state("admin", TOPIC, "s").mark_delete != ids[-1].position


def test_a_scan_carries_the_cursors(broker: Broker, ids: list[MessageId]) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:2])
    scan = broker.analysis.scan_plan("admin", TOPIC, operation=Operation.PEEK_MESSAGES)
    assert [p.name for p in scan.partitions] == [TOPIC]
    assert scan.cursor_state(TOPIC, "s").mark_delete == ids[1].position


def test_a_projection_is_the_backlog_after_applying(broker: Broker, ids: list[MessageId]) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[3:6])
    projection = broker.analysis.project_backlog("admin", plan)
    assert (projection.before, projection.after) == (10, 7)
    skips.apply_skip(broker.gated, "admin", plan)
    assert broker.analysis.project_backlog("admin", plan).before == 7


def test_a_plan_is_described_in_the_plans_order(broker: Broker, ids: list[MessageId]) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", [ids[6], ids[1]])
    described = broker.analysis.describe_messages("admin", plan, 5)
    assert [d.payload_excerpt for d in described] == [b"6", b"1"]
    assert broker.analysis.describe_messages("admin", plan, 1)[0].message_id == ids[6]


def test_ages_and_history(broker: Broker, ids: list[MessageId]) -> None:
    ages = broker.analysis.backlog_ages("admin", TOPIC)
    assert set(ages) == {"s"} and ages["s"] is not None
    sample = BacklogSample(
        run_id="r1",
        topic=TOPIC,
        subscription="s",
        at_ms=1,
        messages=10,
        entries=10,
        oldest_publish_ms=ages["s"],
    )
    assert broker.analysis.record_backlog_audit("admin", "r1", [sample]) == 1
    assert broker.analysis.record_backlog_audit("admin", "r1", [sample]) == 0
    assert [s.messages for s in broker.analysis.backlog_history("admin", TOPIC)] == [10]

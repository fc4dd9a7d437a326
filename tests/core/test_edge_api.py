"""What the front doors read through the Broker: cursor state, entry count, a scan, typed stats."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from cursorops.core import SkipOutcome, TopicAnalysis, TopicScan, TopicStats
from cursorops.core.domain.analysis.topic_scan import decode_state
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    NotAuthorizedError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/orders"
PLAIN = "persistent://acme/ops/plain"


@pytest.fixture
def topic(broker: Broker) -> Broker:
    broker.admin.create_topic("admin", TOPIC, 2)
    broker.admin.create_topic("admin", PLAIN)
    broker.admin.create_subscription(
        "admin",
        TOPIC,
        "s",
        SubscriptionType.SHARED,
        {"entryFilter.reject.key": "bad"},
        initial_position="earliest",
    )
    broker.admin.create_subscription("admin", PLAIN, "p", initial_position="earliest")
    messages = [OutgoingMessage(f"m{i}".encode(), key=f"k{i}") for i in range(12)]
    broker.producing.produce("admin", TOPIC, messages, batch_size=3)
    broker.producing.produce("admin", PLAIN, messages[:5])
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    broker.admin.grant_permission("admin", "acme/ops", "writer", ["produce"])
    return broker


def test_cursor_state_reads_one_partition_after_a_skip(topic: Broker) -> None:
    ids = topic.reading.peek_messages("admin", TOPIC, "s", 1)
    first = ids[0].message_id
    partition = f"{TOPIC}-partition-{first.partition}"
    assert not topic.analysis.cursor_state("reader", partition, "s").is_acked(
        first.position, first.batch_index
    )
    skips.skip_messages(topic.gated, "admin", TOPIC, "s", [first])
    state = topic.analysis.cursor_state("reader", TopicName.parse(partition), "s")
    assert state.is_acked(first.position, first.batch_index)
    assert topic.analysis.cursor_state("admin", PLAIN, "p").mark_delete.entry_id == -1


def test_cursor_state_refusals(topic: Broker) -> None:
    with pytest.raises(NotAuthorizedError):
        topic.analysis.cursor_state("writer", PLAIN, "p")
    with pytest.raises(InvalidArgumentError, match="name one"):
        topic.analysis.cursor_state("admin", TOPIC, "s")
    with pytest.raises(TopicNotFoundError):
        topic.analysis.cursor_state("admin", f"{TOPIC}-partition-2", "s")
    with pytest.raises(SubscriptionNotFoundError):
        topic.analysis.cursor_state("admin", PLAIN, "nope")


def test_entry_count_is_the_committed_entries(topic: Broker) -> None:
    assert (
        topic.analysis.entry_count("reader", TOPIC)
        == 4
        == topic.analysis.topic_stats("admin", TOPIC).entries
    )
    assert topic.analysis.entry_count("admin", TopicName.parse(PLAIN)) == 5
    with pytest.raises(NotAuthorizedError):
        topic.analysis.entry_count("writer", TOPIC)


def test_scan_plan_is_picklable_and_holds_each_cursor(topic: Broker) -> None:
    mid = topic.reading.peek_messages("admin", TOPIC, "s", 1)[0].message_id
    skips.skip_messages(topic.gated, "admin", TOPIC, "s", [mid])
    scan = topic.analysis.scan_plan("reader", TOPIC)
    assert isinstance(scan, TopicScan)
    assert pickle.loads(pickle.dumps(scan)) == scan
    assert scan.topic == TOPIC and scan.partition_count == 2
    assert [p.index for p in scan.partitions] == [0, 1]
    assert [s.name for s in scan.subscriptions] == ["s"]
    assert scan.subscriptions[0].filters()
    for part in scan.partitions:
        assert part.paths and all(Path(path).is_file() for path in part.paths)
        assert scan.cursor_state(part.name, "s") == topic.analysis.cursor_state(
            "admin", part.name, "s"
        )
        assert decode_state(scan.states[(part.name, "s")]) == scan.cursor_state(part.name, "s")
    assert set(scan.ledger_owner.values()) == {p.name for p in scan.partitions}
    ledgered = sum(entries for part in scan.partitions for _, entries in part.ledgers)
    assert ledgered == topic.analysis.entry_count("admin", TOPIC)
    plain = topic.analysis.scan_plan("admin", PLAIN, "p", operation=Operation.PEEK_MESSAGES)
    assert [p.index for p in plain.partitions] == [-1] and plain.partition_count == 0


def test_scan_plan_refusals(topic: Broker) -> None:
    with pytest.raises(NotAuthorizedError):
        topic.analysis.scan_plan("writer", TOPIC)
    with pytest.raises(SubscriptionNotFoundError):
        topic.analysis.scan_plan("admin", TOPIC, "nope")
    with pytest.raises(InvalidArgumentError, match="CONSUME or PEEK_MESSAGES"):
        topic.analysis.scan_plan("admin", TOPIC, operation=Operation.SKIP)


def test_topic_stats_are_typed_and_render_pulsars_fields(topic: Broker) -> None:
    stats = topic.analysis.topic_stats("reader", TOPIC)
    assert isinstance(stats, TopicStats)
    sub = stats.subscriptions["s"]
    assert (stats.entries, stats.messages, sub.msg_backlog, sub.backlog_entries) == (4, 12, 12, 4)
    assert sub.type == "Shared" and dict(sub.properties) == {"entryFilter.reject.key": "bad"}
    document = stats.to_pulsar_json()
    assert json.loads(json.dumps(document)) == document
    assert document["subscriptions"]["s"]["msgBacklog"] == 12  # type: ignore[index]
    assert sorted(document) == ["entries", "messages", "partitions", "subscriptions", "topic"]
    assert sorted(document["subscriptions"]["s"]) == [  # type: ignore[index]
        "backlogEntries",
        "individuallyDeletedRanges",
        "markDeletePosition",
        "msgBacklog",
        "partlyAckedBatches",
        "properties",
        "type",
    ]
    with pytest.raises(AttributeError):
        stats.entries = 0  # type: ignore[misc]


def test_analysis_and_outcome_render_one_shape(topic: Broker) -> None:
    analyses = topic.analysis.analyze_backlog("admin", TOPIC, "s")
    analysis = TopicAnalysis.of(TOPIC, "s", analyses)
    assert analysis.total.messages == sum(one.result.messages for one in analyses) == 12
    # Several partitions: the totals have no first or last id.
    assert analysis.total.first_message_id is None
    document = analysis.to_pulsar_json()
    assert document["total"]["messages"] == 12  # type: ignore[index]
    assert [row["topicPartition"] for row in document["partitions"]] == [  # type: ignore[attr-defined]
        f"{TOPIC}-partition-0",
        f"{TOPIC}-partition-1",
    ]
    mid = topic.reading.peek_messages("admin", TOPIC, "s", 1)[0].message_id
    outcome = skips.skip_messages(topic.gated, "admin", TOPIC, "s", [mid])
    assert isinstance(outcome, SkipOutcome)
    assert outcome.to_pulsar_json()["skipped"] == [mid.triplet()]
    assert outcome.to_pulsar_json(lambda m: m.to_base64())["skipped"] == [mid.to_base64()]

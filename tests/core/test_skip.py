"""PIP-423 skip through the broker: every rule of the reference, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import (
    EntryNotFoundError,
    InvalidArgumentError,
    InvalidBatchIndexError,
    InvalidMessageIdError,
    NotAuthorizedError,
    PositionOutOfRangeError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
    UnsupportedSubscriptionTypeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from .conftest import Clock

TOPIC = "persistent://acme/ops/orders"


def snapshot(broker: Broker, sub: str = "s") -> list[tuple[str, str, int, int]]:
    """Everything a skip could change, for before/after comparisons."""
    return [
        (a.topic_partition, str(a.result.first_message_id), a.result.entries, a.result.messages)
        for a in broker.analysis.analyze_backlog("admin", TOPIC, sub)
    ]


@pytest.fixture
def topic(broker: Broker, clock: Clock) -> dict[str, list[MessageId]]:
    """Two partitions: batches of 5, single messages, and one delayed message."""
    broker.admin.create_topic("admin", TOPIC, partitions=2)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    batched = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"b{i}".encode()) for i in range(20)], batch_size=5
    )
    single = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"s{i}".encode()) for i in range(4)]
    )
    delayed = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"report", deliver_at=clock() + 3_600_000)]
    )
    return {"batched": batched, "single": single, "delayed": delayed}


def triplet_id(mid: MessageId) -> MessageId:
    """The id as a bare triplet carries it: no partition."""
    return MessageId(mid.ledger_id, mid.entry_id, -1, mid.batch_index)


def test_skip_one_index_of_a_batch_and_a_delayed_message(
    broker: Broker, topic, clock: Clock
) -> None:
    pill, report = topic["batched"][7], topic["delayed"][0]
    before = sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s"))
    outcome = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [triplet_id(pill), report])
    # In the order given, each with its partition filled in from its ledger.
    assert outcome.skipped == [pill, report]
    assert sum(outcome.per_partition.values()) == 2
    after = sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s"))
    assert after == before - 2
    clock.advance(7_200_000)
    received = broker.reading.consume("admin", TOPIC, "s", 1000)
    payloads = [m.payload for m in received]
    assert len(received) == before - 2
    assert b"b7" not in payloads and b"report" not in payloads
    assert b"b6" in payloads and b"b8" in payloads


def test_ids_are_routed_to_their_own_partition(broker: Broker, topic) -> None:
    ids = [triplet_id(m) for m in topic["single"]]
    outcome = skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids)
    partitions = {m.partition for m in topic["single"]}
    assert len(partitions) == 2
    assert outcome.per_partition == {
        f"{TOPIC}-partition-{p}": sum(1 for m in topic["single"] if m.partition == p)
        for p in partitions
    }
    assert {(m.ledger_id, m.entry_id, m.partition) for m in outcome.skipped} == {
        (m.ledger_id, m.entry_id, m.partition) for m in topic["single"]
    }


def test_already_acknowledged_ids_are_reported_and_skip_is_idempotent(
    broker: Broker, topic
) -> None:
    first = skips.skip_messages(
        broker.gated, "admin", TOPIC, "s", [topic["batched"][0], topic["single"][0]]
    )
    assert len(first.skipped) == 2 and first.already_acknowledged == []
    before = snapshot(broker)
    again = skips.skip_messages(
        broker.gated, "admin", TOPIC, "s", [topic["batched"][0], topic["single"][0]]
    )
    assert again.skipped == []
    assert len(again.already_acknowledged) == 2
    assert snapshot(broker) == before


def test_whole_entry_skip_covers_every_index(broker: Broker, topic) -> None:
    entry = topic["batched"][0]
    skips.skip_messages(
        broker.gated, "admin", TOPIC, "s", [MessageId(entry.ledger_id, entry.entry_id)]
    )
    again = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [entry])
    assert again.already_acknowledged == [entry]


def bad_cases(
    topic: dict[str, list[MessageId]],
) -> list[tuple[list[MessageId], type[Exception], str]]:
    batched, single = topic["batched"][3], topic["single"][0]
    last = max(topic["delayed"] + topic["single"], key=lambda m: (m.ledger_id, m.entry_id))
    return [
        (
            [MessageId(batched.ledger_id, batched.entry_id, -1, 5)],
            InvalidBatchIndexError,
            "Invalid batchIndex: 5, batchSize=5",
        ),
        (
            [MessageId(single.ledger_id, single.entry_id, -1, 0)],
            InvalidBatchIndexError,
            "is not batched",
        ),
        (
            [MessageId(last.ledger_id, last.entry_id + 50)],
            PositionOutOfRangeError,
            "beyond the last entry",
        ),
        ([MessageId(last.ledger_id + 1000, 0)], PositionOutOfRangeError, "beyond the last entry"),
        (
            [MessageId(batched.ledger_id, batched.entry_id, 1 - batched.partition, 0)],
            InvalidMessageIdError,
            "belongs to partition",
        ),
        # One good id and one bad: all-or-nothing.
        (
            [single, MessageId(batched.ledger_id, batched.entry_id, -1, 9)],
            InvalidBatchIndexError,
            "Invalid batchIndex: 9",
        ),
    ]


@pytest.mark.parametrize("case", range(6))
def test_bad_ids_change_nothing(broker: Broker, topic, case: int) -> None:
    ids, error, fragment = bad_cases(topic)[case]
    before = snapshot(broker)
    with pytest.raises(error, match=fragment) as info:
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids)
    assert str(info.value).startswith("Nothing skipped")
    assert snapshot(broker) == before


def test_an_entry_of_a_newer_topic_is_beyond_the_last_entry(broker: Broker, topic) -> None:
    broker.admin.create_topic("admin", "persistent://acme/ops/other", partitions=0)
    other = broker.producing.produce(
        "admin", "persistent://acme/ops/other", [OutgoingMessage(b"x")]
    )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"y", key="k")] * 3)
    # Its ledger was created after every ledger of TOPIC: past TOPIC's end.
    before = snapshot(broker)
    with pytest.raises(PositionOutOfRangeError, match="beyond the last entry of the topic"):
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", [triplet_id(other[0])])
    assert snapshot(broker) == before


def test_an_entry_of_an_older_topic_is_not_found(broker: Broker, topic) -> None:
    other = broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x")])
    newer = "persistent://acme/ops/newer"
    broker.admin.create_topic("admin", newer, partitions=0)
    broker.admin.create_subscription(
        "admin", newer, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce("admin", newer, [OutgoingMessage(b"y")])
    # Its ledger is older than the newer topic's only ledger, and not one of its ledgers.
    before = snapshot(broker)
    with pytest.raises(EntryNotFoundError, match=f"no ledger {other[0].ledger_id} in this topic"):
        skips.skip_messages(broker.gated, "admin", newer, "s", [triplet_id(other[0])])
    assert snapshot(broker) == before


def test_unknown_topic_and_subscription(broker: Broker, topic) -> None:
    with pytest.raises(TopicNotFoundError):
        skips.skip_messages(
            broker.gated, "admin", "persistent://acme/ops/nope", "s", topic["single"][:1]
        )
    with pytest.raises(SubscriptionNotFoundError, match="nope"):
        skips.skip_messages(broker.gated, "admin", TOPIC, "nope", topic["single"][:1])
    with pytest.raises(InvalidArgumentError, match="No message ids"):
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", [])


@pytest.mark.parametrize("kind", [SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER])
def test_exclusive_and_failover_are_refused(broker: Broker, topic, kind: SubscriptionType) -> None:
    broker.admin.create_subscription("admin", TOPIC, "excl", kind, initial_position="earliest")
    before = snapshot(broker, "excl")
    with pytest.raises(UnsupportedSubscriptionTypeError, match="Unsupported subscription type."):
        skips.skip_messages(broker.gated, "admin", TOPIC, "excl", topic["single"][:1])
    assert snapshot(broker, "excl") == before


def test_key_shared_is_allowed(broker: Broker, topic) -> None:
    broker.admin.create_subscription(
        "admin", TOPIC, "ks", SubscriptionType.KEY_SHARED, initial_position="earliest"
    )
    assert (
        len(skips.skip_messages(broker.gated, "admin", TOPIC, "ks", topic["single"][:1]).skipped)
        == 1
    )


def test_skip_needs_consume_permission(broker: Broker, topic) -> None:
    before = snapshot(broker)
    with pytest.raises(NotAuthorizedError, match="'ops'"):
        skips.skip_messages(broker.gated, "ops", TOPIC, "s", topic["single"][:1])
    broker.admin.grant_permission("admin", "acme/ops", "ops", ["produce"])
    with pytest.raises(NotAuthorizedError):
        skips.skip_messages(broker.gated, "ops", TOPIC, "s", topic["single"][:1])
    assert snapshot(broker) == before
    broker.admin.grant_permission("admin", "acme/ops", "ops", ["consume"])
    assert (
        len(skips.skip_messages(broker.gated, "ops", TOPIC, "s", topic["single"][:1]).skipped) == 1
    )
    assert (
        len(
            skips.skip_messages(
                broker.gated, "acme-admin", TOPIC, "s", topic["single"][1:2]
            ).skipped
        )
        == 1
    )


def test_skip_is_audited(broker: Broker, topic) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", topic["single"][:2])
    records = broker.metadata.audit_log(TOPIC)
    assert records[0].kind == "skip" and records[0].role == "admin"
    assert len(records[0].detail["skipped"]) == 2


def test_refusals_do_not_reveal_what_exists(broker: Broker, topic) -> None:
    with pytest.raises(NotAuthorizedError):
        skips.skip_messages(
            broker.gated, "ops", "persistent://acme/nowhere/x", "s", topic["single"][:1]
        )
    with pytest.raises(NotAuthorizedError):
        skips.skip_messages(
            broker.gated, "ops", "persistent://nobody/ops/x", "s", topic["single"][:1]
        )
    with pytest.raises(NotAuthorizedError, match="not a superuser"):
        broker.admin.list_tenants("ops")
    assert [t.name for t in broker.admin.list_topics("acme-admin", "acme/ops")] == [TOPIC]

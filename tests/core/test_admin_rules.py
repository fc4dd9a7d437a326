"""Admin input rules at the Broker: names, partition cap, filter properties, subscriptions.

Every refusal is a one-line InvalidInputError (or NotFound) and changes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidInputError,
    InvalidPredicateError,
    PositionOutOfRangeError,
    SubscriptionBusyError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import MAX_NAME_CHARS
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import unsubscribe
from cursorops.core.services.producer import OutgoingMessage
from tests.core.test_authz import dump

TOPIC = "persistent://acme/ops/orders"
PARTITIONED = "persistent://acme/ops/spread"


def _messages(n: int) -> list[OutgoingMessage]:
    return [OutgoingMessage(payload=f"m{i}".encode()) for i in range(n)]


@pytest.fixture
def seeded(broker: Broker) -> Broker:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_topic("admin", PARTITIONED, 3)
    broker.producing.produce("admin", TOPIC, _messages(5))
    return broker


def _refused(broker: Broker, call: object, error: type[Exception] = InvalidInputError) -> str:
    before = dump(broker, broker.config)
    with pytest.raises(error) as info:
        call()  # type: ignore[operator]
    assert dump(broker, broker.config) == before
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["..", ".", "ok\n", "a b", "é", "x" * (MAX_NAME_CHARS + 1)])
def test_bad_tenant_and_namespace_names(seeded: Broker, name: str) -> None:
    _refused(seeded, lambda: seeded.admin.create_tenant("admin", name))
    _refused(seeded, lambda: seeded.admin.create_namespace("admin", f"acme/{name}"))


def test_topic_names_over_the_cap_are_refused_before_produce(seeded: Broker) -> None:
    _refused(seeded, lambda: seeded.admin.create_topic("admin", "acme/ops/" + "t" * 300))


def test_longest_names_work_end_to_end(seeded: Broker) -> None:
    tenant, namespace, topic = "t" * MAX_NAME_CHARS, "n" * MAX_NAME_CHARS, "x" * MAX_NAME_CHARS
    seeded.admin.create_tenant("admin", tenant)
    seeded.admin.create_namespace("admin", f"{tenant}/{namespace}")
    name = f"{tenant}/{namespace}/{topic}"
    seeded.admin.create_topic("admin", name, 2)
    seeded.admin.create_subscription("admin", name, "s", initial_position="earliest")
    seeded.producing.produce("admin", name, _messages(4))
    assert len(seeded.reading.consume("admin", name, "s", 10)) == 4


def test_partition_cap(seeded: Broker, tmp_path: Path) -> None:
    started = time.monotonic()
    message = _refused(
        seeded, lambda: seeded.admin.create_topic("admin", "acme/ops/huge", 3_000_000_000)
    )
    assert time.monotonic() - started < 5
    assert "at most 1000 partitions" in message
    config = Config.from_home(
        tmp_path / "capped", metadata_url=seeded.config.metadata_url, max_partitions_per_topic=2
    )
    with Broker(config) as capped:
        _refused(capped, lambda: capped.admin.create_topic("admin", "acme/ops/three", 3))
        assert capped.admin.create_topic("admin", "acme/ops/two", 2).partitions == 2


def test_partition_cap_from_the_environment(tmp_path: Path) -> None:
    config = Config.from_environ(
        {"CURSOROPS_HOME": str(tmp_path), "CURSOROPS_MAX_PARTITIONS_PER_TOPIC": "7"}
    )
    assert config.max_partitions_per_topic == 7
    for bad in ("0", "-1", "x", "٣"):
        with pytest.raises(InvalidArgumentError):
            Config.from_environ(
                {"CURSOROPS_HOME": str(tmp_path), "CURSOROPS_MAX_PARTITIONS_PER_TOPIC": bad}
            )


# -- subscription and role names, before they reach the store (SQLite and PostgreSQL) ----


@pytest.mark.parametrize("name", ["a\x00b", "\x00", "bad\udcff", "a\nb", "", " ", "s" * 1025])
def test_bad_subscription_and_role_names(seeded: Broker, name: str) -> None:
    _refused(seeded, lambda: seeded.admin.create_subscription("admin", TOPIC, name))
    _refused(seeded, lambda: seeded.admin.grant_permission("admin", "acme/ops", name, ["consume"]))
    _refused(seeded, lambda: seeded.admin.create_tenant("admin", "newco", admin_roles=[name]))
    _refused(seeded, lambda: seeded.reading.consume("admin", TOPIC, name, 1))
    _refused(seeded, lambda: seeded.reading.peek_messages("admin", TOPIC, name, 1))
    _refused(seeded, lambda: unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, name))


@pytest.mark.parametrize("name", ["a\x00b", "\x00", "bad\udcff", "a\nb", "a\x85", "s" * 1025])
def test_bad_consumer_names(seeded: Broker, name: str) -> None:
    """A consumer's name is stored in the consumer registry: the same rule as a subscription's
    (a NUL was a store failure on PostgreSQL and was kept on SQLite; a lone surrogate a
    UnicodeEncodeError)."""
    seeded.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    dispatcher = seeded.reading.dispatcher("admin", TOPIC, "s")
    message = _refused(seeded, lambda: dispatcher.subscribe(name))
    assert message.startswith("Invalid consumer name")
    consumer = dispatcher.subscribe("ok")
    assert len(consumer.receive_many(10)) == 5


@pytest.mark.parametrize("properties", [{"a\x00": "v"}, {"k": "v\x00"}, {"k": "\udcff"}])
def test_bad_property_text(seeded: Broker, properties: dict[str, str]) -> None:
    _refused(
        seeded, lambda: seeded.admin.create_subscription("admin", TOPIC, "s", properties=properties)
    )


# -- entry filter properties ------------------------------------------------------------

BAD_FILTERS = [
    {"entryFilter.drop.key": "x"},
    {"entryFilter.reject.colour": "red"},
    {"entryFilter.reject.publishTime.after": "yesterday-ish"},
    {
        "entryFilter.reject.publishTime.after": "2000",
        "entryFilter.reject.publishTime.before": "1000",
    },
]


@pytest.mark.parametrize("properties", BAD_FILTERS)
def test_bad_entry_filters_are_refused_at_create(
    seeded: Broker, properties: dict[str, str]
) -> None:
    _refused(
        seeded,
        lambda: seeded.admin.create_subscription("admin", TOPIC, "f", properties=properties),
        InvalidPredicateError,
    )
    # The analysis of the whole topic keeps working.
    seeded.analysis.analyze_backlog("admin", TOPIC)


def test_update_and_clear_subscription_properties(seeded: Broker) -> None:
    seeded.admin.create_subscription("admin", TOPIC, "f", properties={"team": "a"})
    for bad in BAD_FILTERS:
        _refused(
            seeded,
            lambda bad=bad: seeded.admin.update_subscription_properties("admin", TOPIC, "f", bad),
            InvalidPredicateError,
        )
    good = {"entryFilter.reject.key": "k1", "team": "b"}
    info = seeded.admin.update_subscription_properties("admin", TOPIC, "f", good)
    assert info.properties == good
    assert seeded.metadata.get_subscription(TOPIC, "f").properties == good
    seeded.admin.update_subscription_properties("admin", TOPIC, "f", {})
    assert seeded.metadata.get_subscription(TOPIC, "f").properties == {}
    _refused(
        seeded,
        lambda: seeded.admin.update_subscription_properties("admin", TOPIC, "nope", {}),
        SubscriptionNotFoundError,
    )


def test_unsubscribe_removes_the_subscription_and_its_cursor(seeded: Broker) -> None:
    seeded.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED, None, "earliest")
    seeded.reading.consume("admin", TOPIC, "s", 2, ack=True)
    unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, "s")
    assert [s.name for s in seeded.admin.list_subscriptions("admin", TOPIC)] == []
    _refused(
        seeded,
        lambda: unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, "s"),
        SubscriptionNotFoundError,
    )
    # A new subscription of the same name starts afresh.
    seeded.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED, None, "earliest")
    assert len(seeded.reading.peek_messages("admin", TOPIC, "s", 10)) == 5


# -- create-subscription at a message id ------------------------------------------------


def test_subscription_at_an_entry_delivers_from_that_entry(seeded: Broker) -> None:
    ids = [m.message_id for m in _all(seeded)]
    third = ids[2].position
    seeded.admin.create_subscription("admin", TOPIC, "from-3", SubscriptionType.SHARED, None, third)
    got = seeded.reading.consume("admin", TOPIC, "from-3", 10)
    assert [m.message_id.position for m in got] == [i.position for i in ids[2:]]
    last = ids[-1].position
    end = Position(last.ledger_id, last.entry_id + 1)
    seeded.admin.create_subscription("admin", TOPIC, "at-end", SubscriptionType.SHARED, None, end)
    assert seeded.reading.consume("admin", TOPIC, "at-end", 10) == []


@pytest.mark.parametrize(
    ("ledger_offset", "entry_id"),
    [(0, 4294967296), (0, -1), (0, 6), (0, 2**63 - 1), (1, 0), (-1, 0), (2**62, 2**62)],
)
def test_subscription_at_a_missing_entry_is_refused(
    seeded: Broker, ledger_offset: int, entry_id: int
) -> None:
    ledger = _all(seeded)[0].message_id.ledger_id
    position = Position(ledger + ledger_offset, entry_id)
    _refused(
        seeded,
        lambda: seeded.admin.create_subscription("admin", TOPIC, "x", initial_position=position),
        PositionOutOfRangeError,
    )


def test_subscription_at_an_entry_needs_a_non_partitioned_topic(seeded: Broker) -> None:
    _refused(
        seeded,
        lambda: seeded.admin.create_subscription(
            "admin", PARTITIONED, "x", initial_position=Position(0, 0)
        ),
    )


def _all(broker: Broker) -> list:  # type: ignore[type-arg]
    if "all" not in [s.name for s in broker.admin.list_subscriptions("admin", TOPIC)]:
        broker.admin.create_subscription("admin", TOPIC, "all", initial_position="earliest")
    return broker.reading.peek_messages("admin", TOPIC, "all", 100)


# -- stats of one partition --------------------------------------------------------------


def test_stats_of_one_partition(seeded: Broker) -> None:
    seeded.admin.create_subscription("admin", PARTITIONED, "s", initial_position="earliest")
    seeded.producing.produce("admin", PARTITIONED, _messages(9))
    whole = seeded.analysis.topic_stats("admin", PARTITIONED)
    parts = [seeded.analysis.topic_stats("admin", f"{PARTITIONED}-partition-{i}") for i in range(3)]
    assert sum(p.messages for p in parts) == whole.messages == 9
    backlog = [p.subscriptions["s"].msg_backlog for p in parts]
    assert sum(backlog) == whole.subscriptions["s"].msg_backlog == 9
    assert parts[1].topic == f"{PARTITIONED}-partition-1"
    assert parts[1].partition_index == 1 and whole.partition_index is None
    assert list(parts[1].subscriptions["s"].mark_delete_position) == [f"{PARTITIONED}-partition-1"]
    assert parts[1].to_pulsar_json()["partitionIndex"] == 1
    assert "partitionIndex" not in whole.to_pulsar_json()
    _refused(
        seeded,
        lambda: seeded.analysis.topic_stats("admin", f"{PARTITIONED}-partition-3"),
        TopicNotFoundError,
    )
    _refused(
        seeded,
        lambda: seeded.analysis.topic_stats("admin", f"{TOPIC}-partition-0"),
        TopicNotFoundError,
    )


def test_unsubscribe_is_refused_while_a_consumer_is_connected(seeded: Broker) -> None:
    seeded.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED, None, "earliest")
    consumer = seeded.reading.dispatcher("admin", TOPIC, "s").subscribe("worker")
    _refused(
        seeded,
        lambda: unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, "s"),
        SubscriptionBusyError,
    )
    consumer.close()
    unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, "s")
    seeded.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED, None, "earliest")
    seeded.reading.dispatcher("admin", TOPIC, "s").subscribe("worker")
    unsubscribe.delete_subscription(seeded.gated, "admin", TOPIC, "s", force=True)
    assert seeded.admin.list_subscriptions("admin", TOPIC) == []

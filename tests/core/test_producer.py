from __future__ import annotations

from collections.abc import Iterator

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError, TopicNotFoundError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.producer import (
    OutgoingMessage,
    Producer,
    java_string_hash,
    key_partition,
)
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.metadata import MetadataStore, TopicInfo

TOPIC = "persistent://acme/orders/events"
PARTITIONED = "persistent://acme/orders/payments"


@pytest.fixture
def ledger_store(tmp_config: Config) -> Iterator[LedgerStore]:
    with MetadataStore.from_config(tmp_config) as metadata:
        metadata.create_tenant("acme")
        metadata.create_namespace("acme/orders")
        metadata.create_topic(TOPIC, 0)
        metadata.create_topic(PARTITIONED, 3)
        yield LedgerStore(tmp_config.ledger_root, metadata, 100)


def msg(payload: str, **kwargs: object) -> OutgoingMessage:
    return OutgoingMessage(payload.encode(), **kwargs)  # type: ignore[arg-type]


def rows(store: LedgerStore, topic_partition: str) -> list[dict[str, object]]:
    return store.read_table(TopicName.parse(topic_partition)).to_pylist()


def shape(ids: list[MessageId]) -> list[tuple[int, int, int, int]]:
    """(entry, partition, batch_index, batch_size) of each id."""
    return [(i.entry_id, i.partition, i.batch_index, i.batch_size) for i in ids]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # one code point, two UTF-16 units
        ("héllo wörld", 1_628_148_953),
        ("customer-7", -1_581_185_528),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_key_partition_is_sign_safe() -> None:
    # hashCode & Integer.MAX_VALUE, then mod: a negative hash still lands in range.
    assert key_partition("polygenelubricants", 7) == 0
    assert key_partition("hello", 3) == 99162322 % 3
    negative = "customer-7"
    assert java_string_hash(negative) < 0
    assert key_partition(negative, 5) == (java_string_hash(negative) & 0x7FFFFFFF) % 5


def test_non_batched_non_partitioned(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(TOPIC)
    producer = Producer(ledger_store, topic)
    ids = producer.send([msg("a"), msg("b", key="k"), msg("c")], now_ms=1_000)
    ledger_id = ids[0].ledger_id
    assert ids == [MessageId(ledger_id, e) for e in range(3)]
    assert shape(ids) == [(0, -1, -1, 0), (1, -1, -1, 0), (2, -1, -1, 0)]
    stored = rows(ledger_store, TOPIC)
    assert [(r["payload"], r["batch_index"], r["batch_size"], r["partition"]) for r in stored] == [
        (b"a", -1, 0, -1),
        (b"b", -1, 0, -1),
        (b"c", -1, 0, -1),
    ]
    assert {r["publish_time"] for r in stored} == {1_000}
    assert {r["producer_name"] for r in stored} == {"cursorops-producer"}
    assert stored[1]["key"] == "k" and stored[0]["key"] is None


def test_batching(ledger_store: LedgerStore) -> None:
    producer = Producer(ledger_store, ledger_store.metadata.get_topic(TOPIC), batch_size=3)
    ids = producer.send([msg(str(i)) for i in range(7)], now_ms=5)
    assert shape(ids) == [
        (0, -1, 0, 3),
        (0, -1, 1, 3),
        (0, -1, 2, 3),
        (1, -1, 0, 3),
        (1, -1, 1, 3),
        (1, -1, 2, 3),
        # A last batch of one is still a batch.
        (2, -1, 0, 1),
    ]
    stored = rows(ledger_store, TOPIC)
    assert [(r["entry_id"], r["batch_index"], r["batch_size"]) for r in stored] == [
        (i.entry_id, i.batch_index, i.batch_size) for i in ids
    ]
    assert [r["payload"] for r in stored] == [str(i).encode() for i in range(7)]
    index = ledger_store.entry_index(TopicName.parse(TOPIC))
    assert index.batch_size.tolist() == [3, 3, 1]


def test_delayed_messages_are_never_batched(ledger_store: LedgerStore) -> None:
    producer = Producer(ledger_store, ledger_store.metadata.get_topic(TOPIC), batch_size=3)
    messages = [
        msg("a"),
        msg("b"),
        msg("d1", deliver_at=9_000),
        msg("c"),
        msg("d"),
        msg("e"),
        msg("f"),
        msg("d2", deliver_at=0),
    ]
    ids = producer.send(messages, now_ms=100)
    assert shape(ids) == [
        (0, -1, 0, 2),
        (0, -1, 1, 2),
        (1, -1, -1, 0),
        (2, -1, 0, 3),
        (2, -1, 1, 3),
        (2, -1, 2, 3),
        (3, -1, 0, 1),
        (4, -1, -1, 0),
    ]
    index = ledger_store.entry_index(TopicName.parse(TOPIC))
    assert index.deliver_at.tolist() == [-1, 9_000, -1, -1, 0]
    assert index.batch_size.tolist() == [2, 0, 3, 1, 0]


def test_keyed_routing(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(PARTITIONED)
    producer = Producer(ledger_store, topic, batch_size=2)
    keys = ["alpha", "beta", "gamma", "delta", "alpha", "alpha", "epsilon"]
    ids = producer.send([msg(k, key=k) for k in keys], now_ms=1)
    assert [i.partition for i in ids] == [key_partition(k, 3) for k in keys]
    for partition, name in enumerate(topic.partition_names()):
        stored = rows(ledger_store, name)
        assert [r["key"] for r in stored] == [k for k in keys if key_partition(k, 3) == partition]
        assert {r["partition"] for r in stored} <= {partition}
    # The same key always lands on the same partition, whatever else is sent.
    again = producer.send([msg("x"), msg("alpha", key="alpha")], now_ms=2)
    assert again[1].partition == ids[0].partition


def test_round_robin_in_batch_sized_groups(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(PARTITIONED)
    producer = Producer(ledger_store, topic, batch_size=2, start_partition=0)
    ids = producer.send([msg(str(i)) for i in range(7)], now_ms=1)
    assert [i.partition for i in ids] == [0, 0, 1, 1, 2, 2, 0]
    assert [(i.batch_index, i.batch_size) for i in ids] == [
        (0, 2),
        (1, 2),
        (0, 2),
        (1, 2),
        (0, 2),
        (1, 2),
        (0, 1),
    ]
    # The rotation carries over to the next send.
    more = producer.send([msg("7"), msg("8"), msg("9")], now_ms=2)
    assert [i.partition for i in more] == [0, 1, 1]
    assert [r["payload"] for r in rows(ledger_store, f"{PARTITIONED}-partition-0")] == [
        b"0",
        b"1",
        b"6",
        b"7",
    ]
    single = Producer(ledger_store, topic, batch_size=1, start_partition=0)
    assert [i.partition for i in single.send([msg("x")] * 4, now_ms=3)] == [0, 1, 2, 0]


def test_round_robin_starts_where_asked(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(PARTITIONED)
    producer = Producer(ledger_store, topic, batch_size=2, start_partition=2)
    ids = producer.send([msg(str(i)) for i in range(5)], now_ms=1)
    assert [i.partition for i in ids] == [2, 2, 0, 0, 1]
    for bad in (-1, 3, True, "1"):
        with pytest.raises(InvalidArgumentError):
            Producer(ledger_store, topic, start_partition=bad)  # type: ignore[arg-type]


def test_one_shot_producers_spread_over_partitions(ledger_store: LedgerStore) -> None:
    """Pulsar starts each producer's round-robin at a random partition: one message per
    producer (one CLI call each) must not always land on partition 0."""
    topic = ledger_store.metadata.get_topic(PARTITIONED)
    seen = [
        Producer(ledger_store, topic).send([msg("x")], now_ms=1)[0].partition for _ in range(90)
    ]
    counts = [seen.count(p) for p in range(3)]
    # Each count is Binomial(90, 1/3): below 10 has probability < 1e-6.
    assert min(counts) >= 10, counts


def test_ids_follow_input_order_across_partitions(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(PARTITIONED)
    producer = Producer(ledger_store, topic)
    messages = [msg(f"m{i}", key=None if i % 2 else f"k{i}") for i in range(12)]
    ids = producer.send(messages, now_ms=1)
    for message, message_id in zip(messages, ids, strict=True):
        name = topic.partition_names()[message_id.partition]
        [row] = ledger_store.read_entries(TopicName.parse(name), [message_id.position]).to_pylist()
        assert row["payload"] == message.payload


def test_sequence_ids_properties_and_producer_name(ledger_store: LedgerStore) -> None:
    producer = Producer(ledger_store, ledger_store.metadata.get_topic(TOPIC), producer_name="etl")
    producer.send([msg("a"), msg("b", sequence_id=100), msg("c")], now_ms=1)
    producer.send([msg("d", properties={"origin": "eu", "n": "1"})], now_ms=2)
    stored = rows(ledger_store, TOPIC)
    # An explicit sequence id does not move the producer's own counter (Java client).
    assert [r["sequence_id"] for r in stored] == [0, 100, 1, 2]
    assert {r["producer_name"] for r in stored} == {"etl"}
    assert dict(stored[3]["properties"]) == {"origin": "eu", "n": "1"}  # type: ignore[call-overload]
    assert [r["publish_time"] for r in stored] == [1, 1, 1, 2]


def test_validation(ledger_store: LedgerStore) -> None:
    topic = ledger_store.metadata.get_topic(TOPIC)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(InvalidArgumentError, match="batch size"):
            Producer(ledger_store, topic, batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="producer name"):
        Producer(ledger_store, topic, producer_name="")
    producer = Producer(ledger_store, topic, batch_size=2)
    cases: list[tuple[object, str]] = [
        (OutgoingMessage("text"), "payload must be bytes"),  # type: ignore[arg-type]
        (msg("x", deliver_at=-1), "deliver_at must be an integer >= 0"),
        (msg("x", deliver_at=True), "deliver_at"),
        (msg("x", sequence_id=-3), "sequence_id"),
        (msg("x", key=5), "key"),
        (msg("x", properties={"a": 1}), "properties"),
        (b"raw", "expected OutgoingMessage"),
    ]
    for message, text in cases:
        with pytest.raises(InvalidArgumentError, match=text):
            producer.send([msg("ok"), message], now_ms=1)  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="publish time"):
        producer.send([msg("ok")], now_ms=-1)
    # Nothing was written by the refused sends.
    assert rows(ledger_store, TOPIC) == []
    assert producer.send([], now_ms=1) == []


def test_missing_topic(ledger_store: LedgerStore) -> None:
    producer = Producer(ledger_store, TopicInfo("persistent://acme/orders/none", 0))
    with pytest.raises(TopicNotFoundError):
        producer.send([msg("x")], now_ms=1)

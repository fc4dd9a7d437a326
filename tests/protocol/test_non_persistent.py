"""Non-persistent topics with the official client: nothing is stored, a message reaches
the consumers connected when it is sent, and is dropped when there is none."""

from __future__ import annotations

import pulsar
import pytest

from tests.protocol.harness import Standalone, drain, unique

ROLE = "admin"


def _unique(prefix: str) -> str:
    return "non-" + unique(prefix)


def test_only_connected_consumers_receive_and_nothing_is_stored(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = _unique("np")
    producer = client.create_producer(topic, batching_enabled=False)
    # Nobody subscribed: dropped.
    receipt = producer.send(b"before")
    assert (receipt.ledger_id(), receipt.entry_id()) == (0, 0)
    first = client.subscribe(topic, "a")
    second = client.subscribe(topic, "b")
    for i in range(5):
        producer.send(f"m{i}".encode())
    expected = [f"m{i}".encode() for i in range(5)]
    assert [m.data() for m in drain(first, 1000)] == expected
    assert [m.data() for m in drain(second, 1000)] == expected
    first.close()
    # A consumer that comes later gets only what is sent after it joined.
    later = client.subscribe(topic, "a")
    producer.send(b"after")
    assert [m.data() for m in drain(later, 1000)] == [b"after"]
    assert [m.data() for m in drain(second, 1000)] == [b"after"]
    with standalone.broker() as broker:
        assert broker.reading.last_position(ROLE, topic).ledger_id == -1
    for closing in (producer, later, second):
        closing.close()


def test_shared_consumers_split_and_batches_arrive_whole(client: pulsar.Client) -> None:
    topic = _unique("shared")
    consumers = [
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared) for _ in range(2)
    ]
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50
    )
    for i in range(20):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    got = [m.data() for c in consumers for m in drain(c, 1000)]
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(20))
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Exclusive)
    for closing in (producer, *consumers):
        closing.close()


def test_an_exclusive_subscription_and_read_compacted(client: pulsar.Client) -> None:
    topic = _unique("exclusive")
    holder = client.subscribe(topic, "x")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "x")
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "c", is_read_compacted=True)
    holder.close()
    again = client.subscribe(topic, "x")
    again.close()

"""Keys over the wire: event time and ordering keys kept, Key_Shared stickiness."""

from __future__ import annotations

import pulsar
import pytest

from cursorops.cli.output import message_json
from cursorops.rest.results import message_response
from tests.protocol.harness import Standalone, drain, unique

pytestmark = pytest.mark.slow

ROLE = "admin"
KEYS = [f"k{i}" for i in range(12)]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_event_time_and_ordering_key_come_back(
    standalone: Standalone, client: pulsar.Client, batched: bool
) -> None:
    topic = unique("keys")
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=batched, batching_max_messages=4)
    sent = []
    for i in range(8):
        event_time = 1_700_000_000_000 + i if i % 3 else None
        ordering_key = f"order-{i % 2}" if i % 4 != 3 else None
        sent.append((f"m{i}".encode(), event_time, ordering_key))
        producer.send_async(
            f"m{i}".encode(),
            None,
            event_timestamp=event_time,
            ordering_key=ordering_key,
            partition_key=f"k{i}",
        )
    producer.flush()
    got = drain(consumer)
    assert [(m.data(), m.event_timestamp() or None, m.ordering_key() or None) for m in got] == sent
    assert [m.partition_key() for m in got] == [f"k{i}" for i in range(8)]

    with standalone.broker() as broker:
        peeked = broker.reading.peek_messages(ROLE, topic, "s", 8)
    assert [(m.payload, m.event_time, m.ordering_key) for m in peeked] == [
        (payload, event_time, ordering_key.encode() if ordering_key else None)
        for payload, event_time, ordering_key in sent
    ]
    first = peeked[1]
    assert message_json(first)["eventTime"] == 1_700_000_000_001
    assert message_json(first)["orderingKey"] == "b3JkZXItMQ=="  # base64 of order-1
    headers = message_response(first).headers
    assert headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.001+00:00"
    assert headers["X-Pulsar-ordering-key"] == "order-1"
    assert "eventTime" not in message_json(peeked[0])
    consumer.close()


def _owners(
    got: dict[str, list[pulsar.Message]],
) -> dict[str, str]:
    """Each key's consumer; fails when a key went to two."""
    owners: dict[str, str] = {}
    for name, messages in got.items():
        for message in messages:
            key = message.partition_key()
            assert owners.setdefault(key, name) == name, f"{key} went to two consumers"
    return owners


def _send_round(producer: pulsar.Producer, round_number: int) -> None:
    for i in range(len(KEYS) * 3):
        producer.send_async(f"r{round_number}-{i}".encode(), None, partition_key=KEYS[i % 12])
    producer.flush()


def test_key_shared_keys_stay_on_their_consumer_then_move_when_it_leaves(
    client: pulsar.Client,
) -> None:
    topic = unique("sticky")
    a, b = (
        client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name
        )
        for name in ("a", "b")
    )
    producer = client.create_producer(topic, batching_enabled=False)

    owners = {}
    for round_number in range(2):
        _send_round(producer, round_number)
        got = {"a": drain(a), "b": drain(b)}
        for name, consumer in (("a", a), ("b", b)):
            for message in got[name]:
                consumer.acknowledge(message)
        assert sum(len(m) for m in got.values()) == len(KEYS) * 3
        now = _owners(got)
        assert set(now) == set(KEYS)
        assert set(now.values()) == {"a", "b"}, "both consumers get keys"
        if round_number:
            assert now == owners, "while both are connected, each key stays where it was"
        owners = now

    # b holds its messages unacknowledged, then leaves: its keys, and what it held, move to a.
    _send_round(producer, 2)
    held = drain(b)
    assert held and {m.partition_key() for m in held} == {
        k for k, name in owners.items() if name == "b"
    }
    b.close()
    got_a = drain(a)
    assert {m.partition_key() for m in got_a} == set(KEYS)
    assert {m.data() for m in held} <= {m.data() for m in got_a}
    assert len({m.data() for m in got_a}) == len(KEYS) * 3
    for message in got_a:
        a.acknowledge(message)
    _send_round(producer, 3)
    assert len(drain(a)) == len(KEYS) * 3
    a.close()


def test_key_shared_routes_by_the_ordering_key(client: pulsar.Client) -> None:
    """Pulsar's sticky key is the ordering key when a message has one, its key otherwise."""
    topic = unique("ordering")
    a, b = (
        client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name
        )
        for name in ("a", "b")
    )
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(96):
        producer.send_async(f"m{i}".encode(), None, partition_key="same", ordering_key=f"o{i % 24}")
    producer.flush()
    got = {"a": drain(a), "b": drain(b)}
    assert sum(len(m) for m in got.values()) == 96
    owners: dict[str, str] = {}
    for name, messages in got.items():
        for message in messages:
            key = message.ordering_key()
            assert owners.setdefault(key, name) == name, f"{key} went to two consumers"
    assert set(owners.values()) == {"a", "b"}, "ordering keys spread though the key is one"
    a.close()
    b.close()

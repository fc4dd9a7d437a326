"""The consumer registry and pending-ack set, in one process with a settable clock.

The state lives in the metadata store, so consumers of one Broker behave as
consumers of separate processes (``test_dispatch_processes.py`` runs those);
here time is controlled, so leases expire without sleeping.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict

import pytest

from cursorops.core.domain.delivery.key_hash import HashRing, sticky_key_hash
from cursorops.core.domain.errors import ConflictError, ConsumerBusyError, InvalidArgumentError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/consumers"
LEASE_MS = 30_000


def setup(broker: Broker, kind: SubscriptionType, partitions: int = 0) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=partitions)
    broker.admin.create_subscription("admin", TOPIC, "s", kind, initial_position="earliest")


def payloads(messages: list[Message]) -> list[bytes]:
    return [m.payload for m in messages]


def subscribe(broker: Broker, name: str, queue: int = 1, priority: int = 0) -> Consumer:
    return broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        name, receiver_queue_size=queue, priority=priority
    )


def test_consumer_busy_is_a_conflict() -> None:
    assert issubclass(ConsumerBusyError, ConflictError)


def test_exclusive_refuses_a_second_consumer_until_the_lease_expires(
    broker: Broker, clock: Clock
) -> None:
    setup(broker, SubscriptionType.EXCLUSIVE)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(3)])
    first = subscribe(broker, "a")
    assert payloads(first.receive_many(2)) == [b"m0", b"m1"]
    with pytest.raises(ConsumerBusyError, match="^Exclusive consumer is already connected$"):
        subscribe(broker, "b")
    with pytest.raises(ConsumerBusyError):
        broker.reading.consume("admin", TOPIC, "s", 1)
    clock.advance(LEASE_MS - 1)
    with pytest.raises(ConsumerBusyError):
        subscribe(broker, "b")
    clock.advance(1)
    second = subscribe(broker, "b")
    got = second.receive_many(10)
    # The lapsed lease is no redelivery request: the counts are unchanged.
    assert [(m.payload, m.redelivery_count) for m in got] == [(b"m0", 0), (b"m1", 0), (b"m2", 0)]
    # The first consumer lost the subscription: it cannot come back while b holds it.
    with pytest.raises(ConsumerBusyError):
        first.receive_many(1)


def test_every_call_renews_the_lease(broker: Broker, clock: Clock) -> None:
    setup(broker, SubscriptionType.EXCLUSIVE)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(5)])
    first = subscribe(broker, "a")
    for _ in range(4):
        clock.advance(LEASE_MS - 1)
        first.acknowledge(first.receive_many(1))
    with pytest.raises(ConsumerBusyError):
        subscribe(broker, "b")


def test_shared_lease_expiry_redelivers_to_another_consumer(broker: Broker, clock: Clock) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(6)])
    a = subscribe(broker, "a")
    b = subscribe(broker, "b")
    held = a.receive_many(2)
    assert payloads(held) == [b"m0", b"m1"]
    assert payloads(b.receive_many(10)) == [b"m2", b"m3", b"m4", b"m5"]
    clock.advance(LEASE_MS // 2)
    assert b.receive_many(10) == []
    clock.advance(LEASE_MS // 2)
    again = b.receive_many(10)
    assert [(m.payload, m.redelivery_count) for m in again] == [(b"m0", 0), (b"m1", 0)]
    # a's late acknowledgement still counts (acknowledgements are never lost), and
    # it ends the pending state of m0 and m1 at b too.
    a.acknowledge(held)
    b.close()
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"m2", b"m3", b"m4", b"m5"]


def test_failover_activates_the_highest_priority_level_only(broker: Broker) -> None:
    setup(broker, SubscriptionType.FAILOVER, partitions=4)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(40)])
    late = subscribe(broker, "a-name-first", priority=1, queue=100)
    zed = subscribe(broker, "zed", queue=100)
    bob = subscribe(broker, "bob", queue=100)
    parts = {
        name: {m.message_id.partition for m in c.receive_many(100)}
        for name, c in (("bob", bob), ("zed", zed), ("late", late))
    }
    # Active: bob and zed (priority 0), sorted by name; a-name-first (priority 1) waits.
    assert parts == {"bob": {0, 2}, "zed": {1, 3}, "late": set()}
    # Once the priority-0 level is gone, the lower level takes over every partition.
    bob.close()
    zed.close()
    assert {m.message_id.partition for m in late.receive_many(100)} == {0, 1, 2, 3}


def test_cumulative_ack_drops_pending_through_the_message(broker: Broker) -> None:
    setup(broker, SubscriptionType.FAILOVER)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(5)])
    consumer = subscribe(broker, "c", queue=10)
    got = consumer.receive_many(3)
    consumer.acknowledge_cumulative(got[1])
    consumer.close()
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"m2", b"m3", b"m4"]


def test_cumulative_ack_is_refused_on_shared(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x")])
    consumer = subscribe(broker, "c")
    with pytest.raises(ConflictError, match="Cumulative acknowledgement is not supported"):
        consumer.acknowledge_cumulative(consumer.receive_many(1)[0])


def test_acknowledging_a_foreign_message_is_refused_and_changes_nothing(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x")])
    consumer = subscribe(broker, "c")
    message = consumer.receive_many(1)[0]
    foreign = Message(
        message.message_id, "persistent://acme/ops/other", b"x", None, {}, 0, None, "p", 0
    )
    with pytest.raises(InvalidArgumentError, match="is not from this subscription"):
        consumer.acknowledge(foreign)
    consumer.close()
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"x"]


# -- Key_Shared: per-key order against a plain model ------------------------


@pytest.mark.parametrize("seed", range(4))
def test_key_shared_keeps_per_key_order_as_consumers_join_and_leave(
    broker: Broker, seed: int
) -> None:
    """Random joins, receives, acks and closes; check every delivery against a model.

    Model: for each key, the messages in publish order. A delivery of message
    ``i`` of key K to consumer C is allowed only when every earlier message of
    K is acknowledged or pending at C itself, and ``i`` is not pending anywhere.
    """
    rng = random.Random(seed)
    setup(broker, SubscriptionType.KEY_SHARED)
    keys = [f"key-{k}" for k in range(8)]
    published: dict[str, list[bytes]] = defaultdict(list)
    acked: set[bytes] = set()
    pending: dict[bytes, str] = {}
    consumers: dict[str, Consumer] = {}
    held: dict[str, list[Message]] = defaultdict(list)
    serial = 0
    for step in range(60):
        action = rng.choice(["produce", "join", "receive", "receive", "ack", "close"])
        if action == "produce" or not published:
            batch = []
            for _ in range(rng.randint(1, 10)):
                key = rng.choice(keys)
                payload = f"{key}/{serial}".encode()
                serial += 1
                published[key].append(payload)
                batch.append(OutgoingMessage(payload, key=key))
            broker.producing.produce("admin", TOPIC, batch)
        elif action == "join" and len(consumers) < 4:
            name = f"c{step}"
            consumers[name] = subscribe(broker, name, queue=rng.randint(1, 4))
        elif action == "receive" and consumers:
            name = rng.choice(sorted(consumers))
            for message in consumers[name].receive_many(rng.randint(1, 6)):
                key = message.key
                assert key is not None
                order = published[key]
                index = order.index(message.payload)
                assert message.payload not in acked and message.payload not in pending
                for earlier in order[:index]:
                    assert earlier in acked or pending.get(earlier) == name, (
                        f"{message.payload!r} to {name} before {earlier!r} was acknowledged"
                    )
                pending[message.payload] = name
                held[name].append(message)
        elif action == "ack" and held:
            name = rng.choice(sorted(held))
            count = rng.randint(1, max(1, len(held[name])))
            done, held[name] = held[name][:count], held[name][count:]
            if done:
                consumers[name].acknowledge(done)
                for message in done:
                    acked.add(message.payload)
                    del pending[message.payload]
        elif action == "close" and consumers:
            name = rng.choice(sorted(consumers))
            consumers.pop(name).close()
            for message in held.pop(name, []):
                del pending[message.payload]
            # What the client had prefetched but not handed out is released too.
            for payload in [p for p, owner in pending.items() if owner == name]:
                del pending[payload]
    for consumer in consumers.values():
        consumer.close()
    # Nothing lost: everything not acknowledged is still there, once each.
    rest = broker.reading.consume("admin", TOPIC, "s", 10_000, ack=True)
    everything = {p for order in published.values() for p in order}
    assert sorted(payloads(rest)) == sorted(everything - acked)


def test_a_message_acknowledged_by_a_skip_stops_blocking_its_key(broker: Broker) -> None:
    setup(broker, SubscriptionType.KEY_SHARED)
    keys = [f"k{i}" for i in range(20)]
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"{k}/0".encode(), key=k) for k in keys]
    )
    a = subscribe(broker, "a", queue=100)
    first = {m.key: m for m in a.receive_many(100)}
    b = subscribe(broker, "b")
    ring = HashRing([a.consumer_id, b.consumer_id])
    moved = [k for k in keys if ring.select(sticky_key_hash(k)) == b.consumer_id]
    assert moved
    key = moved[0]
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"{key}/1".encode(), key=key)])
    assert b.receive_many(10) == []
    mid = first[key].message_id
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [mid])
    assert payloads(b.receive_many(10)) == [f"{key}/1".encode()]


# -- lazy reads -----------------------------------------------------------


def test_consume_and_peek_of_one_message_read_only_the_first_segment(broker: Broker) -> None:
    """Later segments are made unreadable: reading one message must not touch them."""
    setup(broker, SubscriptionType.SHARED)
    for chunk in range(5):
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"c{chunk}-{i}".encode()) for i in range(50)]
        )
    segments = broker.metadata.segments(TOPIC)
    assert len(segments) == 5
    for segment in segments[1:]:
        os.remove(os.path.join(broker.ledgers.root, segment.path))
    assert payloads(broker.reading.peek_messages("admin", TOPIC, "s", 1)) == [b"c0-0"]
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 1, ack=True)) == [b"c0-0"]
    assert payloads(broker.reading.peek_messages("admin", TOPIC, "s", 1)) == [b"c0-1"]


def test_key_shared_spreads_keyless_messages_by_producer_and_sequence(broker: Broker) -> None:
    """Pulsar 4: a message without a key hashes as ``producer-sequence`` of its entry, so
    keyless messages spread over the consumers, and a batch stays with one consumer."""
    setup(broker, SubscriptionType.KEY_SHARED)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(200)], batch_size=5
    )
    a = subscribe(broker, "a", queue=1000)
    b = subscribe(broker, "b", queue=1000)
    got_a, got_b = a.receive_many(1000), b.receive_many(1000)
    assert len(got_a) + len(got_b) == 200
    assert got_a and got_b
    entries_a = {m.message_id.position for m in got_a}
    assert not entries_a & {m.message_id.position for m in got_b}

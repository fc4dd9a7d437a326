"""The read position: a dispatch reads on from it, and anything that makes a message
deliverable again (release, cursor reset) brings reading back to that message.

Segments behind the read position are made unreadable where the point is that a
dispatch must not touch them: the old dispatcher re-read from mark-delete on
every call and fails there.
"""

from __future__ import annotations

import os

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/read-position"


def setup(broker: Broker, kind: SubscriptionType = SubscriptionType.SHARED) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription("admin", TOPIC, "s", kind, initial_position="earliest")
    for chunk in range(4):
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"c{chunk}-{i}".encode()) for i in range(10)]
        )


def payloads(messages: list[Message]) -> list[bytes]:
    return [m.payload for m in messages]


def unreadable(broker: Broker, count: int) -> None:
    """Remove the first ``count`` segment files of the topic."""
    for segment in broker.metadata.segments(TOPIC)[:count]:
        os.remove(os.path.join(broker.ledgers.root, segment.path))


def test_a_dispatch_reads_on_from_what_is_held_not_from_mark_delete(broker: Broker) -> None:
    setup(broker)
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("a", receiver_queue_size=10)
    held = consumer.receive_many(20)
    assert payloads(held) == [f"c{c}-{i}".encode() for c in range(2) for i in range(10)]
    # Nothing is acknowledged: mark-delete is still before the first message.
    unreadable(broker, 2)
    other = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("b", receiver_queue_size=10)
    # a has also prefetched c2 (flow permits): b gets c3.
    assert payloads(other.receive_many(10)) == [f"c3-{i}".encode() for i in range(10)]


def test_a_released_message_is_read_again_first(broker: Broker) -> None:
    setup(broker)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    a = dispatcher.subscribe("a", receiver_queue_size=5)
    first = a.receive_many(15)
    a.negative_acknowledge(first[3])
    b = dispatcher.subscribe("b", receiver_queue_size=5)
    got = b.receive_many(3)
    assert payloads(got)[0] == b"c0-3" and got[0].redelivery_count == 1
    # Then the first messages nobody holds (a has prefetched past what it received).
    assert not set(payloads(got[1:])) & set(payloads(first))
    assert all(m.redelivery_count == 0 for m in got[1:])


def test_lease_expiry_brings_reading_back(broker: Broker, clock: Clock) -> None:
    setup(broker)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    a = dispatcher.subscribe("a", receiver_queue_size=10)
    assert len(a.receive_many(40)) == 40
    clock.advance(broker.config.consumer_lease_ms)
    b = dispatcher.subscribe("b", receiver_queue_size=100)
    got = b.receive_many(100)
    assert payloads(got) == [f"c{c}-{i}".encode() for c in range(4) for i in range(10)]
    # A lapsed lease releases them uncounted: nobody asked for them again.
    assert all(m.redelivery_count == 0 for m in got)


def test_a_cursor_reset_voids_the_read_position(broker: Broker) -> None:
    setup(broker)
    assert len(broker.reading.consume("admin", TOPIC, "s", 25, ack=True)) == 25
    reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=Position(-1, -1))
    got = broker.reading.consume("admin", TOPIC, "s", 3)
    assert payloads(got) == [b"c0-0", b"c0-1", b"c0-2"]


def test_a_reset_folded_into_a_snapshot_voids_the_read_position(broker: Broker) -> None:
    """A compaction hides the resetting delta: the position recorded before it no longer counts."""
    setup(broker)
    assert len(broker.reading.consume("admin", TOPIC, "s", 25, ack=True)) == 25
    reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=Position(-1, -1))
    record = broker.metadata.load_cursor(TOPIC, "s")
    state = broker.context.cursor_state(TOPIC, "s")
    broker.metadata.compact_cursor(TOPIC, "s", cursor_codec.encode(state), record.version)
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 2)) == [b"c0-0", b"c0-1"]


def test_delayed_message_keeps_the_read_position_before_it(broker: Broker, clock: Clock) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + 1_000)]
    )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(3)])
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("a", receiver_queue_size=10)
    assert payloads(consumer.receive_many(10)) == [b"m0", b"m1", b"m2"]
    clock.advance(1_000)
    assert payloads(consumer.receive_many(10)) == [b"later"]

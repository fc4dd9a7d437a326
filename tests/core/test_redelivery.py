"""Redelivery counted as Pulsar counts it (:mod:`cursorops.core.domain.delivery.redelivery`).

A negative acknowledgement and a redeliver request bump a message's redelivery count; a
consumer's close, the lapse of its lease, a Failover take-over and the release of a gone
process's consumers leave it as it is. What a consumer receives, what peek-messages shows
and what the radar reads are the same stored number.
"""

from __future__ import annotations

import pytest

from cursorops.core.domain.analysis.poison_radar import RadarLimits
from cursorops.core.domain.delivery.redelivery import Release
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer, Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/redelivery"


def setup(broker: Broker, kind: SubscriptionType = SubscriptionType.SHARED) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription("admin", TOPIC, "s", kind, initial_position="earliest")
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(3)])


def subscribe(broker: Broker, name: str, priority: int = 0) -> Consumer:
    return broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        name, receiver_queue_size=1, priority=priority
    )


def counts(messages: list[Message]) -> list[tuple[bytes, int]]:
    return [(m.payload, m.redelivery_count) for m in messages]


def stored(broker: Broker) -> list[int]:
    """The stored counts of the pending messages, as the radar reads them."""
    members = broker.metadata.pending_members(TOPIC, "s").get(TOPIC)
    return [] if members is None else sorted(members.redelivery.tolist())


def test_only_a_consumer_asking_again_counts() -> None:
    assert {r for r in Release if r.counts} == {Release.NEGATIVE_ACK, Release.REDELIVER}


def test_a_close_does_not_count(broker: Broker) -> None:
    setup(broker)
    for _ in range(3):
        consumer = subscribe(broker, "a")
        assert counts(consumer.receive_many(1)) == [(b"m0", 0)]
        consumer.close()
    assert stored(broker) == [0]
    assert counts(broker.reading.peek_messages("admin", TOPIC, "s", 1)) == [(b"m0", 0)]


def test_a_lapsed_lease_does_not_count(broker: Broker, clock: Clock) -> None:
    setup(broker)
    subscribe(broker, "a").receive_many(2)
    clock.advance(broker.config.consumer_lease_ms)
    assert counts(subscribe(broker, "b").receive_many(2)) == [(b"m0", 0), (b"m1", 0)]


def test_a_gone_process_does_not_count(broker: Broker) -> None:
    setup(broker)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    dispatcher.subscribe("a", receiver_queue_size=1, consumer_id="dead1/a").receive_many(2)
    assert broker.reading.release_consumers_of("dead1/") == 1
    assert stored(broker) == [0, 0]
    assert counts(subscribe(broker, "b").receive_many(2)) == [(b"m0", 0), (b"m1", 0)]


def test_a_failover_take_over_does_not_count(broker: Broker) -> None:
    setup(broker, SubscriptionType.FAILOVER)
    low = subscribe(broker, "z", priority=1)
    assert counts(low.receive_many(2)) == [(b"m0", 0), (b"m1", 0)]
    # A consumer of a higher priority level joins: the partition passes to it.
    high = subscribe(broker, "a", priority=0)
    assert counts(high.receive_many(3)) == [(b"m0", 0), (b"m1", 0), (b"m2", 0)]


def test_a_negative_ack_counts_each_time(broker: Broker) -> None:
    setup(broker)
    consumer = subscribe(broker, "a")
    for expected in range(3):
        (message,) = consumer.receive_many(1)
        assert counts([message]) == [(b"m0", expected)]
        consumer.negative_acknowledge(message)
    assert stored(broker) == [3]
    # Peeked, received and read by the radar: the same number.
    assert counts(broker.reading.peek_messages("admin", TOPIC, "s", 2)) == [(b"m0", 3), (b"m1", 0)]
    (radar,) = broker.analysis.poison_radar("admin", TOPIC, "s", RadarLimits(3, None, 10))
    assert [(m.triplet, m.redelivery_count) for m in radar.result.listed] == [
        (message.message_id.triplet(), 3)
    ]
    assert counts(consumer.receive_many(1)) == [(b"m0", 3)]


@pytest.mark.parametrize("kind", [SubscriptionType.SHARED, SubscriptionType.FAILOVER])
def test_a_redeliver_request_counts(broker: Broker, kind: SubscriptionType) -> None:
    setup(broker, kind)
    consumer = subscribe(broker, "a")
    assert counts(consumer.receive_many(2)) == [(b"m0", 0), (b"m1", 0)]
    consumer.redeliver_unacknowledged_messages()
    assert counts(consumer.receive_many(3)) == [(b"m0", 1), (b"m1", 1), (b"m2", 0)]
    # Then its close: nothing more.
    consumer.close()
    assert counts(subscribe(broker, "b").receive_many(3)) == [(b"m0", 1), (b"m1", 1), (b"m2", 0)]

"""The read path: order, acknowledged never delivered, delayed delivery, redelivery, epoch."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import ConflictError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from .conftest import Clock

TOPIC = "persistent://acme/ops/reads"


def setup(broker: Broker, kind: SubscriptionType, partitions: int = 0) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=partitions)
    broker.admin.create_subscription("admin", TOPIC, "s", kind, initial_position="earliest")


def payloads(messages) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [m.payload for m in messages]


@pytest.fixture(params=["sqlite"])
def metadata_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """The read path does not depend on the metadata backend: SQLite is enough here."""
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def test_messages_arrive_in_order_and_acked_indexes_never_come(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    ids = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(12)], batch_size=4
    )
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[i] for i in (1, 5, 6)])
    got = payloads(broker.reading.consume("admin", TOPIC, "s", 100))
    assert got == [f"m{i}".encode() for i in range(12) if i not in (1, 5, 6)]


def test_unacknowledged_messages_are_redelivered_to_the_next_consumer(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(5)])
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 2, ack=True)) == [b"m0", b"m1"]
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 2)) == [b"m2", b"m3"]
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"m2", b"m3", b"m4"]


def test_delayed_messages_wait_on_shared(broker: Broker, clock: Clock) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + 60_000)]
    )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"now")])
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"now"]
    clock.advance(60_000)
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"later", b"now"]


@pytest.mark.parametrize("kind", [SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER])
def test_exclusive_and_failover_deliver_delayed_at_once(
    broker: Broker, clock: Clock, kind: SubscriptionType
) -> None:
    setup(broker, kind)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + 60_000)]
    )
    assert payloads(broker.reading.consume("admin", TOPIC, "s", 10)) == [b"later"]


def test_shared_consumers_never_share_a_pending_message(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED, partitions=3)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(30)], batch_size=3
    )
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    a = dispatcher.subscribe("a", receiver_queue_size=4)
    b = dispatcher.subscribe("b", receiver_queue_size=4)
    seen_a = payloads(a.receive_many(10))
    seen_b = payloads(b.receive_many(30))
    assert len(seen_a) == 10
    assert not set(seen_a) & set(seen_b)
    # What a has prefetched stays pending on a; closing a hands everything it held to b.
    a.close()
    again = payloads(b.receive_many(30))
    everything = {f"m{i}".encode() for i in range(30)}
    assert set(again) == everything - set(seen_b)
    assert set(seen_a) <= set(again)


def test_negative_ack_redelivers_with_a_count(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x"), OutgoingMessage(b"y")])
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c", receiver_queue_size=1)
    first = consumer.receive()
    assert first is not None and first.redelivery_count == 0
    consumer.negative_acknowledge(first)
    consumer.acknowledge(consumer.receive())  # y, or x again: whichever comes
    rest = consumer.receive_many(10)
    redelivered = [m for m in rest if m.payload == b"x"]
    assert all(m.redelivery_count >= 1 for m in redelivered)


def test_consumer_epoch_drops_stale_messages_after_redeliver(broker: Broker) -> None:
    """PIP-84: after redeliver, nothing newer than the first unacknowledged message comes first."""
    setup(broker, SubscriptionType.FAILOVER)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(20)])
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c", receiver_queue_size=4)
    got = consumer.receive_many(3)
    assert payloads(got) == [b"m0", b"m1", b"m2"]
    consumer.acknowledge(got[0])
    # Messages read for epoch 0 are on their way to the client.
    assert consumer.wire and all(m.consumer_epoch == 0 for m in consumer.wire)
    consumer.redeliver_unacknowledged_messages()
    assert consumer.epoch == 1
    after = consumer.receive_many(5)
    assert payloads(after) == [b"m1", b"m2", b"m3", b"m4", b"m5"]
    assert all(m.consumer_epoch == 1 for m in after)
    consumer.acknowledge_cumulative(after[-1])
    assert payloads(consumer.receive_many(1)) == [b"m6"]


def test_shared_has_no_epoch_and_refuses_cumulative_ack(broker: Broker) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x")])
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
    message = consumer.receive()
    assert message is not None and message.consumer_epoch == -1
    with pytest.raises(ConflictError, match="Cumulative acknowledgement"):
        consumer.acknowledge_cumulative(message)


def test_key_shared_keeps_a_key_on_one_consumer(broker: Broker) -> None:
    setup(broker, SubscriptionType.KEY_SHARED)
    keys = ["alpha", "beta", "gamma", "delta", "epsilon"]
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"{k}{i}".encode(), key=k) for i in range(4) for k in keys]
    )
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    a, b = dispatcher.subscribe("a"), dispatcher.subscribe("b")
    keys_a = {m.key for m in a.receive_many(100)}
    keys_b = {m.key for m in b.receive_many(100)}
    assert keys_a | keys_b == set(keys)
    assert not keys_a & keys_b


def test_failover_serves_only_the_active_consumer(broker: Broker) -> None:
    setup(broker, SubscriptionType.FAILOVER)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"x")])
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    standby = dispatcher.subscribe("b")
    active = dispatcher.subscribe("a")
    assert standby.receive() is None
    assert payloads(active.receive_many(5)) == [b"x"]


def test_exclusive_allows_one_consumer(broker: Broker) -> None:
    setup(broker, SubscriptionType.EXCLUSIVE)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    dispatcher.subscribe("a")
    with pytest.raises(ConflictError, match="Exclusive consumer"):
        dispatcher.subscribe("b")


def test_peek_shows_delayed_and_changes_nothing(broker: Broker, clock: Clock) -> None:
    setup(broker, SubscriptionType.SHARED)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"later", deliver_at=clock() + 60_000)]
    )
    assert payloads(broker.reading.peek_messages("admin", TOPIC, "s", 5)) == [b"later"]
    assert payloads(broker.reading.peek_messages("admin", TOPIC, "s", 5)) == [b"later"]

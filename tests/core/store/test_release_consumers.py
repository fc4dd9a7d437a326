"""Releasing the consumers one process registered (by their id's prefix), on both engines."""

from __future__ import annotations

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/held"


def test_release_takes_the_prefix_s_consumers_and_frees_what_they_held(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(6)])
    for name in ("s", "t"):
        broker.admin.create_subscription(
            "admin", TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
        )
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    dead = dispatcher.subscribe("c", consumer_id="dead1/1-a/0/c")
    live = dispatcher.subscribe("c", consumer_id="live2/1-b/0/c")
    other = broker.reading.dispatcher("admin", TOPIC, "t").subscribe(
        "c", consumer_id="dead1/2-c/0/c"
    )
    for consumer in (dead, live, other):
        consumer.dispatcher.flow(consumer, 2)
    pending_before = broker.metadata.pending_members(TOPIC, "s")

    assert broker.reading.release_consumers_of("dead1/") == 2
    assert broker.reading.release_consumers_of("dead1/") == 0

    with broker.metadata.subscription_transaction(TOPIC, "s", broker.clock()) as txn:
        assert [c.consumer_id for c in txn.consumers()] == ["live2/1-b/0/c"]
        holders = {p.consumer_id for p in txn.pending().values()}
    # The dead consumer's messages are released (no holder), the live one keeps its own.
    assert holders == {"live2/1-b/0/c", None}
    after = broker.metadata.pending_members(TOPIC, "s")
    assert sum(len(m) for m in after.values()) == sum(len(m) for m in pending_before.values())
    with broker.metadata.subscription_transaction(TOPIC, "t", broker.clock()) as txn:
        assert txn.consumers() == []

"""Key_Shared sticky hash ranges: validation, ownership, and a dispatcher honouring them."""

from __future__ import annotations

import pytest

from cursorops.core.domain.delivery.key_hash import (
    in_ranges,
    overlap,
    sticky_key_hash,
    sticky_ranges,
)
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/sticky"


@pytest.mark.parametrize(
    "ranges",
    [[], [(0, 65_536)], [(-1, 5)], [(10, 5)], [(0, 100), (50, 150)], [(0, 10), (10, 20)]],
)
def test_invalid_ranges_are_refused(ranges: list[tuple[int, int]]) -> None:
    with pytest.raises(InvalidArgumentError):
        sticky_ranges(ranges)


def test_ranges_are_inclusive_and_sorted() -> None:
    ranges = sticky_ranges([(100, 200), (0, 9)])
    assert ranges == ((0, 9), (100, 200))
    assert [h for h in (0, 9, 10, 99, 100, 200, 201) if in_ranges(h, ranges)] == [0, 9, 100, 200]
    assert overlap(ranges, ((200, 300),)) == (100, 200)
    assert overlap(ranges, ((201, 300), (10, 99))) is None


def test_a_sticky_consumer_gets_only_its_hashes(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=0)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.KEY_SHARED, initial_position="earliest"
    )
    keys = [f"k{i}" for i in range(30)]
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(k.encode(), key=k) for k in keys])
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "low", hash_ranges=sticky_ranges([(0, 32_767)])
    )
    got = {m.key for m in consumer.receive_many(100)}
    assert got == {k for k in keys if sticky_key_hash(k) <= 32_767} and got

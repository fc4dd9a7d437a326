"""Key_Shared in sticky mode: each consumer gets exactly the hashes of its ranges."""

from __future__ import annotations

import pulsar
import pytest

from cursorops.core.domain.delivery.key_hash import sticky_key_hash
from cursorops.wire.commands import CommandType, SubType
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, drain, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

KEYS = [f"key-{i}" for i in range(40)]
LOW = (0, 30_000)
HIGH = (30_001, 65_535)


def _sticky(
    client: pulsar.Client, topic: str, name: str, *ranges: tuple[int, int]
) -> pulsar.Consumer:
    return client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.KeyShared,
        consumer_name=name,
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges)
        ),
    )


def _keys(messages: list[pulsar.Message]) -> set[str]:
    return {m.partition_key() for m in messages}


def test_sticky_ranges_decide_who_gets_each_key_and_an_uncovered_hash_waits(
    client: pulsar.Client,
) -> None:
    topic = unique("sticky")
    low = _sticky(client, topic, "low", LOW)
    producer = client.create_producer(topic, batching_enabled=False)
    for key in KEYS:
        producer.send(key.encode(), partition_key=key)
    in_low = {k for k in KEYS if sticky_key_hash(k) <= LOW[1]}
    assert in_low and in_low != set(KEYS)
    got_low = drain(low, 1000)
    assert _keys(got_low) == in_low and len(got_low) == len(in_low)
    high = _sticky(client, topic, "high", HIGH)
    got_high = drain(high, 1500)
    assert _keys(got_high) == set(KEYS) - in_low and len(got_high) == len(KEYS) - len(in_low)
    low.close()
    high.close()


def test_an_overlapping_range_and_an_auto_split_consumer_are_refused(
    client: pulsar.Client,
) -> None:
    topic = unique("sticky")
    first = _sticky(client, topic, "first", (0, 1000), (5000, 6000))
    with pytest.raises(pulsar.ConsumerAssignError):
        _sticky(client, topic, "clash", (900, 2000))
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="auto"
        )
    # The refused ones left no trace: a disjoint range still joins.
    _sticky(client, topic, "next", (1001, 4999)).close()
    first.close()


def test_a_range_outside_the_hash_space_is_refused_on_the_wire(standalone: Standalone) -> None:
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.send(
            command(
                CommandType.SUBSCRIBE,
                topic=unique("sticky"),
                subscription="s",
                subType=int(SubType.Key_Shared),
                consumer_id=1,
                request_id=5,
                keySharedMeta={"keySharedMode": 1, "hashRanges": [{"start": 10, "end": 70_000}]},
            )
        )
        error = raw.expect(CommandType.ERROR)
        assert error["request_id"] == 5 and "70000" in error["message"]
        raw.send(command(CommandType.PING))
        raw.expect(CommandType.PONG)

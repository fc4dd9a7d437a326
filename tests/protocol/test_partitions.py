"""Partitions as topics of their own, as in Pulsar: a reader of a partitioned topic reads
every partition, and a producer or consumer may name one partition."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from tests.protocol.harness import Standalone, drain

pytestmark = pytest.mark.slow

ROLE = "admin"


def _partitioned(standalone: Standalone, partitions: int = 3) -> str:
    topic = f"persistent://public/default/parts-{uuid.uuid4().hex[:8]}"
    with standalone.broker() as broker:
        broker.admin.create_topic(ROLE, topic, partitions)
    return topic


def test_a_reader_of_a_partitioned_topic_reads_every_partition_and_seeks(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = _partitioned(standalone)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(9):
        producer.send(f"m-{i}".encode(), partition_key=f"k{i}")
        time.sleep(0.003)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000))
    assert sorted(m.data() for m in got) == [f"m-{i}".encode() for i in range(9)]
    assert len({m.topic_name() for m in got}) == 3
    middle = sorted(m.publish_timestamp() for m in got)[5]
    reader.seek(middle)
    again = []
    while reader.has_message_available():
        again.append(reader.read_next(5000).data())
    assert sorted(again) == sorted(m.data() for m in got if m.publish_timestamp() >= middle)
    reader.close()
    with standalone.broker() as broker:
        assert broker.admin.list_subscriptions(ROLE, topic) == []


def test_a_producer_and_a_consumer_may_name_one_partition(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = _partitioned(standalone)
    whole = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
    one = client.subscribe(
        f"{topic}-partition-1", "one", initial_position=pulsar.InitialPosition.Earliest
    )
    producer = client.create_producer(f"{topic}-partition-1", batching_enabled=False)
    for i in range(4):
        producer.send(f"p1-{i}".encode())
    client.create_producer(f"{topic}-partition-2").send(b"p2")
    got = drain(one, 1000)
    assert [m.data() for m in got] == [f"p1-{i}".encode() for i in range(4)]
    assert {m.topic_name() for m in got} == {f"{topic}-partition-1"}
    assert sorted(m.data() for m in drain(whole, 1000)) == [
        b"p1-0",
        b"p1-1",
        b"p1-2",
        b"p1-3",
        b"p2",
    ]
    with pytest.raises(pulsar.PulsarException):
        client.create_producer(f"{topic}-partition-3")
    whole.close()
    one.close()

"""Regex and multi-topic subscriptions: ``CommandGetTopicsOfNamespace`` lists a
namespace's topics, a partitioned topic as its partitions, as Pulsar's broker does."""

from __future__ import annotations

import re
import uuid

import pulsar
import pytest

from cursorops.wire.commands import CommandType, TopicsMode
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, drain
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

ROLE = "admin"


def _namespace(standalone: Standalone) -> str:
    namespace = f"public/ns-{uuid.uuid4().hex[:8]}"
    with standalone.broker() as broker:
        broker.admin.create_namespace(ROLE, namespace)
    return namespace


def test_a_regex_consumer_reads_every_matching_topic(
    standalone: Standalone, client: pulsar.Client
) -> None:
    namespace = _namespace(standalone)
    with standalone.broker() as broker:
        broker.admin.create_topic(ROLE, f"persistent://{namespace}/orders-eu", 3)
    plain = f"persistent://{namespace}/orders-us"
    other = f"persistent://{namespace}/payments"
    for topic in (plain, other):
        client.create_producer(topic).close()
    consumer = client.subscribe(
        re.compile(f"persistent://{namespace}/orders-.*"),
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
    )
    sent = {f"persistent://{namespace}/orders-eu": 6, plain: 3, other: 2}
    for topic, n in sent.items():
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(n):
            producer.send(f"{topic}-{i}".encode())
        producer.close()
    got = drain(consumer, 1500)
    assert sorted(m.data().decode() for m in got) == sorted(
        f"{topic}-{i}" for topic in sent if topic != other for i in range(sent[topic])
    )
    consumer.close()


def test_a_consumer_of_a_list_of_topics_reads_them_all(client: pulsar.Client) -> None:
    topics = [f"persistent://public/default/list-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    consumer = client.subscribe(topics, "s", initial_position=pulsar.InitialPosition.Earliest)
    for n, topic in enumerate(topics):
        client.create_producer(topic).send(f"to-{n}".encode())
    got = drain(consumer, 1500)
    assert sorted(m.data() for m in got) == [b"to-0", b"to-1", b"to-2"]
    assert {m.topic_name() for m in got} == set(topics)
    consumer.close()


def test_the_list_is_filtered_hashed_and_answered_empty_when_unchanged(
    standalone: Standalone,
) -> None:
    namespace = _namespace(standalone)
    with standalone.broker() as broker:
        broker.admin.create_topic(ROLE, f"persistent://{namespace}/a", 2)
        broker.admin.create_topic(ROLE, f"persistent://{namespace}/b", 0)
    with RawClient(standalone.port) as raw:
        raw.connect()

        def ask(request_id: int, **fields: object) -> dict[str, object]:
            raw.send(
                command(
                    CommandType.GET_TOPICS_OF_NAMESPACE,
                    request_id=request_id,
                    namespace=namespace,
                    **fields,
                )
            )
            return raw.expect(CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE)

        everything = ask(1)
        assert everything["topics"] == [
            f"persistent://{namespace}/a-partition-0",
            f"persistent://{namespace}/a-partition-1",
            f"persistent://{namespace}/b",
        ]
        assert not everything.get("filtered", False)
        matching = ask(2, topics_pattern=f"persistent://{namespace}/a")
        assert matching["filtered"] and matching["topics"] == everything["topics"][:2]
        again = ask(
            3, topics_pattern=f"persistent://{namespace}/a", topics_hash=matching["topics_hash"]
        )
        assert again["changed"] is False and again.get("topics", []) == []
        assert ask(4, mode=int(TopicsMode.NON_PERSISTENT)).get("topics", []) == []
        # A pattern this broker cannot read is the client's to apply.
        assert ask(5, topics_pattern="(").get("filtered", False) is False
        raw.send(command(CommandType.GET_TOPICS_OF_NAMESPACE, request_id=6, namespace="a/b/c/d"))
        assert raw.expect(CommandType.ERROR)["request_id"] == 6

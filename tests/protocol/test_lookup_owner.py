"""Two brokers on one store: a lookup on either answers the topic partition's owner, so
a client of either broker (or of both, through a multi-host service URL) is served by
the owner, over the binary lookup and the HTTP one alike."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator

import pulsar
import pytest

from cursorops.core.domain.config import Config
from tests.protocol.harness import Standalone, drain, start, unique

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standalone, Standalone]]:
    home = tmp_path_factory.mktemp("owner")
    first = start(home / "a", web=True)
    shared = Config.from_home(home / "a")
    try:
        second = start(
            home / "b", web=True, metadata_url=shared.metadata_url, ledger_root=shared.ledger_root
        )
        try:
            _settled(first, second, shared)
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _settled(first: Standalone, second: Standalone, store: Config) -> None:
    """Wait until each broker's lookups know the other (a broker sees a new one at its
    next heartbeat): both answer the owner of a topic each owns."""
    probes = {first.owned_topic("probe", store): first, second.owned_topic("probe", store): second}
    deadline = time.monotonic() + 60
    while True:
        answers = {
            (topic, asked.service_url): _http_lookup(asked, topic)["brokerUrl"]
            for topic in probes
            for asked in (first, second)
        }
        if all(url == probes[topic].service_url for (topic, _), url in answers.items()):
            return
        assert time.monotonic() < deadline, answers
        time.sleep(0.2)


def _http_lookup(asked: Standalone, topic: str) -> dict[str, str]:
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{asked.web_url}/lookup/v2/topic/{path}", timeout=10) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def _holder_of(broker: Standalone, topic: str, subscription: str) -> set[str]:
    with (
        broker.broker() as admin,
        admin.metadata.subscription_transaction(topic, subscription, 0) as txn,
    ):
        return {c.consumer_id.split(".", 1)[0] for c in txn.consumers()}


@pytest.mark.parametrize("via", ["first", "second", "both"])
def test_a_client_of_any_broker_is_served_by_the_owner(
    pair: tuple[Standalone, Standalone], via: str
) -> None:
    first, second = pair
    store = Config.from_home(first.home)
    for owner in (first, second):
        topic = owner.owned_topic("owned", store)
        url = {
            "first": first.service_url,
            "second": second.service_url,
            "both": f"pulsar://127.0.0.1:{first.port},127.0.0.1:{second.port}",
        }[via]
        client = first.client(service_url=url)
        try:
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
            producer = client.create_producer(topic)
            producer.send(b"hello")
            assert consumer.receive(10_000).data() == b"hello"
            assert _holder_of(first, topic, "s") == {owner.slot}
        finally:
            client.close()


def test_the_http_lookup_answers_the_owner(pair: tuple[Standalone, Standalone]) -> None:
    first, second = pair
    topic = second.owned_topic("http", Config.from_home(first.home))
    path = topic.replace("persistent://", "persistent/")
    for asked in (first, second):
        with urllib.request.urlopen(f"{asked.web_url}/lookup/v2/topic/{path}", timeout=10) as r:
            answer = json.loads(r.read())
        assert answer["brokerUrl"] == second.service_url
        assert answer["httpUrl"] == second.web_url
    client = pulsar.Client(first.web_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(topic, "h")
        client.create_producer(topic).send(b"over http")
        assert consumer.receive(10_000).data() == b"over http"
        assert _holder_of(first, topic, "h") == {second.slot}
    finally:
        client.close()


def _clients(pair: tuple[Standalone, Standalone]) -> list[pulsar.Client]:
    return [broker.client() for broker in pair]


def test_exclusive_admits_one_consumer_whichever_broker_is_asked(
    pair: tuple[Standalone, Standalone],
) -> None:
    topic = unique("exclusive")
    clients = _clients(pair)
    try:
        clients[0].subscribe(topic, "x", consumer_type=pulsar.ConsumerType.Exclusive)
        with pytest.raises(pulsar.ConsumerBusy):
            clients[1].subscribe(topic, "x", consumer_type=pulsar.ConsumerType.Exclusive)
    finally:
        for client in clients:
            client.close()


def test_failover_has_one_active_consumer_across_brokers(
    pair: tuple[Standalone, Standalone],
) -> None:
    topic = unique("failover")
    clients = _clients(pair)
    try:
        consumers = [
            c.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name=n)
            for c, n in zip(clients, ("a", "b"), strict=True)
        ]
        producer = clients[0].create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(b"%d" % i)
        got = [drain(consumer, 1500) for consumer in consumers]
        # The first by name is the active one; the other receives nothing meanwhile.
        assert [len(g) for g in got] == [20, 0]
        assert [m.data() for m in got[0]] == [b"%d" % i for i in range(20)]
        for message in got[0]:
            consumers[0].acknowledge(message)
        consumers[0].close()
        producer.send(b"20")
        # The other takes over: what the first left unacknowledged (if its last
        # acknowledgements were still grouped when it closed), then the new one, in order.
        taken = [int(m.data()) for m in drain(consumers[1], 3000)]
        assert taken and taken[-1] == 20 and taken == sorted(taken)
    finally:
        for client in clients:
            client.close()


def test_key_shared_keeps_each_key_on_one_consumer_in_order_across_brokers(
    pair: tuple[Standalone, Standalone],
) -> None:
    topic = unique("keyed")
    clients = _clients(pair)
    try:
        consumers = [
            c.subscribe(topic, "k", consumer_type=pulsar.ConsumerType.KeyShared) for c in clients
        ]
        producer = clients[1].create_producer(topic, batching_enabled=False)
        for i in range(200):
            producer.send(b"%d" % i, partition_key=f"key-{i % 10}")
        owners: dict[str, int] = {}
        order: dict[str, list[int]] = {}
        for index, consumer in enumerate(consumers):
            for message in drain(consumer, 1500):
                key = message.partition_key()
                assert owners.setdefault(key, index) == index, f"{key} went to two consumers"
                order.setdefault(key, []).append(int(message.data()))
                consumer.acknowledge(message)
        assert sum(len(v) for v in order.values()) == 200
        assert all(v == sorted(v) for v in order.values())
    finally:
        for client in clients:
            client.close()

"""Two brokers on one store: a lookup on either answers the topic partition's owner, so
a client of either broker (or of both, through a multi-host service URL) is served by
the owner, over the binary lookup and the HTTP one alike."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pulsar
import pytest

from cursorops.core.config import Config
from tests.protocol.harness import Standalone, start

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
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


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

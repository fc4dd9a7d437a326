"""Two standalone processes on one PostgreSQL and one ledger folder serve the same topics.

A producer on each process appends to one topic, and one Shared subscription
has a consumer on each: every message is delivered, acknowledged ones are not
delivered again, and the only repeats are Pulsar's at-least-once redeliveries
(no consumer asks for one here, so every copy has redelivery count 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests.conftest import postgres_databases
from tests.protocol.harness import Standalone, drain, start, unique

pytestmark = pytest.mark.postgres

MESSAGES = 400


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Standalone, Standalone, str]]:
    """Two standalones, each on a home of its own, sharing one ledger root and one
    PostgreSQL database (metadata)."""
    name = f"cursorops_pair_{uuid.uuid4().hex[:8]}"
    with postgres_databases(name) as urls:
        home = Path(tmp_path_factory.mktemp("pair"))
        url = urls[name]
        Broker.migrate_metadata(Config.from_home(home, metadata_url=url))
        first = start(home, metadata_url=url)
        try:
            second = start(
                home / "second", metadata_url=url, ledger_root=Config.from_home(home).ledger_root
            )
            try:
                yield first, second, url
            finally:
                second.stop()
        finally:
            first.stop()


def _receive_alternately(
    consumers: list[pulsar.Consumer], expected: int
) -> list[tuple[int, pulsar.Message]]:
    """Receive from each consumer in turn, acknowledging each message, until ``expected``
    distinct messages came or a full round brings nothing for a while."""
    got: list[tuple[int, pulsar.Message]] = []
    seen: set[bytes] = set()
    idle_rounds = 0
    while len(seen) < expected and idle_rounds < 20:
        progress = False
        for number, consumer in enumerate(consumers):
            for _ in range(7):
                try:
                    message = consumer.receive(100)
                except pulsar.Timeout:
                    break
                consumer.acknowledge(message)
                got.append((number, message))
                seen.add(message.data())
                progress = True
        idle_rounds = 0 if progress else idle_rounds + 1
    return got


def test_two_processes_share_topics_and_a_shared_subscription(
    pair: tuple[Standalone, Standalone, str],
) -> None:
    first, second, url = pair
    topic = unique("pair")
    clients = [first.client(), second.client()]
    try:
        consumers = [
            c.subscribe(
                topic,
                "s",
                consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
                receiver_queue_size=10,
            )
            for c in clients
        ]
        producers = [
            c.create_producer(topic, batching_enabled=True, batching_max_messages=10)
            for c in clients
        ]
        sent: dict[bytes, pulsar.MessageId] = {}
        for i in range(MESSAGES):
            payload = f"m{i}".encode()
            producers[i % 2].send_async(
                payload, lambda _r, mid, p=payload: sent.__setitem__(p, mid)
            )
            if i % 50 == 49:
                for producer in producers:
                    producer.flush()
        for producer in producers:
            producer.flush()
        assert len(sent) == MESSAGES
        # Receipts from either process name distinct positions of the one topic.
        assert len({(m.ledger_id(), m.entry_id(), m.batch_index()) for m in sent.values()}) == (
            MESSAGES
        )

        got = _receive_alternately(consumers, MESSAGES)
        payloads = [message.data() for _, message in got]
        assert set(payloads) == set(sent)
        assert {number for number, _ in got} == {0, 1}, "both processes delivered"
        # At least once: a message may come again (a consumer's lease that lapsed on a
        # loaded machine releases what it held), and as Pulsar counts it, such a release
        # does not raise its redelivery count: only the consumer's own request does.
        assert all(message.redelivery_count() == 0 for _, message in got)
        for consumer in consumers:
            # Nothing more, and nothing comes back when the other consumer leaves.
            assert drain(consumer, 1000) == []
            consumer.close()
    finally:
        for c in clients:
            c.close()

    with Broker(Config.from_home(first.home, metadata_url=url)) as broker:
        (part,) = broker.analysis.analyze_backlog("admin", topic, "s")
        assert part.result.messages == 0
        assert broker.analysis.entry_count("admin", topic) == len(
            {(m.ledger_id(), m.entry_id()) for m in sent.values()}
        )

"""A standalone restarted after ``kill -9`` frees, before it serves, what its dead process held.

Two standalones share one home and one store: the restarted one releases the
consumers of its own earlier life only, never those of the other, live one.
"""

from __future__ import annotations

import time
from pathlib import Path

import pulsar
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.store.dispatch_state import PendingInfo
from cursorops.local.ports import free_port
from tests.protocol.harness import Standalone, drain, start

ROLE = "admin"
MESSAGES = 60


def _registered(server: Standalone, topic: str, subscription: str) -> tuple[set[str], set[str]]:
    """(registered consumer ids, ids holding pending messages) of the subscription."""
    with (
        server.broker() as broker,
        broker.metadata.subscription_transaction(topic, subscription, 0) as txn,
    ):
        consumers = {c.consumer_id for c in txn.consumers()}
        pending: dict[object, PendingInfo] = dict(txn.pending())
    return consumers, {p.consumer_id for p in pending.values() if p.consumer_id is not None}


def _acknowledged(server: Standalone, topic: str, subscription: str, count: int) -> None:
    """Wait until ``count`` acknowledgements are stored (the client sends them grouped)."""
    deadline = time.monotonic() + 20
    while True:
        with server.broker() as broker:
            backlog = (
                broker.analysis.topic_stats(ROLE, topic).subscriptions[subscription].msg_backlog
            )
        if backlog == MESSAGES - count or time.monotonic() > deadline:
            assert backlog == MESSAGES - count
            return
        time.sleep(0.05)


def _hold(client: pulsar.Client, topic: str, subscription: str) -> pulsar.Consumer:
    """A Shared consumer that acknowledged a few messages and holds the rest unacknowledged."""
    consumer = client.subscribe(
        topic,
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=MESSAGES,
    )
    for _ in range(5):
        consumer.acknowledge(consumer.receive(5000))
    return consumer


@pytest.mark.slow
def test_a_restart_releases_its_earlier_lifes_consumers_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    server = start(home, broker_port=port)
    # Another broker on the same stores: a home of its own, the first home's metadata and
    # ledgers.
    shared = Config.from_home(home)
    other = start(
        tmp_path / "other", metadata_url=shared.metadata_url, ledger_root=shared.ledger_root
    )
    # A lookup answers a topic's owner: one topic each broker serves.
    topic = server.owned_topic("restart")
    kept_topic = other.owned_topic("kept", shared)
    client, other_client = server.client(), other.client()
    try:
        for name in (topic, kept_topic):
            producer = other_client.create_producer(name, batching_enabled=False)
            for i in range(MESSAGES):
                producer.send(f"m{i}".encode())
            producer.close()
        held = _hold(client, topic, "drain")
        kept = _hold(other_client, kept_topic, "kept")
        _acknowledged(server, topic, "drain", 5)
        dead, dead_holders = _registered(server, topic, "drain")
        live, live_holders = _registered(server, kept_topic, "kept")
        assert all(c.startswith(f"{server.slot}.1/") for c in dead)
        assert all(c.startswith(f"{other.slot}.1/") for c in live)
        assert dead and dead_holders == dead
        assert live and live_holders == live

        server.process.kill()
        server.process.wait(10)
        server = start(home, broker_port=port)

        consumers, holders = _registered(server, topic, "drain")
        assert not consumers & dead and not holders & dead
        # The other standalone's consumer is alive: it keeps its registration and messages.
        assert _registered(server, kept_topic, "kept") == (live, live_holders)

        # The client reconnects to the restarted process and gets every unacknowledged
        # message again; once it has acknowledged them, the backlog is 0.
        got = drain(held, 3000)
        for message in got:
            held.acknowledge(message)
        assert {m.data() for m in got} == {f"m{i}".encode() for i in range(5, MESSAGES)}
        held.close()
        _acknowledged(server, topic, "drain", MESSAGES)
        kept.close()
    finally:
        client.close()
        other_client.close()
        server.stop()
        other.stop()


@pytest.mark.slow
def test_a_graceful_stop_leaves_its_slot_to_the_next_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = start(home)
    first.stop()
    second = start(home)
    try:
        assert len(list((home / "brokers").glob("*.lock"))) == 1
    finally:
        second.stop()

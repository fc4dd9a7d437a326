"""Two brokers on one store: one dies (``kill -9``) or pauses (SIGSTOP, then SIGCONT once
declared dead) while the official client produces and consumes a partitioned topic
through a multi-host service URL. The clients carry on with the survivor, the dead
broker's handed-out messages reach live consumers, every acknowledged send is
delivered, and the exact backlog drains to 0. A paused broker that resumes finds its
life ended, closes its connections, and joins again as a new life."""

from __future__ import annotations

import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pulsar
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from cursorops.core.services.broker.cluster import owner_of
from cursorops.core.store.broker_registry import DEAD
from tests.conftest import postgres_databases
from tests.protocol.harness import Standalone, start, unique

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PARTITIONS = 8
MESSAGES = 1_200
DEADLINE_S = 120.0
"""How long the test waits for an outcome (not a timing claim: a bound on a hang)."""
LOG_LINES = 40


@dataclass
class Cluster:
    brokers: list[Standalone]
    config: Config

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def admin(self) -> Broker:
        return Broker(self.config)

    def logs(self) -> str:
        """The end of each broker's log: what a failed wait shows."""
        return "\n".join(
            f"--- {b.home.name}:\n" + "\n".join(b.log_text().splitlines()[-LOG_LINES:])
            for b in self.brokers
        )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    name = f"cursorops_failover_{uuid.uuid4().hex[:8]}"
    with postgres_databases(name) as urls:
        url = urls[name]
        root = str(tmp_path / "ledgers")
        config = Config.from_home(tmp_path / "admin", metadata_url=url, ledger_root=root)
        Broker.migrate_metadata(config)
        brokers: list[Standalone] = []
        try:
            for i in range(2):
                brokers.append(start(tmp_path / f"b{i}", metadata_url=url, ledger_root=root))
            yield Cluster(brokers, config)
        finally:
            for broker in brokers:
                if broker.alive():
                    broker.process.send_signal(signal.SIGCONT)
                broker.stop()


@dataclass
class Traffic:
    """A producer and two Shared consumers on their own clients, all on the multi-host URL."""

    sent: set[bytes] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    received: set[bytes] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def delivered_all(self) -> bool:
        with self.lock:
            return bool(self.sent) and self.sent <= self.received


def _consume(consumer: pulsar.Consumer, traffic: Traffic) -> None:
    while not traffic.stop.is_set():
        try:
            message = consumer.receive(200)
        except pulsar.Timeout:
            continue
        except Exception:  # the client is being closed at the end
            if traffic.stop.is_set():
                return
            raise
        with traffic.lock:
            traffic.received.add(message.data())
        consumer.acknowledge(message)


def _produce(producer: pulsar.Producer, traffic: Traffic, start_at: int, count: int) -> None:
    done = threading.Semaphore(0)

    def sent(result: pulsar.Result, _id: object, payload: bytes) -> None:
        with traffic.lock:
            if result == pulsar.Result.Ok:
                traffic.sent.add(payload)
            else:
                traffic.failed.append(str(result))
        done.release()

    for i in range(start_at, start_at + count):
        payload = b"m-%06d" % i
        producer.send_async(payload, lambda r, m, p=payload: sent(r, m, p), partition_key=str(i))
    for _ in range(count):
        done.acquire(timeout=DEADLINE_S)


def _wait(condition: object, what: str, cluster: Cluster | None = None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            logs = f"\n{cluster.logs()}" if cluster is not None else ""
            raise AssertionError(f"not within {DEADLINE_S} s: {what}{logs}")
        time.sleep(0.1)


def _victim(cluster: Cluster, topic: str) -> Standalone:
    """A broker that owns at least one partition of ``topic`` (by the rule lookups use)."""
    with cluster.admin() as admin:
        live = admin.cluster.members()
    owners = {owner_of(f"{topic}-partition-{i}", live) for i in range(PARTITIONS)}
    slots = {o.broker_id for o in owners if o is not None}
    for broker in cluster.brokers:
        if broker.slot in slots:
            return broker
    raise AssertionError("no broker owns a partition")


def _backlog(cluster: Cluster, topic: str) -> int:
    with cluster.admin() as admin:
        stats = admin.analysis.topic_stats("admin", topic)
        return sum(s.msg_backlog for s in stats.subscriptions.values())


def _run(cluster: Cluster, interrupt: object) -> tuple[Standalone, Traffic]:
    topic = unique("failover")
    with cluster.admin() as admin:
        admin.admin.create_topic("admin", topic, PARTITIONS)
    rng = random.Random()
    traffic = Traffic()
    clients = [
        pulsar.Client(
            cluster.service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        for _ in range(3)
    ]
    try:
        consumers = [
            c.subscribe(
                topic,
                "s",
                consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
                receiver_queue_size=rng.choice([10, 100, 1000]),
            )
            for c in clients[:2]
        ]
        producer = clients[2].create_producer(
            topic,
            batching_enabled=rng.random() < 0.5,
            send_timeout_millis=0,
            block_if_queue_full=True,
        )
        readers = [
            threading.Thread(target=_consume, args=(c, traffic), daemon=True) for c in consumers
        ]
        for reader in readers:
            reader.start()
        _produce(producer, traffic, 0, MESSAGES // 2)
        _wait(lambda: len(traffic.received) >= MESSAGES // 4, "a quarter received")
        victim = _victim(cluster, topic)
        interrupt(victim)  # type: ignore[operator]
        _produce(producer, traffic, MESSAGES // 2, MESSAGES // 2)
        _wait(traffic.delivered_all, "every acknowledged send delivered", cluster)
        assert len(traffic.sent) == MESSAGES and traffic.failed == []
        _wait(lambda: _backlog(cluster, topic) == 0, "the exact backlog drained to 0", cluster)
        traffic.stop.set()
        for reader in readers:
            reader.join(10)
    finally:
        traffic.stop.set()
        for client in clients:
            client.close()
    return victim, traffic


def test_kill_9_of_one_broker_loses_nothing(cluster: Cluster) -> None:
    victim, _ = _run(cluster, lambda broker: broker.process.send_signal(signal.SIGKILL))
    survivor = next(b for b in cluster.brokers if b is not victim)
    assert "declared broker" in survivor.log_text()
    with cluster.admin() as admin:
        states = {r.broker_id: r.state for r in admin.cluster.brokers()}
        assert sorted(states.values()) == [DEAD, "live"]


def test_a_paused_broker_resumes_as_a_new_life(cluster: Cluster) -> None:
    def pause(broker: Standalone) -> None:
        broker.process.send_signal(signal.SIGSTOP)

        def declared() -> bool:
            with cluster.admin() as admin:
                return DEAD in {r.state for r in admin.cluster.brokers()}

        _wait(declared, "the paused broker declared dead", cluster)
        broker.process.send_signal(signal.SIGCONT)

    victim, _ = _run(cluster, pause)
    _wait(lambda: "joined the cluster again" in victim.log_text(), "the new life", cluster)
    text = victim.log_text()
    assert "was declared dead by the cluster" in text
    # Closing the old life's connections does not fail on its consumers, which the cluster
    # released already: the new life joins on the first try.
    assert "joining again failed" not in text and "Unhandled exception" not in text, text
    with cluster.admin() as admin:
        lives = {r.broker_id: (r.epoch, r.state) for r in admin.cluster.brokers()}
    assert sorted(lives.values()) == [(1, "live"), (2, "live")]

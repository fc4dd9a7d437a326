"""Consumers of one subscription in separate processes, per subscription type.

Each consumer runs in its own process (multiprocessing, spawn) with its own
Broker, or is the real ``cursorops`` CLI; they share only the installation (the
metadata store and the ledger folder), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.delivery.key_hash import HashRing, sticky_key_hash
from cursorops.core.domain.errors import CursorOpsError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

pytestmark = pytest.mark.slow
"""Every test starts consumer processes (spawned interpreters or the CLI): seconds each."""

TOPIC = "persistent://acme/ops/procs"
SUB = "s"
CLI = str(Path(sys.executable).parent / "cursorops")
SPAWN = multiprocessing.get_context("spawn")


SHORT_LEASE_MS = 5_000
"""The lease of the lease-expiry tests: what a killed consumer held must stay held until the
other consumer has asked once, even on a loaded machine (1.5 s was not enough there)."""


def _broker(home: str, url: str, lease_ms: int) -> Broker:
    return Broker(Config.from_home(home, metadata_url=url, consumer_lease_ms=lease_ms))


def _install(home: str, url: str, kind: SubscriptionType, partitions: int = 0) -> None:
    with _broker(home, url, 30_000) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC, partitions=partitions)
        broker.admin.create_subscription("admin", TOPIC, SUB, kind, initial_position="earliest")


def _produce(home: str, url: str, messages: list[OutgoingMessage]) -> None:
    with _broker(home, url, 30_000) as broker:
        broker.producing.produce("admin", TOPIC, messages)


# -- a consumer in its own process, driven command by command ------------------


def _actor_main(home: str, url: str, lease_ms: int, conn: Connection) -> None:
    broker = _broker(home, url, lease_ms)
    consumer = None
    held: dict[str, Any] = {}
    while True:
        command, arg = conn.recv()
        try:
            result: object = None
            if command == "subscribe":
                consumer = broker.reading.dispatcher("admin", TOPIC, SUB).subscribe(
                    arg, receiver_queue_size=1
                )
            elif command == "receive":
                assert consumer is not None
                got = consumer.receive_many(arg)
                held.update((m.payload.decode(), m) for m in got)
                result = [
                    (m.payload.decode(), m.key, m.message_id.partition, m.redelivery_count)
                    for m in got
                ]
            elif command == "ack":
                assert consumer is not None
                consumer.acknowledge([held.pop(p) for p in arg])
            elif command == "close":
                assert consumer is not None
                consumer.close()
            elif command == "exit":
                conn.send(("ok", None))
                return
            conn.send(("ok", result))
        except CursorOpsError as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Actor:
    """One consumer process; ``kill`` ends it like a crash (no close, the lease stays)."""

    def __init__(self, home: str, url: str, lease_ms: int = 30_000) -> None:
        self._conn, child = SPAWN.Pipe()
        self._process = SPAWN.Process(target=_actor_main, args=(home, url, lease_ms, child))
        self._process.start()

    def call(self, command: str, arg: object = None) -> Any:
        self._conn.send((command, arg))
        status, result = self._conn.recv()
        if status == "error":
            raise AssertionError(f"unexpected {result}")
        return result

    def refused(self, command: str, arg: object = None) -> str:
        self._conn.send((command, arg))
        status, result = self._conn.recv()
        assert status == "error", f"{command} succeeded: {result}"
        return str(result)

    def kill(self) -> None:
        self._process.kill()
        self._process.join()

    def stop(self) -> None:
        if self._process.is_alive():
            self.call("exit")
        self._process.join(10)


@pytest.fixture
def home(tmp_path: Path) -> str:
    return str(tmp_path / "home")


@pytest.fixture
def actors() -> Iterator[list[Actor]]:
    started: list[Actor] = []
    yield started
    for actor in started:
        actor.stop()


# -- Shared ----------------------------------------------------------------


SHARE_CAP = 800
"""Messages one Shared worker takes at most: two cannot drain the 2,000, so all three must."""


def _shared_worker(home: str, url: str, name: str, barrier: Any, results: Any) -> None:
    with _broker(home, url, 30_000) as broker:
        consumer = broker.reading.dispatcher("admin", TOPIC, SUB).subscribe(
            name, receiver_queue_size=25
        )
        barrier.wait()
        got: list[str] = []
        while len(got) < SHARE_CAP:
            batch = consumer.receive_many(min(25, SHARE_CAP - len(got)))
            if not batch:
                # Nothing free for us right now: the rest may be held by the others.
                if broker.analysis.topic_stats("admin", TOPIC).subscriptions[SUB].msg_backlog == 0:
                    break
                time.sleep(0.01)
                continue
            consumer.acknowledge(batch)
            got.extend(m.payload.decode() for m in batch)
        consumer.close()
    results.put((name, got))


def test_three_shared_consumer_processes_share_the_messages_each_exactly_once(
    home: str, metadata_url: str
) -> None:
    _install(home, metadata_url, SubscriptionType.SHARED, partitions=2)
    _produce(home, metadata_url, [OutgoingMessage(f"m{i}".encode()) for i in range(2000)])
    barrier = SPAWN.Barrier(3)
    results = SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_shared_worker, args=(home, metadata_url, n, barrier, results))
        for n in ("a", "b", "c")
    ]
    for worker in workers:
        worker.start()
    got = dict(results.get(timeout=300) for _ in workers)
    for worker in workers:
        worker.join(30)
    everything = [m for received in got.values() for m in received]
    assert len(everything) == len(set(everything)) == 2000
    assert set(everything) == {f"m{i}" for i in range(2000)}
    # Interleaved for real: each took at most SHARE_CAP, so every process got a share.
    assert all(0 < len(received) <= SHARE_CAP for received in got.values())


def _cli(home: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    return subprocess.run(
        [CLI, "--home", home, "--metadata-url", url, "-o", "json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_three_concurrent_cli_consume_ack_processes_get_disjoint_sets(
    home: str, metadata_url: str
) -> None:
    _install(home, metadata_url, SubscriptionType.SHARED)
    _produce(home, metadata_url, [OutgoingMessage(f"m{i}".encode()) for i in range(2000)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    command = [CLI, "--home", home, "--metadata-url", metadata_url, "-o", "json"]
    command += ["consume", TOPIC, "-s", SUB, "-n", "2000", "--ack"]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], [err for _, err in outputs]
    received = [[m["payload"] for m in json.loads(out)] for out, _ in outputs]
    everything = [m for one in received for m in one]
    assert len(everything) == len(set(everything)) == 2000
    assert set(everything) == {f"m{i}" for i in range(2000)}
    again = _cli(home, metadata_url, "consume", TOPIC, "-s", SUB, "-n", "10")
    assert again.returncode == 0 and json.loads(again.stdout) == []


def test_shared_lease_expiry_redelivers_what_a_crashed_consumer_held(
    home: str, metadata_url: str, actors: list[Actor]
) -> None:
    _install(home, metadata_url, SubscriptionType.SHARED)
    _produce(home, metadata_url, [OutgoingMessage(f"m{i}".encode()) for i in range(10)])
    a = Actor(home, metadata_url, lease_ms=SHORT_LEASE_MS)
    b = Actor(home, metadata_url, lease_ms=SHORT_LEASE_MS)
    actors += [a, b]
    a.call("subscribe", "a")
    held = [p for p, *_ in a.call("receive", 4)]
    assert held == ["m0", "m1", "m2", "m3"]
    a.kill()
    b.call("subscribe", "b")
    # While a's lease lasts, what it holds goes to nobody else.
    first = b.call("receive", 100)
    assert [p for p, *_ in first] == [f"m{i}" for i in range(4, 10)]
    b.call("ack", [p for p, *_ in first])
    time.sleep(SHORT_LEASE_MS / 1000 + 0.2)
    second = b.call("receive", 100)
    # A crashed consumer asked for nothing again: the redelivery counts are unchanged.
    assert [(p, count) for p, _, _, count in second] == [(p, 0) for p in held]
    b.call("ack", held)
    assert b.call("receive", 100) == []


# -- Exclusive ---------------------------------------------------------------


def test_second_exclusive_consumer_is_refused_until_the_first_closes(
    home: str, metadata_url: str, actors: list[Actor]
) -> None:
    _install(home, metadata_url, SubscriptionType.EXCLUSIVE)
    _produce(home, metadata_url, [OutgoingMessage(b"x")])
    a = Actor(home, metadata_url)
    actors.append(a)
    a.call("subscribe", "a")
    refused = _cli(home, metadata_url, "consume", TOPIC, "-s", SUB)
    assert refused.returncode == 4
    assert refused.stderr.strip().splitlines() == ["error: Exclusive consumer is already connected"]
    a.call("close")
    accepted = _cli(home, metadata_url, "consume", TOPIC, "-s", SUB, "--ack")
    assert accepted.returncode == 0, accepted.stderr
    assert [m["payload"] for m in json.loads(accepted.stdout)] == ["x"]


def test_exclusive_consumer_is_accepted_after_the_holders_lease_expires(
    home: str, metadata_url: str, actors: list[Actor]
) -> None:
    _install(home, metadata_url, SubscriptionType.EXCLUSIVE)
    _produce(home, metadata_url, [OutgoingMessage(f"m{i}".encode()) for i in range(3)])
    a = Actor(home, metadata_url, lease_ms=SHORT_LEASE_MS)
    b = Actor(home, metadata_url, lease_ms=SHORT_LEASE_MS)
    actors += [a, b]
    a.call("subscribe", "a")
    assert [p for p, *_ in a.call("receive", 2)] == ["m0", "m1"]
    a.kill()
    assert "Exclusive consumer is already connected" in b.refused("subscribe", "b")
    time.sleep(SHORT_LEASE_MS / 1000 + 0.2)
    b.call("subscribe", "b")
    got = b.call("receive", 10)
    # The killed holder asked for nothing again: the counts are unchanged.
    assert [(p, count) for p, _, _, count in got] == [("m0", 0), ("m1", 0), ("m2", 0)]


# -- Failover ----------------------------------------------------------------


def test_failover_spreads_four_partitions_over_two_consumer_processes(
    home: str, metadata_url: str, actors: list[Actor]
) -> None:
    _install(home, metadata_url, SubscriptionType.FAILOVER, partitions=4)
    _produce(home, metadata_url, [OutgoingMessage(f"m{i}".encode()) for i in range(40)])
    a = Actor(home, metadata_url)
    b = Actor(home, metadata_url)
    actors += [a, b]
    a.call("subscribe", "a")
    b.call("subscribe", "b")
    got_a = a.call("receive", 100)
    got_b = b.call("receive", 100)
    partitions_a = {partition for _, _, partition, _ in got_a}
    partitions_b = {partition for _, _, partition, _ in got_b}
    # Pulsar: consumers sorted by priority then name; partition i goes to consumer i % 2.
    assert partitions_a == {0, 2}
    assert partitions_b == {1, 3}
    assert len(got_a) + len(got_b) == 40
    # When b leaves, a becomes active on every partition.
    b.call("close")
    a.call("ack", [p for p, *_ in got_a])
    rest = a.call("receive", 100)
    assert {p for p, *_ in rest} == {p for p, *_ in got_b}


# -- Key_Shared --------------------------------------------------------------


def _keyed(batch: int, keys: int, per_key: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(f"k{k}:{batch * per_key + s}".encode(), key=f"k{k}")
        for s in range(per_key)
        for k in range(keys)
    ]


def test_key_shared_joining_consumer_waits_for_the_keys_pending_elsewhere(
    home: str, metadata_url: str, actors: list[Actor]
) -> None:
    keys, per_key = 12, 3
    _install(home, metadata_url, SubscriptionType.KEY_SHARED)
    _produce(home, metadata_url, _keyed(0, keys, per_key))
    a = Actor(home, metadata_url)
    b = Actor(home, metadata_url)
    actors += [a, b]
    a.call("subscribe", "a")
    first = a.call("receive", 1000)
    assert len(first) == keys * per_key
    _produce(home, metadata_url, _keyed(1, keys, per_key))
    b.call("subscribe", "b")
    ids = _consumer_ids(home, metadata_url)
    ring = HashRing(list(ids.values()))
    moved = {f"k{k}" for k in range(keys) if ring.select(sticky_key_hash(f"k{k}")) == ids["b"]}
    assert moved, "the ring gives b no key: pick other keys"
    # Every key still has messages pending at a: b receives nothing yet.
    assert b.call("receive", 1000) == []
    # a acknowledges the messages of half of the moved keys; those keys drain to b.
    released = set(sorted(moved)[: max(1, len(moved) // 2)])
    a.call("ack", [p for p, key, *_ in first if key in released])
    got_b = b.call("receive", 1000)
    assert {key for _, key, *_ in got_b} == released
    for key in released:
        sequence = [int(p.split(":")[1]) for p, k, *_ in got_b if k == key]
        assert sequence == list(range(per_key, 2 * per_key))
    # a still gets the later messages of the keys the ring left with it, in order.
    got_a = a.call("receive", 1000)
    for key in {k for _, k, *_ in got_a}:
        assert key not in moved
        sequence = [int(p.split(":")[1]) for p, k, *_ in got_a if k == key]
        assert sequence == list(range(per_key, 2 * per_key))


def _consumer_ids(home: str, url: str) -> dict[str, str]:
    with (
        _broker(home, url, 30_000) as broker,
        broker.metadata.subscription_transaction(TOPIC, SUB, broker.clock()) as txn,
    ):
        return {c.name: c.consumer_id for c in txn.consumers()}

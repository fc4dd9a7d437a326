"""Before and after a change, side by side: the code at a base revision against this checkout.

The base revision (``--base``, default ``9faf83e``, the commit before the
metadata store and the Broker were restructured) is checked out into a
temporary ``git worktree``, removed afterwards (also on error or Ctrl-C).
Every measurement runs in a child process of this script started with
``python -P`` and ``PYTHONPATH`` set to one tree or the other, so each child
imports only that tree's ``cursorops`` (it
reports the file it imported ``core`` from, and the parent checks it). Each
round runs every child once per tree, alternating which tree goes first from
round to round; figures are medians over the rounds, and the ratio
current/base is taken from the medians of the same run.

The children (each prints one JSON line of results):

- ``skip``: a 4-partition topic, a role with a ``consume`` grant on its
  namespace, and the standalone's REST app of that tree
  (``cursorops.wire.web.web_app``: the plugin's app with the standalone's own user,
  no Airflow login) called through FastAPI's ``TestClient``. Statements per
  two-id skip (one id on each of two partitions, a fresh subscription each
  time), counted by a ``before_cursor_execute`` listener on the store's
  engine, through the Broker path (the skip slice's ``skip_messages``; the Broker's own
  method at the base revision) and through the REST route (which
  at the base revision was ``plan_skip`` + ``skip_requires_approval`` +
  ``apply_skip``); then the latency of many two-id skips, each on ids not
  skipped before, the Broker and REST calls interleaved. On SQLite, and on
  PostgreSQL when ``CURSOROPS_TEST_PG_URL`` names a server (a fresh schema
  per child).
- ``read``: one non-partitioned topic written with ``Broker.producing.produce_columns``
  in batches of 10; a Shared subscription read to the end by one consumer
  with ``receive_many(1000)`` acknowledging each chunk, and (a fresh
  subscription) with ``receive_batch(1000)`` without acknowledging; messages
  per second including building the dispatcher.
- ``acks``: durable individual acknowledgements on SQLite, the way every
  consumer's go: one ``Consumer.acknowledge`` per received message.

``python -m benchmarks.before_after [--base REV] [--rounds N] [--quick]``
writes its section of ``docs/benchmarks.md`` (not with ``--quick`` unless
``--write``); ``--save FILE`` also keeps the raw results, which ``--load FILE``
renders again without measuring. With PostgreSQL::

    CURSOROPS_TEST_PG_PORT=55439 bash scripts/start-postgres.sh -- \
        .venv/bin/python -m benchmarks.before_after

Where a row is slower than at the base, the section says so, with the likely
cause from :data:`CAUSES`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECTION = "before_after"
TITLE = "Restructured store and Broker: before and after, side by side"
DEFAULT_BASE = "9faf83e"
REPO = Path(__file__).resolve().parent.parent
PG_ENV = "CURSOROPS_TEST_PG_URL"

ROLE = "admin"
"""A superuser: sets up every installation."""
READER = "reader"
"""The role that skips: a ``consume`` grant on the namespace, nothing more."""
TENANT = "bench"
NAMESPACE = "bench/ba"
SKIP_TOPIC = "persistent://bench/ba/skips"
READ_TOPIC = "persistent://bench/ba/read"
ACK_TOPIC = "persistent://bench/ba/acks"
PARTITIONS = 4
CHILD_TIMEOUT_S = 600

CAUSES: dict[str, str] = {
    "read:": (
        "where the CPU columns are not higher, the likely cause is the shared machine rather "
        "than the code: a read pass now sends fewer metadata statements than at the base "
        "(6, was 9, for building the dispatcher and reading to the end: authorization is one "
        "statement), and the dispatcher's cursor replay moved to "
        "`cursorops.core.store.cursor_state.replay_since` unchanged in substance (one more "
        "function "
        "call per dispatch); compare the ranges in brackets"
    ),
    "acks:": (
        "a durable acknowledgement of one id sends the same three statements as at the base "
        "(`BEGIN IMMEDIATE`, `UPDATE cursors`, `INSERT INTO cursor_deltas`) and waits for an "
        "`fsync` of the shared disk, whose latency swings with other work: where the CPU "
        "columns are not higher, that wait is the likely cause; where they are, "
        "`cursorops.core.store.cursor_state` (the cursor-state repository the writes now go "
        "through)"
    ),
    "skip latency": (
        "where the statements are fewer and the CPU columns not higher, the likely cause is "
        "the shared machine; otherwise the one skip path in `core/services/gating/skip.py`"
    ),
}
"""The likely cause of a slowdown, by the start of its row's label: printed only when that
row is slower in the run being written."""


@dataclass(frozen=True)
class Sizes:
    statement_skips: int
    """Skips whose statements are counted (each on a fresh subscription)."""
    warm_skips: int
    """Untimed skips of each path before the timed ones."""
    timed_skips: int
    """Timed skips of each path (Broker, REST), interleaved."""
    read_messages: int
    consumer_acks: int
    """``Consumer.acknowledge`` calls, one received message each."""


FULL = Sizes(
    statement_skips=3,
    warm_skips=5,
    timed_skips=60,
    read_messages=10_000,
    consumer_acks=200,
)
QUICK = Sizes(
    statement_skips=1,
    warm_skips=2,
    timed_skips=10,
    read_messages=2_000,
    consumer_acks=40,
)


# == the child: measures the tree it imports ==========================================


def _engine_of(store: Any) -> Any:
    """The store's SQLAlchemy engine: ``engine`` now, ``_engine`` before."""
    engine = getattr(store, "engine", None)
    return engine if engine is not None else store._engine


@contextmanager
def _counting(engine: Any) -> Iterator[list[str]]:
    from sqlalchemy import event

    seen: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


@contextmanager
def _metadata_url(backend: str, home: Path) -> Iterator[str]:
    """A SQLite file in ``home``, or a fresh schema on the PostgreSQL server (dropped after)."""
    if backend == "sqlite":
        yield f"sqlite:///{home / 'metadata.db'}"
        return
    from cursorops.local import postgres

    with postgres.schema(os.environ[PG_ENV], prefix="bench") as (url, _schema):
        yield url


def _owner(broker: Any, collaborator: str) -> Any:
    """What answers an operation of ``broker``: the collaborator of that name in this
    checkout, the Broker itself at the base revision (one class with every method)."""
    return getattr(broker, collaborator, broker)


def _skip_messages(broker: Any, subscription: str, ids: list[Any]) -> Any:
    """A skip of ``ids`` at once, as the Broker path of each tree makes it: the skip slice's
    ``skip_messages`` with the Broker's gated services here, the Broker's own method at the
    base revision."""
    if hasattr(broker, "skip_messages"):
        return broker.skip_messages(READER, SKIP_TOPIC, subscription, ids)
    from cursorops.core.services.gating import skip

    return skip.skip_messages(broker.gated, READER, SKIP_TOPIC, subscription, ids)


def _installation(broker: Any) -> None:
    _owner(broker, "admin").create_tenant(ROLE, TENANT)
    _owner(broker, "admin").create_namespace(ROLE, NAMESPACE)
    _owner(broker, "admin").grant_permission(ROLE, NAMESPACE, READER, ["consume"])


def child_skip(sizes: Sizes, backend: str, work: Path) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from cursorops.core.domain.config import Config
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.producer import OutgoingMessage
    from cursorops.wire.web import web_app

    home = work / "skip"
    home.mkdir(parents=True)
    with _metadata_url(backend, home) as url:
        config = Config.from_home(home, metadata_url=url)
        # The standalone's REST app, its user the granted role (authentication off, as on
        # loopback); its own Broker does the setup and the Broker path too.
        app = web_app(config, READER, None)
        broker = app.state.broker
        try:
            _installation(broker)
            _owner(broker, "admin").create_topic(ROLE, SKIP_TOPIC, partitions=PARTITIONS)
            skips = sizes.statement_skips + sizes.warm_skips + sizes.timed_skips
            per_partition = skips // 2 + 2
            produced = _owner(broker, "producing").produce(
                ROLE,
                SKIP_TOPIC,
                [OutgoingMessage(b"%d" % i) for i in range(PARTITIONS * per_partition + 8)],
            )
            by_partition: dict[int, list[Any]] = {}
            for message_id in produced:
                by_partition.setdefault(message_id.partition, []).append(message_id)
            assert sorted(by_partition) == list(range(PARTITIONS)), sorted(by_partition)

            def subscribe(name: str) -> str:
                _owner(broker, "admin").create_subscription(
                    ROLE, SKIP_TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
                )
                return name

            path = "/admin/v2/persistent/{}/subscription/{}/skipByMessageIds"
            rest_topic = SKIP_TOPIC.removeprefix("persistent://")
            engine = _engine_of(broker.metadata)
            with TestClient(app) as client:

                def via_broker(subscription: str, ids: list[Any]) -> None:
                    outcome = _skip_messages(broker, subscription, ids)
                    assert list(outcome.skipped) == ids, outcome

                def via_rest(subscription: str, ids: list[Any]) -> None:
                    answer = client.post(
                        path.format(rest_topic, subscription),
                        json=[message_id.to_base64() for message_id in ids],
                    )
                    assert answer.status_code == 204, (answer.status_code, answer.text)

                paths: dict[str, Callable[[str, list[Any]], None]] = {
                    "broker": via_broker,
                    "rest": via_rest,
                }
                # Statements: the first id of partitions 0 and 1 on a fresh subscription.
                first = [by_partition[0][0], by_partition[1][0]]
                statements: dict[str, list[int]] = {name: [] for name in paths}
                for i in range(sizes.statement_skips):
                    for name, call in paths.items():
                        subscription = subscribe(f"statements-{name}-{i}")
                        with _counting(engine) as seen:
                            call(subscription, first)
                        statements[name].append(len(seen))
                # Latency: each skip takes the next ids of two partitions, never skipped
                # before on its subscription; the two paths interleave.
                for name in paths:
                    subscribe(f"latency-{name}")
                seconds: dict[str, list[float]] = {name: [] for name in paths}
                cpu: dict[str, list[float]] = {name: [] for name in paths}
                taken = dict.fromkeys(range(PARTITIONS), 0)
                for k in range(sizes.warm_skips + sizes.timed_skips):
                    a, b = k % PARTITIONS, (k + 1) % PARTITIONS
                    ids = [by_partition[a][taken[a]], by_partition[b][taken[b]]]
                    taken[a] += 1
                    taken[b] += 1
                    order = list(paths) if k % 2 == 0 else list(reversed(paths))
                    for name in order:
                        started, cpu_started = time.perf_counter(), time.process_time()
                        paths[name](f"latency-{name}", ids)
                        elapsed = time.perf_counter() - started
                        if k >= sizes.warm_skips:
                            seconds[name].append(elapsed)
                            cpu[name].append(time.process_time() - cpu_started)
        finally:
            broker.close()
    return {
        "statements": statements,
        "latency_ms": {name: 1000 * statistics.median(v) for name, v in seconds.items()},
        "cpu_ms": {name: 1000 * statistics.median(v) for name, v in cpu.items()},
        "skips": sizes.timed_skips,
    }


def child_read(sizes: Sizes, work: Path) -> dict[str, Any]:
    from cursorops.core.domain.config import Config
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker

    config = Config.from_home(work / "read")
    with Broker(config) as broker:
        _installation(broker)
        _owner(broker, "admin").create_topic(ROLE, READ_TOPIC, partitions=0)
        payloads = [b"%032d" % i for i in range(sizes.read_messages)]
        _owner(broker, "producing").produce_columns(ROLE, READ_TOPIC, payloads, batch_size=10)

        def one_pass(name: str, *, columnar: bool, acknowledge: bool) -> tuple[float, float]:
            """Messages per second (wall) and CPU microseconds per message."""
            _owner(broker, "admin").create_subscription(
                ROLE, READ_TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
            started, cpu = time.perf_counter(), time.process_time()
            dispatcher = _owner(broker, "reading").dispatcher(READER, READ_TOPIC, name)
            consumer = dispatcher.subscribe("bench", receiver_queue_size=1000)
            delivered = 0
            while True:
                chunk = consumer.receive_batch(1000) if columnar else consumer.receive_many(1000)
                if not len(chunk):
                    break
                delivered += len(chunk)
                if acknowledge:
                    consumer.acknowledge(chunk)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu
            consumer.close()
            assert delivered == sizes.read_messages, delivered
            return sizes.read_messages / elapsed, 1e6 * cpu / sizes.read_messages

        one_pass("warm-up", columnar=True, acknowledge=False)
        results: dict[str, Any] = {}
        for key, columnar, acknowledge in (
            ("many_ack", False, True),
            ("batch_no_ack", True, False),
        ):
            results[key], results[f"cpu_us_{key}"] = one_pass(
                key, columnar=columnar, acknowledge=acknowledge
            )
        return results


def child_acks(sizes: Sizes, work: Path) -> dict[str, Any]:
    from cursorops.core.domain.config import Config
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.producer import OutgoingMessage

    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with Broker(Config.from_home(work / "consumer")) as broker:
        _installation(broker)
        _owner(broker, "admin").create_topic(ROLE, ACK_TOPIC, partitions=0)
        _owner(broker, "producing").produce(
            ROLE, ACK_TOPIC, [OutgoingMessage(b"%d" % i) for i in range(1000)]
        )
        _owner(broker, "admin").create_subscription(
            ROLE, ACK_TOPIC, "bench", SubscriptionType.SHARED, initial_position="earliest"
        )
        consumer = (
            _owner(broker, "reading")
            .dispatcher(READER, ACK_TOPIC, "bench")
            .subscribe("bench", receiver_queue_size=1000)
        )
        received = consumer.receive_many(sizes.consumer_acks)
        assert len(received) == sizes.consumer_acks, len(received)
        started, cpu = time.perf_counter(), time.process_time()
        for message in received:
            consumer.acknowledge(message)
        results["consumer"] = len(received) / (time.perf_counter() - started)
        results["cpu_us_consumer"] = 1e6 * (time.process_time() - cpu) / len(received)
        consumer.close()
    return results


def child_main(kind: str, backend: str, quick: bool, work: Path) -> int:
    import cursorops.core

    sizes = QUICK if quick else FULL
    load = os.getloadavg()[0]
    cpu = time.process_time()
    started = time.perf_counter()
    if kind == "skip":
        results = child_skip(sizes, backend, work)
    elif kind == "read":
        results = child_read(sizes, work)
    else:
        results = child_acks(sizes, work)
    results["core"] = str(Path(cursorops.core.__file__).resolve())
    results["load"] = max(load, os.getloadavg()[0])
    results["seconds"] = time.perf_counter() - started
    results["cpu_seconds"] = time.process_time() - cpu
    print(json.dumps(results), flush=True)
    return 0


# == the parent: the worktree, the rounds, the section ================================


@dataclass(frozen=True)
class Tree:
    label: str
    """``base`` or ``current``."""
    commit: str
    path: Path


@dataclass(frozen=True)
class Child:
    kind: str
    backend: str


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@contextmanager
def base_worktree(revision: str, parent: Path) -> Iterator[Path]:
    """``revision`` checked out (detached) into a temporary worktree, removed afterwards."""
    path = parent / "base"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(path), revision],
        check=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False
        )
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=False)


def run_child(tree: Tree, child: Child, quick: bool, work: Path) -> dict[str, Any]:
    """One measurement in a fresh interpreter importing only ``tree``'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree.path), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", child.kind]
    command += ["--backend", child.backend, "--work", str(work)]
    if quick:
        command.append("--quick")
    done = subprocess.run(
        command,
        cwd=tree.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{tree.label} {child.kind} ({child.backend}) failed with {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1])
    if not Path(result["core"]).is_relative_to(tree.path.resolve()):
        raise RuntimeError(f"{tree.label} child imported {result['core']}, not {tree.path}")
    return result


@dataclass(frozen=True)
class Figure:
    what: str
    unit: str
    base: list[float]
    current: list[float]
    loads: list[float]
    """1-minute load average of every child that measured it (the higher of start and end)."""
    higher_is_better: bool
    exact: bool = False
    """A count (statements): no range, no rounding."""
    cpu_unit: str = ""
    cpu_base: list[float] = field(default_factory=list)
    """CPU time of the measuring process per operation (all its threads): what the code
    costs, less exposed than wall time to waiting for a core or for the shared disk."""
    cpu_current: list[float] = field(default_factory=list)

    @property
    def cpu_ratio(self) -> float | None:
        if not self.cpu_base or not self.cpu_current:
            return None
        return statistics.median(self.cpu_current) / statistics.median(self.cpu_base)

    @property
    def ratio(self) -> float:
        return statistics.median(self.current) / statistics.median(self.base)

    @property
    def slower(self) -> bool:
        """Worse by more than 5% (medians of the same run)."""
        if self.higher_is_better:
            return self.ratio < 0.95
        return self.ratio > 1.05


def _cell(values: list[float], unit: str, exact: bool) -> str:
    from benchmarks.report import Runs, number

    if exact:
        low, high = min(values), max(values)
        spread = "" if low == high else f" ({low:g}–{high:g})"
        return f"{statistics.median(values):g}{spread}"
    suffix = f" {unit}" if unit else ""
    runs = Runs.of(values)
    if len(values) == 1:
        return f"{number(runs.median)}{suffix}"
    return f"{number(runs.median)}{suffix} ({number(runs.low)}–{number(runs.high)})"


def _figures(results: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[Figure]:
    """``results[(tree label, kind, backend)]``: one dict per round."""

    def values(result: dict[str, Any], keys: tuple[str, ...]) -> list[float]:
        value: Any = result
        for key in keys:
            value = value[key]
        return [float(v) for v in value] if isinstance(value, list) else [float(value)]

    def pick(kind: str, backend: str, *keys: str) -> tuple[list[float], list[float], list[float]]:
        out: dict[str, list[float]] = {}
        for label in ("base", "current"):
            out[label] = [
                v for r in results.get((label, kind, backend), []) for v in values(r, keys)
            ]
        loads = [
            r["load"]
            for label in ("base", "current")
            for r in results.get((label, kind, backend), [])
        ]
        return out["base"], out["current"], loads

    figures: list[Figure] = []
    backends = sorted({b for (_, kind, b) in results if kind == "skip"}, reverse=True)
    for backend in backends:
        store = "SQLite" if backend == "sqlite" else "PostgreSQL"
        for path, label in (("broker", "Broker path (`skip_messages`)"), ("rest", "REST route")):
            base, current, loads = pick("skip", backend, "statements", path)
            figures.append(
                Figure(
                    f"statements per 2-id skip, {label}, {store}",
                    "",
                    base,
                    current,
                    loads,
                    higher_is_better=False,
                    exact=True,
                )
            )
        for path, label in (
            ("broker", "Broker path (`skip_messages`)"),
            ("rest", "REST (`TestClient`)"),
        ):
            base, current, loads = pick("skip", backend, "latency_ms", path)
            cpu_base, cpu_current, _ = pick("skip", backend, "cpu_ms", path)
            figures.append(
                Figure(
                    f"skip latency, {label}, {store}",
                    "ms",
                    base,
                    current,
                    loads,
                    higher_is_better=False,
                    cpu_unit="ms",
                    cpu_base=cpu_base,
                    cpu_current=cpu_current,
                )
            )
    for key, label in (
        ("many_ack", "read: `receive_many(1000)` + `acknowledge` each chunk"),
        ("batch_no_ack", "read: `receive_batch(1000)`, no acknowledgement"),
    ):
        base, current, loads = pick("read", "sqlite", key)
        cpu_base, cpu_current, _ = pick("read", "sqlite", f"cpu_us_{key}")
        figures.append(
            Figure(
                label,
                "msg/s",
                base,
                current,
                loads,
                higher_is_better=True,
                cpu_unit="µs",
                cpu_base=cpu_base,
                cpu_current=cpu_current,
            )
        )
    for key, label in (("consumer", "acks: `Consumer.acknowledge`, one message per call"),):
        base, current, loads = pick("acks", "sqlite", key)
        cpu_base, cpu_current, _ = pick("acks", "sqlite", f"cpu_us_{key}")
        figures.append(
            Figure(
                label,
                "acks/s",
                base,
                current,
                loads,
                higher_is_better=True,
                cpu_unit="µs",
                cpu_base=cpu_base,
                cpu_current=cpu_current,
            )
        )
    return [f for f in figures if f.base and f.current]


def render(run: dict[str, Any], figures: list[Figure]) -> str:
    """The section: how it was measured, the table, and what got slower."""
    from benchmarks import machine, report

    host = machine.describe()
    base, current, rounds, pg = run["base"], run["current"], run["rounds"], run["pg"]
    sizes = QUICK if run["quick"] else FULL
    size = "smoke sizes (`--quick`)" if run["quick"] else "full size"
    when, seconds = run["when"], run["seconds"]
    load = ", ".join(f"{value:.2f}" for value in run["load"])
    lines = [
        f"## {TITLE}",
        "",
        f"`python -m benchmarks.before_after --base {base}`, {size}, run {when}, "
        f"{seconds / 60:.1f} min; {rounds} rounds, each running every measurement once on "
        f"the base revision `{base}` and once on the current code `{current}` "
        "in fresh processes, alternating which goes first; medians over the rounds, range in "
        "brackets. The ratio is current/base of the medians of this one run.",
        "",
        f"Machine: {host.line()}. Stores on {machine.storage(tempfile.gettempdir())}"
        + (f" and a local PostgreSQL ({PG_ENV}, durability off)" if pg else "")
        + f". Load average (1, 5, 15 min) when the run ended: {load}; the "
        "column *load* is the median 1-minute load average of the processes that measured "
        "the row (2 cores, shared with other work: a load near or above 2 means waiting for "
        "a core).",
        "",
        f"Each measurement imports only its own tree (`PYTHONPATH` set to a `git worktree` of "
        f"`{base}` or to this checkout, `python -P`). Skips: a topic of {PARTITIONS} "
        f"partitions, the skipping role with only a `consume` grant on the namespace. "
        "Statements are every statement the metadata engine sends during one skip of two ids "
        "(one on each of two partitions) on a fresh subscription, counted by a SQLAlchemy "
        "`before_cursor_execute` listener (`BEGIN` counts on SQLite, where the driver sends "
        "it). The REST route is the standalone's admin app (`cursorops.wire.web.web_app`, the "
        "plugin's app without Airflow's login) called through FastAPI's `TestClient`; at the "
        "base revision it ran `plan_skip` + `skip_requires_approval` + `apply_skip`, now "
        f"`Broker.request`. Latency: the median of {sizes.timed_skips} two-id skips per "
        f"process, each on ids not skipped before (after {sizes.warm_skips} untimed), the "
        f"Broker and REST calls interleaved. Read path: {sizes.read_messages:,} messages in "
        "batches of 10 on one topic, read to the end through a Shared subscription (building "
        "the dispatcher included). Acknowledgements, durable on SQLite: "
        f"{sizes.consumer_acks} `Consumer.acknowledge` calls of one received message (the "
        "subscription transaction every consumer's acknowledgement takes). *CPU per op* is "
        "the measuring "
        "process's CPU time (all its threads) per skip, message or acknowledgement, medians "
        "likewise: what the code costs, less exposed than wall time to waiting for a core or "
        "for the shared disk (each durable acknowledgement on SQLite waits for an `fsync`).",
        "",
    ]
    rows = []
    for f in figures:
        better = "fewer" if f.exact else ("higher" if f.higher_is_better else "lower")
        ratio = f"{f.ratio:.3f}x" + (" **slower**" if f.slower and not f.exact else "")
        if f.exact and f.slower:
            ratio += " **more**"
        cpu_ratio = f.cpu_ratio
        rows.append(
            [
                f.what,
                _cell(f.base, f.unit, f.exact),
                _cell(f.current, f.unit, f.exact),
                ratio,
                better,
                _cell(f.cpu_base, f.cpu_unit, False) if f.cpu_base else "",
                _cell(f.cpu_current, f.cpu_unit, False) if f.cpu_current else "",
                "" if cpu_ratio is None else f"{cpu_ratio:.3f}x",
                f"{statistics.median(f.loads):.1f}",
            ]
        )
    lines += [
        report.table(
            [
                "measurement",
                f"base `{base}`",
                f"current `{current}`",
                "current/base",
                "better",
                "CPU per op, base",
                "CPU per op, current",
                "CPU current/base",
                "load",
            ],
            rows,
        ),
        "",
    ]
    worse = [f for f in figures if f.slower]
    if not worse:
        lines.append(
            "Nothing is slower than at the base revision by more than 5% (medians of this run)."
        )
        return "\n".join(lines)
    lines += [
        "**Slower now** (worse than at the base revision by more than 5%, medians of this run):",
        "",
    ]
    causes: dict[str, list[str]] = {}
    for f in worse:
        cpu = "" if f.cpu_ratio is None else f"; CPU time per operation {f.cpu_ratio:.3f}x"
        lines.append(f"- {f.what}: {f.ratio:.3f}x{cpu}.")
        prefix = next((p for p in CAUSES if f.what.startswith(p)), None)
        if prefix is not None:
            causes.setdefault(prefix, []).append(f.what)
    lines.append("")
    for prefix, named in causes.items():
        count = f"{len(named)} row{'s' if len(named) > 1 else ''}"
        lines.append(f"Likely cause ({count} above): {CAUSES[prefix]}.")
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--base", default=DEFAULT_BASE, help=f"base revision (default {DEFAULT_BASE})"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke sizes; writes no docs unless --write"
    )
    parser.add_argument("--write", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--save", default=None, help="also write the raw results to this JSON file")
    parser.add_argument(
        "--load", default=None, help="render a run saved with --save instead of measuring"
    )
    parser.add_argument("--child", choices=("skip", "read", "acks"), help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="sqlite", help=argparse.SUPPRESS)
    parser.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every round of every child on both trees; the run as JSON-able data."""
    started = time.perf_counter()
    base_commit = _git("rev-parse", "--short", f"{args.base}^{{commit}}")
    current_commit = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--", "core", "cursorops"):
        current_commit += " with uncommitted changes"
    pg = bool(os.environ.get(PG_ENV))
    children = [Child("skip", "sqlite")]
    if pg:
        children.append(Child("skip", "postgres"))
    children += [Child("read", "sqlite"), Child("acks", "sqlite")]
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="cursorops-before-after-") as temp:
        folder = Path(temp)
        with base_worktree(args.base, folder) as base_path:
            trees = (Tree("base", base_commit, base_path), Tree("current", current_commit, REPO))
            print(
                f"base {base_commit} in {base_path}, current {current_commit} in {REPO}; "
                f"{args.rounds} rounds of {len(children)} measurements per tree",
                flush=True,
            )
            for round_number in range(args.rounds):
                order = trees if round_number % 2 == 0 else trees[::-1]
                for child in children:
                    for tree in order:
                        work = folder / f"r{round_number}-{tree.label}-{child.kind}-{child.backend}"
                        result = run_child(tree, child, args.quick, work)
                        shutil.rmtree(work, ignore_errors=True)
                        key = f"{tree.label}|{child.kind}|{child.backend}"
                        results.setdefault(key, []).append(result)
                        shown = {
                            k: v for k, v in result.items() if k not in ("core", "cpu_seconds")
                        }
                        print(
                            f"round {round_number + 1}/{args.rounds} {tree.label:7} "
                            f"{child.kind} ({child.backend}): {json.dumps(shown)}",
                            flush=True,
                        )
    return {
        "base": base_commit,
        "current": current_commit,
        "rounds": args.rounds,
        "quick": args.quick,
        "pg": pg,
        "seconds": time.perf_counter() - started,
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": list(os.getloadavg()),
        "results": results,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        return child_main(args.child, args.backend, args.quick, Path(args.work))
    if args.load:
        run = json.loads(Path(args.load).read_text())
    else:
        run = measure(args)
        if args.save:
            Path(args.save).write_text(json.dumps(run, indent=1))
    write = (not run["quick"]) if args.write is None else bool(args.write)
    if write and run["rounds"] < 3:
        print("figures written to the docs need --rounds >= 3", file=sys.stderr)
        return 2
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for key, value in run["results"].items():
        label, kind, backend = key.split("|")
        results[(label, kind, backend)] = value
    markdown = render(run, _figures(results))
    print(markdown)
    if write:
        from benchmarks.report import write_section

        print(f"wrote {write_section(SECTION, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

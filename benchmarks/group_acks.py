"""Durable acknowledgements from concurrent callers: group commit.

1, 8 and 64 threads share one ``ManagedCursor`` and acknowledge one distinct
random entry per ``acknowledge`` call, each call durable when it returns. The
cursor folds the calls queued during a write into one journal row and the
metadata store shares one transaction among cursors (``core.store.group_commit``,
``core.store.delta_journal``). On SQLite (WAL file) and on PostgreSQL (when
``CURSOROPS_BENCH_PG_URL`` or ``CURSOROPS_TEST_PG_URL`` names a server: a
fresh schema per run); the server's ``fsync`` and ``synchronous_commit`` are
read and written into the section, since with either off a commit is not
durable. After every run the cursor is reopened from a new store and every
acknowledgement checked to be there.

The same cursor is also driven by 64 asyncio tasks through
``ManagedCursor.acknowledge_async`` (Pulsar's ``acknowledgeAsync``): with one
call in flight per task, as the threads have, and with 16 in flight per task.
Every call still acknowledges one id and its future completes only once that
acknowledgement is durable.

Reference rows run the same threads through a ``GroupCommit`` whose commit
only folds their calls in memory: the ceiling that thread hand-offs under the
GIL leave, whatever the store.
"""

from __future__ import annotations

import asyncio
import os
import random
import resource
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from benchmarks import machine, report
from benchmarks.report import Runs, Stopwatch
from core.acks import cursor_codec
from core.acks.cursor import AckTarget, CursorState
from core.acks.ledger_layout import LedgerLayout
from core.acks.managed_cursor import ManagedCursor
from core.ids.position import Position
from core.store.group_commit import GroupCommit
from core.store.metadata import MetadataStore
from core.subscription import SubscriptionType

SECTION = "group_acks"
TOPIC = "persistent://bench/acks/grouped"
SUBSCRIPTION = "bench"
AIM = 50_000
"""Durable acks/s with 64 callers on PostgreSQL."""
ENTRIES = 1_000_000


@dataclass(frozen=True)
class Way:
    """How the callers call: blocking threads, or asyncio tasks with calls in flight each."""

    callers: int
    in_flight: int
    tasks: bool
    full_calls: int

    @property
    def label(self) -> str:
        if not self.tasks:
            return f"{self.callers} thread{'s' if self.callers > 1 else ''}"
        return f"{self.callers} tasks, {self.in_flight} in flight each"


WAYS = (
    Way(1, 1, False, 600),
    Way(8, 1, False, 2_400),
    Way(64, 1, False, 12_800),
    Way(64, 1, True, 12_800),
    Way(64, 16, True, 102_400),
)
QUICK_DIVISOR = 10
MEMORY = "none (in memory)"


@contextmanager
def _database(kind: str, work: Path, name: str) -> Iterator[str]:
    if kind == "SQLite":
        yield f"sqlite:///{work / f'{name}.db'}"
        return
    base = make_url(_pg_url() or "")
    schema = f"bench_{uuid.uuid4().hex}"
    admin = create_engine(base, poolclass=NullPool)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = base.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def _pg_url() -> str | None:
    return os.environ.get("CURSOROPS_BENCH_PG_URL") or os.environ.get("CURSOROPS_TEST_PG_URL")


def _install(url: str) -> MetadataStore:
    store = MetadataStore(url)
    store.create_tenant("bench")
    store.create_namespace("bench/acks")
    topic = store.create_topic(TOPIC, 0)
    store.create_subscription(
        topic.name,
        SUBSCRIPTION,
        SubscriptionType.SHARED,
        {},
        {topic.name: cursor_codec.encode(CursorState())},
    )
    return store


@dataclass(frozen=True)
class One:
    seconds: float
    batches: int
    cpu_seconds: float
    """User and system CPU time of this process during the run."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _race(way: Way, targets: Sequence[AckTarget], call: object) -> tuple[float, float]:
    """Seconds and CPU seconds for ``way``'s callers to call ``call`` once per target.

    Threads call ``call(target)`` and it returns once durable; tasks call it
    for an awaitable and keep up to ``way.in_flight`` of them pending.
    """
    if way.tasks:
        return _race_tasks(way, targets, call)
    start = threading.Barrier(way.callers + 1)

    def work(worker: int) -> None:
        start.wait()
        for target in targets[worker :: way.callers]:
            call(target)  # type: ignore[operator]

    pool = [threading.Thread(target=work, args=(w,)) for w in range(way.callers)]
    for thread in pool:
        thread.start()
    cpu = _cpu()
    with Stopwatch() as watch:
        start.wait()
        for thread in pool:
            thread.join()
    return watch.seconds, _cpu() - cpu


def _race_tasks(way: Way, targets: Sequence[AckTarget], call: object) -> tuple[float, float]:
    async def work(worker: int) -> None:
        pending: list[asyncio.Future[None]] = []
        for target in targets[worker :: way.callers]:
            pending.append(call(target))  # type: ignore[operator]
            if len(pending) >= way.in_flight:
                await pending.pop(0)
        await asyncio.gather(*pending)

    async def everyone() -> None:
        await asyncio.gather(*(work(w) for w in range(way.callers)))

    cpu = _cpu()
    with Stopwatch() as watch:
        asyncio.run(everyone())
    return watch.seconds, _cpu() - cpu


def _targets(calls: int, seed: int) -> list[AckTarget]:
    entries = random.Random(seed).sample(range(ENTRIES), calls)
    return [AckTarget(Position(1, e), -1, 0) for e in entries]


def run_once(url: str, way: Way, calls: int, seed: int) -> One:
    layout = LedgerLayout.of([(1, ENTRIES)])
    store = _install(url)
    try:
        cursor = ManagedCursor.open(store, TOPIC, SUBSCRIPTION, layout)
        targets = _targets(calls, seed)
        before = store._delta_commits.batches
        if way.tasks:
            seconds, cpu = _race(way, targets, lambda t: cursor.acknowledge_async([t]))
        else:
            seconds, cpu = _race(way, targets, lambda t: cursor.acknowledge([t]))
        batches = store._delta_commits.batches - before
    finally:
        store.close()
    with MetadataStore(url) as again:
        state = ManagedCursor.open(again, TOPIC, SUBSCRIPTION, layout).state
        assert all(state.is_acked(t.position, -1) for t in targets), "an acknowledgement is missing"
    return One(seconds, batches, cpu)


def run_in_memory(way: Way, calls: int, seed: int) -> One:
    """The same calls through a group commit that folds them and writes nothing."""
    layout = LedgerLayout.of([(1, ENTRIES)])
    state = CursorState()

    def fold(batch: list[list[AckTarget]]) -> list[None]:
        folded = CursorState.ack_delta([t for targets in batch for t in targets])
        cursor_codec.encode(folded)
        state.merge(folded, layout)
        return [None] * len(batch)

    commits: GroupCommit[list[AckTarget], None] = GroupCommit(fold)
    targets = _targets(calls, seed)
    if way.tasks:
        seconds, cpu = _race(way, targets, lambda t: commits.submit_async([t]))
    else:
        seconds, cpu = _race(way, targets, lambda t: commits.submit([t]))
    assert all(state.is_acked(t.position, -1) for t in targets)
    return One(seconds, commits.batches, cpu)


def _server_durability(url: str) -> str:
    """The PostgreSQL server's durability settings, as a phrase for the section."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            fsync = connection.execute(text("SHOW fsync")).scalar_one()
            synchronous = connection.execute(text("SHOW synchronous_commit")).scalar_one()
    finally:
        engine.dispose()
    durable = fsync == "on" and synchronous != "off"
    return f"`fsync={fsync}`, `synchronous_commit={synchronous}`" + (
        "" if durable else ": **commits on this server are not durable**"
    )


def _ways(kind: str) -> tuple[Way, ...]:
    """The threads only in memory: there a commit takes microseconds, so asyncio
    batches stay tiny and measure the hand-off between the loop and the writer thread,
    not a ceiling."""
    return tuple(w for w in WAYS if not w.tasks) if kind == MEMORY else WAYS


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Durable acknowledgements from concurrent callers.", argv)
    host = machine.describe()
    divisor = QUICK_DIVISOR if options.quick else 1
    kinds = ["SQLite"] + (["PostgreSQL"] if _pg_url() else [])
    results: dict[tuple[str, Way], list[One]] = {}
    with report.work_dir(options, "group-acks") as work:
        for run in range(options.runs):
            for kind in [*kinds, MEMORY]:
                for way in _ways(kind):
                    calls = way.full_calls // divisor
                    if kind == MEMORY:
                        one = run_in_memory(way, calls, seed=run)
                    else:
                        name = f"{kind}-{way.callers}-{way.in_flight}-{way.tasks}-{run}"
                        with _database(kind, work, name) as url:
                            one = run_once(url, way, calls, seed=run)
                    results.setdefault((kind, way), []).append(one)
                    print(
                        f"  run {run}: {kind}, {way.label}: {calls} acks in "
                        f"{one.seconds:.3f} s, {one.batches} commits, CPU {one.cpu_seconds:.3f} s",
                        flush=True,
                    )
        durability = _server_durability(_pg_url() or "") if _pg_url() else ""
        rows = []
        medians: dict[tuple[str, Way], float] = {}
        commit_ms: dict[tuple[str, Way], float] = {}
        cpu_per_ack: dict[tuple[str, Way], float] = {}
        for kind in [*kinds, MEMORY]:
            for way in _ways(kind):
                calls = way.full_calls // divisor
                ones = results[(kind, way)]
                seconds = Runs.of([o.seconds for o in ones])
                rate = report.rates(calls, seconds)
                medians[(kind, way)] = rate.median
                per_commit = Runs.of([calls / max(o.batches, 1) for o in ones])
                ms = Runs.of([1000 * o.seconds / max(o.batches, 1) for o in ones])
                commit_ms[(kind, way)] = ms.median
                cpu_us = Runs.of([1e6 * o.cpu_seconds / calls for o in ones])
                cpu_per_ack[(kind, way)] = cpu_us.median
                aim = (
                    report.verdict(rate.median >= AIM)
                    if kind == "PostgreSQL" and way.callers == 64
                    else ""
                )
                rows.append(
                    [
                        kind,
                        way.label,
                        f"{calls:,}",
                        seconds.cell("s"),
                        rate.cell(),
                        per_commit.cell(digits=2),
                        ms.cell(digits=2),
                        cpu_us.cell(digits=2),
                        aim,
                    ]
                )
        lines = report.preamble(
            "Durable acknowledgements: group commit", "group_acks", host, options, work
        )
        lines += [
            "Callers share one `ManagedCursor` on a fresh metadata store and each call "
            "acknowledges one distinct random entry of a 1,000,000-entry ledger. Threads call "
            "`acknowledge`, which returns once the acknowledgement is durable; asyncio tasks "
            "call `acknowledge_async` (Pulsar's `acknowledgeAsync`), whose future completes "
            "once it is durable, with one call or 16 calls in flight per task. SQLite runs in "
            "WAL mode at its default synchronous=FULL; PostgreSQL runs on the same machine, "
            + (durability or "not configured for this run")
            + ". The calls queued while a write is in flight fold into one journal row "
            "(`core.acks.managed_cursor`), written in one statement "
            "(`core.store.delta_journal`). Every acknowledgement is checked after each run "
            "from a new store. Journal compaction every 512 rows is included. "
            f"*{MEMORY}* runs the same threads through a `GroupCommit` that only "
            "folds their calls in memory: what thread hand-offs under the GIL allow, "
            "whatever the store. *ms per commit* is wall time over commits; *CPU per ack* is this "
            "process's user and system time over acknowledgements.",
            "",
            report.table(
                [
                    "store",
                    "callers",
                    "acks",
                    "seconds",
                    "acks/s",
                    "acks per commit",
                    "ms per commit",
                    "CPU µs per ack",
                    f"vs {AIM:,}/s (64 callers, PostgreSQL)",
                ],
                rows,
            ),
            "",
        ]
        if "PostgreSQL" in kinds:
            threads, single, pipelined = WAYS[2], WAYS[3], WAYS[4]
            bound = 64 / (commit_ms[("PostgreSQL", single)] / 1000)
            lines += [
                "With 64 callers on PostgreSQL: "
                f"{report.number(medians[('PostgreSQL', threads)])} acks/s from threads and "
                f"{report.number(medians[('PostgreSQL', single)])} from tasks with one call in "
                f"flight each; {report.number(medians[('PostgreSQL', pipelined)])} from tasks "
                f"with 16 in flight each, against the {AIM:,}/s aim. With one call in flight "
                "per caller the rate cannot pass callers over the time a call waits (Little's "
                "law): a caller's next call starts after its commit, so a commit holds about "
                "the callers that queued during the previous one, and at the "
                f"{commit_ms[('PostgreSQL', single)]:.1f} ms per commit measured here 64 callers "
                f"allow at most about {report.number(bound)} acks/s whatever the code does. "
                "With calls in flight, a commit holds hundreds of acknowledgements and the "
                "rate is bounded by CPU per acknowledgement instead "
                f"({report.number(cpu_per_ack[('PostgreSQL', pipelined)])} µs here), "
                "the in-memory threads' ceiling "
                f"({report.number(medians[(MEMORY, threads)])} acks/s for 64 threads) no "
                "longer applying.",
                "",
            ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

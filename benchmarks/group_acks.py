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

A reference row runs the same threads through a ``GroupCommit`` whose commit
only folds the deltas in memory: the ceiling that thread hand-offs under the
GIL leave, whatever the store.
"""

from __future__ import annotations

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
from core import cursor_codec
from core.cursor import AckTarget, CursorState
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor
from core.position import Position
from core.store.group_commit import GroupCommit
from core.store.metadata import MetadataStore
from core.subscription import SubscriptionType

SECTION = "group_acks"
TOPIC = "persistent://bench/acks/grouped"
SUBSCRIPTION = "bench"
CALLERS = (1, 8, 64)
AIM = 50_000
"""Durable acks/s with 64 callers on PostgreSQL."""
ENTRIES = 1_000_000
FULL_CALLS = {1: 600, 8: 2_400, 64: 12_800}
QUICK_CALLS = {1: 100, 8: 400, 64: 1_280}
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


def _race(callers: int, targets: Sequence[AckTarget], call: object) -> tuple[float, float]:
    """Seconds and CPU seconds for ``callers`` threads to call ``call`` once per target."""
    start = threading.Barrier(callers + 1)

    def work(worker: int) -> None:
        start.wait()
        for target in targets[worker::callers]:
            call(target)  # type: ignore[operator]

    pool = [threading.Thread(target=work, args=(w,)) for w in range(callers)]
    for thread in pool:
        thread.start()
    cpu = _cpu()
    with Stopwatch() as watch:
        start.wait()
        for thread in pool:
            thread.join()
    return watch.seconds, _cpu() - cpu


def _targets(calls: int, seed: int) -> list[AckTarget]:
    entries = random.Random(seed).sample(range(ENTRIES), calls)
    return [AckTarget(Position(1, e), -1, 0) for e in entries]


def run_once(url: str, callers: int, calls: int, seed: int) -> One:
    layout = LedgerLayout.of([(1, ENTRIES)])
    store = _install(url)
    try:
        cursor = ManagedCursor.open(store, TOPIC, SUBSCRIPTION, layout)
        targets = _targets(calls, seed)
        before = store._delta_commits.batches
        seconds, cpu = _race(callers, targets, lambda t: cursor.acknowledge([t]))
        batches = store._delta_commits.batches - before
    finally:
        store.close()
    with MetadataStore(url) as again:
        state = ManagedCursor.open(again, TOPIC, SUBSCRIPTION, layout).state
        assert all(state.is_acked(t.position, -1) for t in targets), "an acknowledgement is missing"
    return One(seconds, batches, cpu)


def run_in_memory(callers: int, calls: int, seed: int) -> One:
    """The same calls through a group commit that folds deltas and writes nothing."""
    layout = LedgerLayout.of([(1, ENTRIES)])
    state = CursorState()

    def fold(batch: list[CursorState]) -> list[None]:
        folded = CursorState()
        for delta in batch:
            folded.merge(delta, None)
        cursor_codec.encode(folded)
        state.merge(folded, layout)
        return [None] * len(batch)

    commits: GroupCommit[CursorState, None] = GroupCommit(fold)
    targets = _targets(calls, seed)
    seconds, cpu = _race(callers, targets, lambda t: commits.submit(CursorState.ack_delta([t])))
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


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Durable acknowledgements from concurrent callers.", argv)
    host = machine.describe()
    plan = QUICK_CALLS if options.quick else FULL_CALLS
    kinds = ["SQLite"] + (["PostgreSQL"] if _pg_url() else [])
    results: dict[tuple[str, int], list[One]] = {}
    with report.work_dir(options, "group-acks") as work:
        for run in range(options.runs):
            for kind in [*kinds, MEMORY]:
                for callers in CALLERS:
                    if kind == MEMORY:
                        one = run_in_memory(callers, plan[callers], seed=run)
                    else:
                        with _database(kind, work, f"{kind}-{callers}-{run}") as url:
                            one = run_once(url, callers, plan[callers], seed=run)
                    results.setdefault((kind, callers), []).append(one)
                    print(
                        f"  run {run}: {kind}, {callers} callers: {plan[callers]} acks in "
                        f"{one.seconds:.3f} s, {one.batches} commits, CPU {one.cpu_seconds:.3f} s",
                        flush=True,
                    )
        durability = _server_durability(_pg_url() or "") if _pg_url() else ""
        rows = []
        medians: dict[tuple[str, int], float] = {}
        for kind in [*kinds, MEMORY]:
            for callers in CALLERS:
                ones = results[(kind, callers)]
                seconds = Runs.of([o.seconds for o in ones])
                rate = report.rates(plan[callers], seconds)
                medians[(kind, callers)] = rate.median
                per_commit = Runs.of([plan[callers] / max(o.batches, 1) for o in ones])
                commit_ms = Runs.of([1000 * o.seconds / max(o.batches, 1) for o in ones])
                cpu_us = Runs.of([1e6 * o.cpu_seconds / plan[callers] for o in ones])
                aim = (
                    report.verdict(rate.median >= AIM)
                    if kind == "PostgreSQL" and callers == 64
                    else ""
                )
                rows.append(
                    [
                        kind,
                        f"{callers}",
                        f"{plan[callers]:,}",
                        seconds.cell("s"),
                        rate.cell(),
                        per_commit.cell(digits=2),
                        commit_ms.cell(digits=2),
                        cpu_us.cell(digits=2),
                        aim,
                    ]
                )
        lines = report.preamble(
            "Durable acknowledgements: group commit", "group_acks", host, options, work
        )
        lines += [
            "Threads share one `ManagedCursor` on a fresh metadata store and each calls "
            "`acknowledge` with one distinct random entry of a 1,000,000-entry ledger; every "
            "call is durable when it returns (SQLite in WAL mode at its default "
            "synchronous=FULL; PostgreSQL on the same machine, "
            + (durability or "not configured for this run")
            + "). The calls queued while a write is in flight fold into one journal row "
            "(`core.managed_cursor`), written in one statement "
            "(`core.store.delta_journal`). Every acknowledgement is checked after each run "
            "from a new store. Journal compaction every 512 rows is included. "
            f"*{MEMORY}* runs the same threads and deltas through a `GroupCommit` that only "
            "folds them in memory: what thread hand-offs under the GIL allow, whatever the "
            "store. *ms per commit* is wall time over commits; *CPU per ack* is this "
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
                    f"vs {AIM:,}/s (64, PostgreSQL)",
                ],
                rows,
            ),
            "",
        ]
        if ("PostgreSQL", 64) in medians:
            ceiling = medians[(MEMORY, 64)]
            lines += [
                f"With 64 callers on PostgreSQL: {report.number(medians[('PostgreSQL', 64)])} "
                f"acks/s against the {AIM:,}/s aim; the same threads with no store at all "
                f"reach {report.number(ceiling)}/s on this machine at this load"
                + (
                    ", so the aim is out of reach here whatever the store does."
                    if ceiling < AIM
                    else "."
                )
                + " Each caller has one call in flight, so while one commit is on its way "
                "the other callers queue for the next: about half the callers per commit, "
                "and the rate is bounded by callers / 2 per commit time (the fsync or WAL "
                "flush, plus the wait for the GIL when the server answers).",
                "",
            ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

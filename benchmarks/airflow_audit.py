"""``cursorops_backlog_audit`` on the embedded default: one Spark job for all the topics.

Airflow is started as ``make up`` starts it (:func:`cursorops.airflow.local_airflow.start_airflow`:
standalone, LocalExecutor, SQLite, other DAGs paused, and the Spark Connect server named by
``spark_connect_default``). For each size, a namespace of ``topics`` non-partitioned
topics of ``messages`` messages each (32-byte payloads in batches of 10) is audited: two
subscriptions per topic, ``all`` at earliest and ``recent`` created half-way (so it
owes half the messages). Each run triggers the DAG on that namespace and times it from
the trigger to the run's success; the ``analyze_backlog`` task (the one Spark job) is
shown apart. Every run's history rows are checked against the exact backlog.

Progress lines: the set-up prints every 10 % of the topics made; each run prints its
wall time and the job's own summary line (from the task's log).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import machine, report
from benchmarks.airflow_phases import task_run_times
from benchmarks.report import Options, Runs
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

if TYPE_CHECKING:
    from cursorops.airflow.local_airflow import Airflow

SECTION = "airflow_audit"
DAG = "cursorops_backlog_audit"
ROLE = "admin"
SIZES = ((4, 1_000, 20.0), (100, 10_000, 60.0), (1_000, 10_000, 300.0))
"""(topics, messages per topic, aim in seconds)."""
QUICK_SIZES = ((4, 1_000, 20.0), (20, 1_000, 60.0))
BATCH = 10
SUMMARY = re.compile(r"analysed \d+ partition\(s\) of \d+ topic\(s\) in one job, [\d.]+s in all")
"""The job's last progress line (``spark_apps/audit_backlog.py``)."""


@dataclass(frozen=True)
class Size:
    topics: int
    messages: int
    aim: float
    build_seconds: float
    walls: list[float]
    jobs: list[float]
    summary: str


def build(config: Config, namespace: str, topics: int, messages: int) -> float:
    """The namespace's topics and subscriptions; seconds taken."""
    started = time.monotonic()
    half = messages // 2
    with Broker(config) as broker:
        if "bench" not in broker.admin.list_tenants(ROLE):
            broker.admin.create_tenant(ROLE, "bench")
        broker.admin.create_namespace(ROLE, namespace)
        for n in range(topics):
            topic = f"persistent://{namespace}/t{n:05d}"
            broker.admin.create_topic(ROLE, topic, 0)
            broker.admin.create_subscription(
                ROLE, topic, "all", SubscriptionType.SHARED, initial_position="earliest"
            )
            body = [OutgoingMessage(b"%032d" % i) for i in range(messages)]
            broker.producing.produce(ROLE, topic, body[:half], batch_size=BATCH)
            broker.admin.create_subscription(ROLE, topic, "recent", SubscriptionType.SHARED)
            broker.producing.produce(ROLE, topic, body[half:], batch_size=BATCH)
            if (n + 1) % max(1, topics // 10) == 0:
                print(f"  {namespace}: {n + 1:,} of {topics:,} topics made", flush=True)
    return time.monotonic() - started


def check(config: Config, namespace: str, topics: int, messages: int, run_id: str) -> None:
    with Broker(config) as broker:
        for n in (0, topics - 1):
            rows = broker.analysis.backlog_history(ROLE, f"persistent://{namespace}/t{n:05d}")
            got = {r.subscription: r.messages for r in rows if r.run_id == run_id}
            assert got == {"all": messages, "recent": messages - messages // 2}, got


def audit_once(airflow: Airflow, namespace: str) -> tuple[str, float, float, str]:
    """Trigger the audit of ``namespace``: its run id, wall seconds to success, the job
    task's seconds, and the job's summary line."""
    started = time.monotonic()
    run_id = airflow.trigger(DAG, {"namespaces": [namespace]}, user="admin")
    state = airflow.wait_run(DAG, run_id, timeout=1800)
    wall = time.monotonic() - started
    assert state == "success", airflow.task_states(DAG, run_id)
    job = task_run_times(airflow.task_instances(DAG, run_id), exclude="")["analyze_backlog"]
    found = SUMMARY.search(airflow.task_log(DAG, run_id, "analyze_backlog"))
    return run_id, wall, job, found.group(0) if found else ""


def measure(sizes: Sequence[tuple[int, int, float]], options: Options, work: Path) -> list[Size]:
    from cursorops.airflow.local_airflow import start_airflow

    config = Config.from_home(work / "cursorops")
    built = {}
    for topics, messages, _aim in sizes:
        namespace = f"bench/audit-{topics}x{messages}"
        built[namespace] = build(config, namespace, topics, messages)
    airflow = start_airflow(
        work / "stack",
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": config.ledger_root,
            "CURSOROPS_AUDIT_SCHEDULE": "none",
        },
        wait_for_dag=DAG,
        only_dag=True,
        progress=lambda text: print(f"  {text}", flush=True),
    )
    out = []
    try:
        for topics, messages, aim in sizes:
            namespace = f"bench/audit-{topics}x{messages}"
            walls, jobs, summary = [], [], ""
            for run in range(options.runs):
                run_id, wall, job, said = audit_once(airflow, namespace)
                check(config, namespace, topics, messages, run_id)
                walls.append(wall)
                jobs.append(job)
                summary = said
                print(
                    f"  {topics:,} topics x {messages:,}: run {run}: {wall:.1f} s "
                    f"(job task {job:.1f} s); {said}",
                    flush=True,
                )
            out.append(Size(topics, messages, aim, built[namespace], walls, jobs, summary))
    finally:
        airflow.stop()
    return out


def render(host: machine.Machine, options: Options, work: Path, sizes: list[Size]) -> str:
    lines = report.preamble(
        "Airflow: cursorops_backlog_audit, one Spark job for all topics",
        "airflow_audit",
        host,
        options,
        work,
    )
    rows = [
        [
            f"{s.topics:,}",
            f"{s.messages:,}",
            f"{s.topics * s.messages:,}",
            Runs.of(s.walls).cell("s"),
            Runs.of(s.jobs).cell("s"),
            f"{s.build_seconds:.0f} s",
            f"< {s.aim:g} s: {report.verdict(Runs.of(s.walls).median < s.aim)}",
        ]
        for s in sizes
    ]
    lines += [
        f"`{DAG}` on Airflow as `make up` starts it (standalone, LocalExecutor, SQLite "
        "metadata; cursorops on SQLite), with the Spark Connect server it starts: the "
        "`analyze_backlog` task is one `spark_apps/audit_backlog.py` job over every segment of "
        "every topic of the namespace, with the cursors of all subscriptions. Non-partitioned "
        f"topics, 32-byte messages in batches of {BATCH}, two Shared subscriptions each "
        "(one owing every message, one half). Wall is trigger → run success (list_topics, "
        "the job, record_history, check_thresholds, Airflow's scheduling between them); the "
        "job column is the `analyze_backlog` task's run time (its process start-up and DAG "
        "parse included). Each run's history rows were checked against the exact backlog.",
        "",
        report.table(
            [
                "topics",
                "messages each",
                "messages",
                "wall",
                "the Spark job's task",
                "set-up (not timed)",
                "aim",
            ],
            rows,
        ),
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "cursorops_backlog_audit on Airflow: 4, 100 and 1,000 topics, one Spark job each run.",
        argv,
    )
    host = machine.describe()
    with report.work_dir(options, "airflow-audit") as work:
        sizes = measure(QUICK_SIZES if options.quick else SIZES, options, work)
        markdown = render(host, options, work, sizes)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

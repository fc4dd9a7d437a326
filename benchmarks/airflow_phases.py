"""The phase accounting of the Airflow benchmarks: one skip run, timed in two phases.

Shared by ``benchmarks.airflow_skip`` (``cursorops_skip_messages``) and
``benchmarks.airflow_match`` (``cursorops_skip_matching``). A run is triggered
over REST as the requester and approved over REST by a second user; two
phases are timed with the clock of this process (the same machine as Airflow):

- **trigger → preview ready:** from the REST trigger until the gate task is
  ``awaiting_input`` (polled every 0.25 s);
- **approval → verified:** from the approval (sent once the scheduler has
  processed the gate's parking, and 3 s later, as Airflow 3.3.2 needs) until
  the run's end date.

Each phase is split with the task instances' own timestamps: **busy** is the
time at least one of the phase's tasks was running (the union of their
start-to-end intervals, which include each task process's start-up and DAG
parse); **Airflow overhead** is the rest of the phase, when no task ran
(scheduling, queueing, executor hand-off, the REST round trips). **Spark
start-up** is the part of busy a Spark task spent from ``spark-submit`` to its
first Spark job (:func:`spark_startup`), and **work** the remainder.

:func:`run_skips` is the benchmarks' run loop: it starts the local Airflow and,
run after run, triggers the DAG on a fresh subscription, times it and checks
what it skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import report
from benchmarks.report import Runs
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker

if TYPE_CHECKING:
    from cursorops.airflow.local_airflow import Airflow

Starter = Callable[["Airflow", dict[str, Any]], str]
"""Makes a request as a door makes it, from a run's would-be conf; its run's id."""

ROLE = "admin"
"""The role that sets a benchmark up (topics, grants, subscriptions, checks)."""
REQUESTER = "alice"
APPROVER = "bob"
GATE = "approve_skip"
APPLY_PHASE = (GATE, "apply_skip", "close_request")
"""The tasks of approval → applied and recorded, the same in every skip DAG."""

SPARK_SUBMITTED = "Spark-Submit cmd:"
"""The provider's log line just before it starts ``spark-submit``."""


def spark_conf_dir(folder: Path) -> Path:
    """A ``SPARK_CONF_DIR`` whose ``spark-defaults.conf`` turns Spark's event log on, into
    ``folder/events``: each application's start and job submission times, which
    :func:`spark_startup` reads (the jobs set Spark's log level to WARN, so their own logs
    do not say when the first job starts)."""
    events = folder / "events"
    events.mkdir(parents=True, exist_ok=True)
    (folder / "spark-defaults.conf").write_text(
        "spark.eventLog.enabled true\n"
        f"spark.eventLog.dir {events.as_uri()}\n"
        # One plain JSON-lines file per application (Spark 4 rolls and compresses by default).
        "spark.eventLog.rolling.enabled false\n"
        "spark.eventLog.compress false\n"
    )
    return folder


def _when(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@dataclass(frozen=True)
class Phase:
    wall: float
    busy: float
    """Seconds of the phase during which at least one of its tasks was running."""
    queued: float
    """Sum over its tasks of queued → start."""
    task_sum: float
    """Sum of its tasks' run times."""
    spark_startup: float = 0.0
    """Seconds of ``busy`` a Spark task spent from ``spark-submit`` to its first job."""

    @property
    def overhead(self) -> float:
        return self.wall - self.busy

    @property
    def work(self) -> float:
        return self.busy - self.spark_startup


def split(
    window: tuple[float, float],
    tis: list[dict[str, Any]],
    tasks: Sequence[str],
    spark_startup: float = 0.0,
) -> Phase:
    """Busy time and overhead of a phase from its task instances' intervals inside ``window``."""
    low, high = window
    intervals: list[tuple[float, float]] = []
    queued = task_sum = 0.0
    for ti in tis:
        if ti["task_id"] not in tasks:
            continue
        start = _when(ti.get("start_date"))
        end = _when(ti.get("end_date")) or high
        if start is None:
            continue
        queued_at = _when(ti.get("queued_when"))
        if queued_at is not None and queued_at > start:
            # A resumed gate keeps the start date of its first execution: its resumed
            # execution begins after its re-queue.
            start = queued_at
        start, end = max(start, low), min(end, high)
        if end <= start:
            continue
        intervals.append((start, end))
        task_sum += end - start
        if queued_at is not None and queued_at >= low:
            queued += max(_when(ti.get("start_date")) or start, queued_at) - queued_at
    busy = 0.0
    reach = low
    for start, end in sorted(intervals):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return Phase(high - low, busy, queued, task_sum, spark_startup)


def log_lines(text: str) -> list[tuple[float, str]]:
    """``(timestamp, event)`` of each line of a task log as the REST API returns it (JSON
    ``{"content": [{"timestamp": ..., "event": ...}, ...]}``); lines without a time are
    dropped."""
    try:
        content = json.loads(text).get("content", [])
    except ValueError:
        return []
    lines = []
    for line in content:
        if not isinstance(line, dict):
            continue
        when = _when(line.get("timestamp"))
        if when is not None:
            lines.append((when, str(line.get("event", ""))))
    return lines


def _first_job(events: Path, after: float) -> float | None:
    """Submission time of the first job of the first Spark application started at or after
    ``after`` (epoch seconds), from the event logs in ``events``."""
    apps: list[tuple[float, float | None]] = []
    for path in events.iterdir():
        started: float | None = None
        first: float | None = None
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    break  # the last line of a log still being written
                kind = event.get("Event")
                if kind == "SparkListenerApplicationStart":
                    started = event["Timestamp"] / 1000
                elif kind == "SparkListenerJobStart" and first is None:
                    first = event["Submission Time"] / 1000
                    break
        if started is not None and started >= after:
            apps.append((started, first))
    return min(apps)[1] if apps else None


def spark_startup(task_log: str, events: Path) -> tuple[float, str]:
    """Seconds from ``spark-submit``'s start (the SparkSubmitOperator task's log) to the
    submission of the application's first Spark job (its event log, see
    :func:`spark_conf_dir`), and the submit command line, which says the master, hence the
    path taken. The span is the JVM's start, the Python driver's start and imports, and the
    session's creation."""
    lines = log_lines(task_log)
    submitted = next(((t, e) for t, e in lines if SPARK_SUBMITTED in e), None)
    if submitted is None:
        raise ValueError(
            "no spark-submit command in the task log: a job run on Spark Connect is not split"
        )
    first_job = _first_job(events, submitted[0])
    if first_job is None:
        raise ValueError(f"no Spark job after {submitted[1]} in the event logs of {events}")
    return first_job - submitted[0], submitted[1].split(SPARK_SUBMITTED, 1)[1].strip()


@dataclass(frozen=True)
class TimedRun:
    run_id: str
    preview: Phase
    apply: Phase
    spark_command: str = ""
    """The Spark task's ``spark-submit`` command line ('' without a Spark task)."""
    task_seconds: dict[str, float] = field(default_factory=dict)
    """Run time of each task but the gate (whose span includes the wait for the answer)."""


def timed_run(
    airflow: Airflow,
    dag: str,
    gate: str,
    conf: dict[str, Any],
    phases: tuple[Sequence[str], Sequence[str]],
    *,
    requester: str,
    approver: str,
    spark_task: str | None = None,
    spark_events: Path | None = None,
    timeout: float = 600,
    start: Starter | None = None,
) -> TimedRun:
    """Trigger ``dag`` as ``requester`` with ``conf`` (or make the request with ``start``, as
    a door does: planned, stored, its run started), approve as ``approver``; time both
    phases. With ``spark_task`` (a task of the first phase) and ``spark_events`` (the event
    log folder of :func:`spark_conf_dir`) its Spark start-up is split off from work."""
    triggered = time.time()
    run_id = airflow.trigger(dag, conf, user=requester) if start is None else start(airflow, conf)
    airflow.wait_parked(dag, run_id, gate, timeout=timeout, poll=0.25)
    parked = time.time()
    startup, command = 0.0, ""
    if spark_task is not None and spark_events is not None:
        startup, command = spark_startup(airflow.task_log(dag, run_id, spark_task), spark_events)
    preview = split((triggered, parked), airflow.task_instances(dag, run_id), phases[0], startup)
    airflow.wait_answerable(dag, run_id, gate)
    approved = time.time()
    answer = airflow.answer(dag, run_id, gate, "Approve", user=approver)
    assert answer.status_code == 200, answer.text
    state = airflow.wait_run(dag, run_id, timeout=timeout)
    assert state == "success", airflow.task_states(dag, run_id)
    ended = _when(airflow.dag_run(dag, run_id)["end_date"])
    assert ended is not None
    tis = airflow.task_instances(dag, run_id)
    applied = split((approved, ended), tis, phases[1])
    return TimedRun(run_id, preview, applied, command, task_run_times(tis, exclude=gate))


@dataclass(frozen=True)
class SkipRuns:
    runs: list[TimedRun]
    start_seconds: float
    """How long Airflow took to start (not in any run's figures)."""

    @property
    def previews(self) -> list[Phase]:
        return [run.preview for run in self.runs]

    @property
    def applies(self) -> list[Phase]:
        return [run.apply for run in self.runs]


def run_skips(
    work: Path,
    config: Config,
    *,
    dag: str,
    topic: str,
    conf: Mapping[str, Any],
    first_phase: Sequence[str],
    runs: int,
    check: Callable[[str], None],
    environ: Mapping[str, str] | None = None,
    spark_task: str | None = None,
    spark_events: Path | None = None,
    timeout: float = 600,
    stack: str = "stack",
    start: Starter | None = None,
) -> SkipRuns:
    """Start a local Airflow under ``work`` serving ``dag`` alone (every other DAG paused),
    its tasks on the cursorops installation ``config`` (``environ`` added), then ``runs``
    times: a fresh Shared subscription at earliest on ``topic``, ``dag`` triggered on it with
    ``conf`` as :data:`REQUESTER` and approved as :data:`APPROVER`, both phases timed
    (:func:`timed_run`; ``first_phase`` up to the gate, then :data:`APPLY_PHASE`), then
    ``check(subscription)``, which asserts what the run skipped. Airflow is stopped at the
    end. ``stack`` names the Airflow's folder under ``work`` and prefixes the subscriptions,
    so that several Airflows, each started cold, can run one after the other on one topic."""
    from cursorops.airflow.local_airflow import start_airflow

    started = time.monotonic()
    airflow = start_airflow(
        work / stack,
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": config.ledger_root,
            **(environ or {}),
        },
        wait_for_dag=dag,
        only_dag=True,
        progress=lambda text: print(f"  {text}", flush=True),
    )
    start_seconds = time.monotonic() - started
    timed: list[TimedRun] = []
    try:
        for run in range(runs):
            subscription = f"{stack}-run-{run}"
            with Broker(config) as broker:
                broker.admin.create_subscription(
                    ROLE, topic, subscription, SubscriptionType.SHARED, initial_position="earliest"
                )
            timed.append(
                timed_run(
                    airflow,
                    dag,
                    GATE,
                    {"topic": topic, "subscription": subscription, **conf},
                    (first_phase, APPLY_PHASE),
                    requester=REQUESTER,
                    approver=APPROVER,
                    spark_task=spark_task,
                    spark_events=spark_events,
                    timeout=timeout,
                    start=start,
                )
            )
            check(subscription)
            print(f"  {stack} run {run}: {describe(timed[-1])}", flush=True)
    finally:
        airflow.stop()
    return SkipRuns(timed, start_seconds)


def describe(run: TimedRun) -> str:
    """Both phases of one run in a line: wall time and its split."""
    p, a = run.preview, run.apply
    startup = f"Spark start-up {p.spark_startup:.1f} s, " if p.spark_startup else ""
    return (
        f"preview ready {p.wall:.1f} s (overhead {p.overhead:.1f} s, {startup}work "
        f"{p.work:.1f} s), verified {a.wall:.1f} s after approval (overhead "
        f"{a.overhead:.1f} s, work {a.work:.1f} s)"
    )


def task_run_times(tis: list[dict[str, Any]], exclude: str) -> dict[str, float]:
    """Start to end of each finished task instance, but ``exclude``."""
    times = {}
    for ti in tis:
        start, end = _when(ti.get("start_date")), _when(ti.get("end_date"))
        if ti["task_id"] != exclude and start is not None and end is not None:
            times[ti["task_id"]] = end - start
    return times


def task_table(runs: Sequence[TimedRun], order: Sequence[str]) -> str:
    """Median run time of each task over ``runs`` (tasks in ``order``)."""
    rows = [
        [f"`{task}`", Runs.of([r.task_seconds[task] for r in runs]).cell("s")]
        for task in order
        if all(task in r.task_seconds for r in runs)
    ]
    return report.table(["task", "run time"], rows)


def phase_rows(
    named: Sequence[tuple[str, list[Phase]]], aim_seconds: float, *, spark: bool = False
) -> list[list[str]]:
    """One table row per phase: medians of wall, its split, and the verdict against the aim.
    With ``spark``, work and Spark start-up are separate columns (see :func:`phase_headers`)."""

    def runs(phases: list[Phase], attribute: str) -> Runs:
        return Runs.of([getattr(p, attribute) for p in phases])

    rows = []
    for name, phases in named:
        wall = runs(phases, "wall")
        split_cells = [runs(phases, "overhead").cell("s")]
        if spark:
            split_cells.append(runs(phases, "spark_startup").cell("s"))
        split_cells.append(runs(phases, "work").cell("s"))
        rows.append(
            [
                name,
                wall.cell("s"),
                *split_cells,
                f"{sum(p.overhead for p in phases) / sum(p.wall for p in phases):.0%}",
                runs(phases, "queued").cell("s"),
                runs(phases, "task_sum").cell("s"),
                report.verdict(wall.median < aim_seconds),
            ]
        )
    return rows


def phase_headers(aim_seconds: float, *, spark: bool = False) -> list[str]:
    return [
        "phase",
        "wall",
        "Airflow overhead",
        *(["Spark start-up"] if spark else []),
        "work",
        "overhead share",
        "queued → start, summed",
        "task run times, summed",
        f"vs < {aim_seconds:g} s",
    ]

"""``cursorops_skip_messages`` on a real Airflow: 1,000 ids over 16 partitions, two phases.

A local Airflow as ``make up`` starts it (standalone: api-server, scheduler,
dag-processor and triggerer, LocalExecutor, SQLite; other DAGs paused) serves
the repository's DAG; the cursorops home is a SQLite store beside it. A topic of
16 partitions holds 32,000 messages in batches of 10 (not timed). Each run
skips 1,000 ids on a fresh Shared subscription: 500 whole entries and 500 batch
indexes of other entries, chosen at random over every partition.

Timed per run, with the clock of this process (the same machine as Airflow):

- **trigger → preview ready:** from the REST trigger (as alice) until the gate
  task is ``awaiting_input`` (polled every 0.25 s): validate, authorize and
  plan_skip have run and the preview is the gate's body;
- **approval → verified:** from bob's REST approval (sent once the scheduler has
  processed the gate's parking, and 3 s later, as Airflow 3.3.2 needs) until
  the run's end date: the gate resumes,
  apply_skip (every partition in one transaction), verify and record.

Each phase is split with the task instances' own timestamps: **work** is the
time at least one of the phase's tasks was running (the union of their
start-to-end intervals, which include each task process's start-up and DAG
parse), **Airflow overhead** is the rest of the phase, when no task ran
(scheduling, queueing, executor hand-off, the REST round trips). The sums of
the queued waits (queued → start) and of the task durations are reported too.
This DAG runs no Spark job (requests of this size plan through ``core``), so no
phase pays Spark start-up. After each run every id is checked acknowledged.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks import machine, report
from benchmarks.report import Options, Runs
from core.broker import Broker
from core.config import Config
from core.message_id import MessageId
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

SECTION = "airflow_skip"
ROLE = "admin"
NAMESPACE = "bench/airflow"
TOPIC = f"persistent://{NAMESPACE}/skip"
DAG = "cursorops_skip_messages"
GATE = "approve_skip"
REQUESTER = "alice"
APPROVER = "bob"
AIM_SECONDS = 60.0
PHASE_1 = ("validate_request", "authorize", "plan_skip", GATE)
PHASE_2 = (GATE, "apply_skip", "verify", "record")


@dataclass(frozen=True)
class Sizes:
    partitions: int
    messages: int
    batch_size: int
    whole_entries: int
    batch_indexes: int


FULL = Sizes(partitions=16, messages=32_000, batch_size=10, whole_entries=500, batch_indexes=500)
QUICK = Sizes(partitions=4, messages=2_000, batch_size=10, whole_entries=50, batch_indexes=50)


def build_topic(broker: Broker, sizes: Sizes) -> list[MessageId]:
    broker.create_tenant(ROLE, "bench")
    broker.create_namespace(ROLE, NAMESPACE)
    for user in (REQUESTER, APPROVER):
        broker.grant_permission(ROLE, NAMESPACE, user, ["consume"])
    broker.create_topic(ROLE, TOPIC, partitions=sizes.partitions)
    messages = [OutgoingMessage(b"%016d" % i, key=f"k{i % 97}") for i in range(sizes.messages)]
    return broker.produce(ROLE, TOPIC, messages, batch_size=sizes.batch_size)


def choose_ids(ids: list[MessageId], sizes: Sizes, seed: int) -> list[MessageId]:
    """Whole entries and batch indexes of other entries, at random over every partition."""
    entries: dict[tuple[int, int, int], list[MessageId]] = {}
    for mid in ids:
        entries.setdefault((mid.partition, mid.ledger_id, mid.entry_id), []).append(mid)
    rng = random.Random(seed)
    picked = rng.sample(sorted(entries), sizes.whole_entries + sizes.batch_indexes)
    chosen = [
        MessageId(ledger_id=ledger, entry_id=entry, partition=p, batch_index=-1)
        if n < sizes.whole_entries
        else rng.choice(entries[key])
        for n, key in enumerate(picked)
        for p, ledger, entry in [key]
    ]
    assert {m.partition for m in chosen} == set(range(sizes.partitions))
    return chosen


def _when(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@dataclass(frozen=True)
class Phase:
    wall: float
    work: float
    """Seconds of the phase during which at least one of its tasks was running."""
    queued: float
    """Sum over its tasks of queued → start."""
    task_sum: float
    """Sum of its tasks' run times."""

    @property
    def overhead(self) -> float:
        return self.wall - self.work


def split(window: tuple[float, float], tis: list[dict[str, Any]], tasks: Sequence[str]) -> Phase:
    """Work and overhead of a phase from its task instances' intervals inside ``window``."""
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
    return Phase(high - low, busy, queued, task_sum)


@dataclass(frozen=True)
class Results:
    preview: list[Phase]
    apply: list[Phase]
    start_seconds: float


def measure(sizes: Sizes, options: Options, work: Path) -> Results:
    from airflow_glue.local_airflow import start_airflow

    config = Config.from_home(work / "cursorops")
    with Broker(config) as broker:
        print(f"producing {sizes.messages:,} messages over {sizes.partitions} partitions")
        chosen = choose_ids(build_topic(broker, sizes), sizes, seed=5)
    triplets = [m.triplet() for m in chosen]
    started = time.monotonic()
    airflow = start_airflow(
        work / "stack",
        {
            "CURSOROPS_HOME": str(config.home),
            "CURSOROPS_METADATA_URL": config.metadata_url,
            "CURSOROPS_LEDGER_ROOT": config.ledger_root,
        },
        only_dag=True,
        progress=lambda text: print(f"  {text}", flush=True),
    )
    start_seconds = time.monotonic() - started
    previews: list[Phase] = []
    applies: list[Phase] = []
    try:
        for run in range(options.runs):
            subscription = f"run-{run}"
            with Broker(config) as broker:
                broker.create_subscription(
                    ROLE, TOPIC, subscription, SubscriptionType.SHARED, initial_position="earliest"
                )
            conf = {
                "topic": TOPIC,
                "subscription": subscription,
                "message_ids": triplets,
                "reason": "benchmark",
            }
            triggered = time.time()
            run_id = airflow.trigger(DAG, conf, user=REQUESTER)
            airflow.wait_parked(DAG, run_id, GATE, poll=0.25)
            parked = time.time()
            previews.append(
                split((triggered, parked), airflow.task_instances(DAG, run_id), PHASE_1)
            )
            airflow.wait_answerable(DAG, run_id, GATE)
            approved = time.time()
            answer = airflow.answer(DAG, run_id, GATE, "Approve", user=APPROVER)
            assert answer.status_code == 200, answer.text
            state = airflow.wait_run(DAG, run_id, timeout=600)
            assert state == "success", airflow.task_states(DAG, run_id)
            ended = _when(airflow.dag_run(DAG, run_id)["end_date"])
            assert ended is not None
            applies.append(split((approved, ended), airflow.task_instances(DAG, run_id), PHASE_2))
            with Broker(config) as broker:
                check = broker.plan_skip(ROLE, TOPIC, subscription, chosen)
            assert all(item.already_acknowledged for item in check.items), "not all skipped"
            print(
                f"  run {run}: preview ready {previews[-1].wall:.1f} s "
                f"(work {previews[-1].work:.1f} s), verified {applies[-1].wall:.1f} s after "
                f"approval (work {applies[-1].work:.1f} s)",
                flush=True,
            )
    finally:
        airflow.stop()
    return Results(previews, applies, start_seconds)


def render(
    host: machine.Machine, sizes: Sizes, options: Options, work: Path, results: Results
) -> str:
    lines = report.preamble("Airflow: cursorops_skip_messages", "airflow_skip", host, options, work)
    total = sizes.whole_entries + sizes.batch_indexes

    def runs(phases: list[Phase], attribute: str) -> Runs:
        return Runs.of([getattr(p, attribute) for p in phases])

    rows = []
    for name, phases in (
        ("trigger → preview ready (gate awaiting input)", results.preview),
        ("approval → verified (run success)", results.apply),
    ):
        wall = runs(phases, "wall")
        rows.append(
            [
                name,
                wall.cell("s"),
                runs(phases, "work").cell("s"),
                runs(phases, "overhead").cell("s"),
                f"{sum(p.overhead for p in phases) / sum(p.wall for p in phases):.0%}",
                runs(phases, "queued").cell("s"),
                runs(phases, "task_sum").cell("s"),
                report.verdict(wall.median < AIM_SECONDS),
            ]
        )
    lines += [
        f"`{DAG}` on a local Airflow 3.3.2 (standalone: LocalExecutor, parallelism 4, SQLite "
        f"metadata; cursorops on SQLite), skipping {total:,} ids ({sizes.whole_entries:,} whole "
        f"entries, {sizes.batch_indexes:,} batch indexes) over {sizes.partitions} partitions of a "
        f"{sizes.messages:,}-message topic, triggered as alice and approved by bob over REST; "
        "each run on a fresh subscription, every id checked acknowledged afterwards. Airflow "
        f"took {results.start_seconds:.0f} s to start (not in the figures).",
        "",
        "**Work** is the time at least one of the phase's tasks was running (task instances' "
        "start and end dates; a task's time includes its process start-up and DAG parse); "
        "**Airflow overhead** is the rest of the phase, when no task ran (scheduling, queueing, "
        "executor hand-off). This DAG starts no Spark job at this size (plans go through "
        "`core`), so Spark start-up is 0 in both phases.",
        "",
        report.table(
            [
                "phase",
                "wall",
                "work",
                "Airflow overhead",
                "overhead share",
                "queued → start, summed",
                "task run times, summed",
                f"vs < {AIM_SECONDS:g} s",
            ],
            rows,
        ),
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    options = report.parse_options(
        "cursorops_skip_messages on Airflow: 1,000 ids over 16 partitions.", argv
    )
    host = machine.describe()
    sizes = QUICK if options.quick else FULL
    with report.work_dir(options, "airflow-skip") as work:
        results = measure(sizes, options, work)
        markdown = render(host, sizes, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

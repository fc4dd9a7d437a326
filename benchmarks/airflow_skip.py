"""``cursorops_skip_messages`` on a real Airflow: 1,000 ids over 16 partitions, two phases.

A local Airflow as ``make up`` starts it (standalone: api-server, scheduler,
dag-processor and triggerer, LocalExecutor, SQLite; other DAGs paused) serves
the repository's DAG; the cursorops home is a SQLite store beside it. A topic of
16 partitions holds 32,000 messages in batches of 10 (not timed). Each run
skips 1,000 ids on a fresh Shared subscription: 500 whole entries and 500 batch
indexes of other entries, chosen at random over every partition.

Timed per run as :mod:`benchmarks.airflow_phases` says (request → preview ready: the
request is planned and stored as a door does it, its run started with the digest, and
the preview is the gate's body; approval → applied: the gate resumes, apply_skip
applies every partition in one transaction, and record), each phase split into work
and Airflow overhead.
This DAG runs no Spark job (requests of this size plan through ``core``), so no
phase pays Spark start-up. After each run every id is checked acknowledged.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import machine, report
from benchmarks.airflow_phases import (
    APPROVER,
    GATE,
    REQUESTER,
    ROLE,
    SkipRuns,
    phase_headers,
    phase_rows,
    run_skips,
)
from benchmarks.report import Options
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

if TYPE_CHECKING:
    from cursorops.airflow.local_airflow import Airflow

SECTION = "airflow_skip"
NAMESPACE = "bench/airflow"
TOPIC = f"persistent://{NAMESPACE}/skip"
DAG = "cursorops_skip_messages"
AIM_SECONDS = 60.0
PHASE_1 = (GATE,)


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
    broker.admin.create_tenant(ROLE, "bench")
    broker.admin.create_namespace(ROLE, NAMESPACE)
    for user in (REQUESTER, APPROVER):
        broker.admin.grant_permission(ROLE, NAMESPACE, user, ["consume"])
    broker.admin.create_topic(ROLE, TOPIC, partitions=sizes.partitions)
    messages = [OutgoingMessage(b"%016d" % i, key=f"k{i % 97}") for i in range(sizes.messages)]
    return broker.producing.produce(ROLE, TOPIC, messages, batch_size=sizes.batch_size)


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


def measure(sizes: Sizes, options: Options, work: Path) -> SkipRuns:
    config = Config.from_home(work / "cursorops")
    with Broker(config) as broker:
        print(f"producing {sizes.messages:,} messages over {sizes.partitions} partitions")
        chosen = choose_ids(build_topic(broker, sizes), sizes, seed=5)

    def check(subscription: str) -> None:
        with Broker(config) as broker:
            after = skips.plan_skip(broker.gated, ROLE, TOPIC, subscription, chosen)
        assert all(item.already_acknowledged for item in after.items), "not all skipped"

    def request(airflow: Airflow, conf: dict[str, Any]) -> str:
        """The request as the REST door makes it (here in the benchmark's process): planned
        once and stored bound to a new run, that run started as the requester."""
        from cursorops.core.services.broker import new_run_id, wall_clock_ms
        from cursorops.core.services.gating import Caller, Run, SkipMessages

        run = Run(DAG, new_run_id(wall_clock_ms()))
        arguments = SkipMessages(
            topic=conf["topic"],
            subscription=conf["subscription"],
            ids=tuple(chosen),
            reason=conf["reason"],
        )
        with Broker(config) as broker:
            record = broker.plan_request(
                "skip-messages", Caller(REQUESTER, REQUESTER, "rest"), arguments, run
            )
        return airflow.trigger(
            DAG, {"plan_digest": record.digest}, user=REQUESTER, run_id=run.run_id
        )

    return run_skips(
        work,
        config,
        dag=DAG,
        topic=TOPIC,
        conf={"reason": "benchmark"},
        first_phase=PHASE_1,
        runs=options.runs,
        check=check,
        start=request,
    )


def render(
    host: machine.Machine, sizes: Sizes, options: Options, work: Path, results: SkipRuns
) -> str:
    lines = report.preamble("Airflow: cursorops_skip_messages", "airflow_skip", host, options, work)
    total = sizes.whole_entries + sizes.batch_indexes

    rows = phase_rows(
        [
            ("request → preview ready (gate awaiting input)", results.previews),
            ("approval → applied and recorded (run success)", results.applies),
        ],
        AIM_SECONDS,
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
            phase_headers(AIM_SECONDS),
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

"""``cursorops_skip_matching`` on a real Airflow: a property predicate over a large topic.

A local Airflow as ``make up`` starts it (standalone: api-server, scheduler,
dag-processor and triggerer, LocalExecutor, SQLite; other DAGs paused) serves
the repository's DAG; the cursorops home is a SQLite store beside it. A topic of
16 partitions holds ``--messages`` messages (default 10,000,000; not timed),
produced in ten rounds: plain 32-byte messages in batches of 100 (the columnar
path), then 1 % as many messages carrying the property ``poison=yes`` in
batches of 10, round-robin over every partition. The predicate
``property: ["poison=yes"]`` matches exactly those (100,000 at full size).

Each run, on a fresh Shared subscription, is timed as
:mod:`benchmarks.airflow_phases` says: trigger → preview ready (validate,
authorize, the ``find_messages`` Spark job over the whole topic, plan_matched_ids, the
gate parked with its preview) and approval → applied (apply_skip in one
transaction, record). The first phase's Spark start-up runs from the provider's
``spark-submit`` log line of ``find_messages`` to the submission of Spark's
first job (Spark's event log, turned on through ``SPARK_CONF_DIR``).
Afterwards every matched id is checked acknowledged, and the exact backlog is
checked to be the messages minus the matches (nothing else acknowledged).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import machine, report
from benchmarks.airflow_phases import (
    APPLY_PHASE,
    APPROVER,
    GATE,
    REQUESTER,
    ROLE,
    SkipRuns,
    phase_headers,
    phase_rows,
    run_skips,
    spark_conf_dir,
    task_table,
)
from benchmarks.report import Options
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.services.producer import OutgoingMessage

SECTION = "airflow_match"
NAMESPACE = "bench/airflow"
TOPIC = f"persistent://{NAMESPACE}/match"
DAG = "cursorops_skip_matching"
SPARK_TASK = "find_messages"
AIM_SECONDS = 120.0
PARTITIONS = 16
ROUNDS = 10
MATCH_SHARE = 100
"""One message in this many matches."""
PROPERTY = "poison=yes"
FULL_MESSAGES = 10_000_000
QUICK_MESSAGES = 200_000
PHASE_1 = ("validate_request", "authorize", SPARK_TASK, "plan_matched_ids", GATE)


def build_topic(broker: Broker, messages: int) -> list[MessageId]:
    """``messages`` messages over :data:`PARTITIONS` partitions; returns the matching ids."""
    broker.admin.create_tenant(ROLE, "bench")
    broker.admin.create_namespace(ROLE, NAMESPACE)
    for user in (REQUESTER, APPROVER):
        broker.admin.grant_permission(ROLE, NAMESPACE, user, ["consume"])
    broker.admin.create_topic(ROLE, TOPIC, partitions=PARTITIONS)
    matches = messages // MATCH_SHARE
    name, _, value = PROPERTY.partition("=")
    matched: list[MessageId] = []
    made = 0
    for round_ in range(ROUNDS):
        hits = matches * (round_ + 1) // ROUNDS - matches * round_ // ROUNDS
        plain = (messages - matches) * (round_ + 1) // ROUNDS - (
            messages - matches
        ) * round_ // ROUNDS
        filler = [OutgoingMessage(b"%032d" % (made + i)) for i in range(plain)]
        broker.producing.produce(ROLE, TOPIC, filler, batch_size=100)
        made += plain
        poison = [
            OutgoingMessage(b"%032d" % (made + i), properties={name: value}) for i in range(hits)
        ]
        matched += broker.producing.produce(ROLE, TOPIC, poison, batch_size=10)
        made += hits
        print(f"  produced {made:,} of {messages:,}", flush=True)
    return matched


def exact_backlog(config: Config, subscription: str) -> int:
    with Broker(config) as broker:
        analyses = broker.analysis.analyze_backlog(ROLE, TOPIC, subscription)
    return sum(a.result.messages for a in analyses)


@dataclass(frozen=True)
class Results:
    messages: int
    matches: int
    skips: SkipRuns
    produce_seconds: float

    @property
    def spark_command(self) -> str:
        return self.skips.runs[-1].spark_command if self.skips.runs else ""


def measure(messages: int, options: Options, work: Path) -> Results:
    config = Config.from_home(work / "cursorops")
    produced = time.monotonic()
    with Broker(config) as broker:
        print(f"producing {messages:,} messages over {PARTITIONS} partitions", flush=True)
        matched = build_topic(broker, messages)
    produce_seconds = time.monotonic() - produced
    spark_conf = spark_conf_dir(work / "spark-conf")

    def check(subscription: str) -> None:
        with Broker(config) as broker:
            after = skip_slice.plan_skip(broker.gated, ROLE, TOPIC, subscription, matched)
        assert all(item.already_acknowledged for item in after.items), "a match not skipped"
        left = exact_backlog(config, subscription)
        assert left == messages - len(matched), f"backlog {left}: more than the matches went"

    skips = run_skips(
        work,
        config,
        dag=DAG,
        topic=TOPIC,
        conf={"property": [PROPERTY], "reason": "benchmark"},
        first_phase=PHASE_1,
        runs=options.runs,
        check=check,
        # The spark-submit path this section measures (benchmarks.airflow_warm measures the
        # default, a Spark Connect server started with Airflow).
        environ={"SPARK_CONF_DIR": str(spark_conf), "CURSOROPS_SPARK_CONNECT": "0"},
        spark_task=SPARK_TASK,
        spark_events=spark_conf / "events",
        timeout=1800,
    )
    return Results(messages, len(matched), skips, produce_seconds)


def master_of(command: str) -> str:
    """The ``--master`` of a spark-submit command line ('' when absent)."""
    words = command.split()
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--master"), "")


def render(host: machine.Machine, options: Options, work: Path, results: Results) -> str:
    lines = report.preamble(
        "Airflow: cursorops_skip_matching", "airflow_match", host, options, work
    )
    rows = phase_rows(
        [
            ("trigger → preview ready (gate awaiting input)", results.skips.previews),
            ("approval → applied and recorded (run success)", results.skips.applies),
        ],
        AIM_SECONDS,
        spark=True,
    )
    master = master_of(results.spark_command) or "(none given)"
    lines += [
        f"`{DAG}` on a local Airflow 3.3.2 (standalone: LocalExecutor, parallelism 4, SQLite "
        f'metadata; cursorops on SQLite) with the predicate `property: ["{PROPERTY}"]`, which '
        f"matches exactly {results.matches:,} of the {results.messages:,} messages of a "
        f"{PARTITIONS}-partition topic (1 in {MATCH_SHARE}, spread over every partition and "
        "over the whole topic), triggered as alice and approved by bob over REST; each run on a "
        "fresh subscription; afterwards every matched id is checked acknowledged and the exact "
        "backlog is the messages minus the matches. Producing the topic took "
        f"{results.produce_seconds:.0f} s and Airflow {results.skips.start_seconds:.0f} s to start "
        "(not in the figures).",
        "",
        "The Spark job was spark-submitted "
        "(`cursorops.airflow.operators.spark.SparkJobOperator` with no Spark "
        f"Connect server configured: `spark-submit --master {master}`, the `spark_default` "
        "connection of `scripts/airflow-env.sh`) in the task's own process tree. "
        "**Airflow overhead** is the part of a phase when none of its tasks was running "
        "(scheduling, queueing, executor hand-off); **Spark start-up** is `find_messages`'s "
        "time from its `spark-submit` log line to Spark's first job (JVM, the Python driver, "
        "the session); **work** is the rest of the time tasks ran (each task's process start-up "
        "and DAG parse included); Spark's event log was on (`SPARK_CONF_DIR`) to read when "
        "the first job started. The second phase runs no Spark job (the plan is applied "
        "through `core` in one transaction).",
        "",
        report.table(phase_headers(AIM_SECONDS, spark=True), rows),
        "",
        "Each task's run time (start to end of its task instance: its process start-up and DAG "
        "parse included; `find_messages` includes its Spark start-up; the gate is left out, "
        "its span includes the wait for the answer):",
        "",
        task_table(results.skips.runs, [t for t in (*PHASE_1, *APPLY_PHASE) if t != GATE]),
        "",
    ]
    if results.messages != FULL_MESSAGES:
        lines = [line.replace("full size", f"`--messages {results.messages}`", 1) for line in lines]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument(
        "--messages",
        type=int,
        default=None,
        help=f"messages in the topic, 1 in {MATCH_SHARE} matching "
        f"(default {FULL_MESSAGES:,}; {QUICK_MESSAGES:,} with --quick)",
    )
    known, rest = sizes.parse_known_args(argv)
    options = report.parse_options(
        "cursorops_skip_matching on Airflow: a predicate matching 1 % of a 16-partition topic "
        "(--messages N, default 10,000,000).",
        rest,
    )
    messages = known.messages or (QUICK_MESSAGES if options.quick else FULL_MESSAGES)
    if messages < MATCH_SHARE * ROUNDS:
        raise SystemExit(f"--messages must be at least {MATCH_SHARE * ROUNDS}")
    host = machine.describe()
    with report.work_dir(options, "airflow-match") as work:
        results = measure(messages, options, work)
        markdown = render(host, options, work, results)
    return report.publish(options, SECTION, markdown)


if __name__ == "__main__":
    sys.exit(main())

"""The backlog audit on Spark: every subscription of every topic of some namespaces, one job.

One scan over the committed segments of all the topics answers every
subscription at once, as :mod:`cursorops.spark.analyze_backlog` does for one topic:
the driver takes a :class:`cursorops.core.domain.analysis.topic_scan.TopicScan` per topic from
:meth:`cursorops.core.services.broker.analysis.Analysis.scan_plan`, Spark reads one row per entry
(the first message of each) of every segment, tags each row with its topic partition (a
ledger belongs to exactly one), groups by topic partition, and each group calls
:func:`cursorops.spark.analyze_backlog.analyze_partition` with that topic's
subscriptions, cursor states and entry filters. So each topic's document is
:func:`cursorops.core.domain.analysis.backlog.analysis_document` of core's answer, field for field,
plus each subscription's ``oldestPublishMs``
(:meth:`cursorops.core.services.broker.analysis.Analysis.backlog_ages`'s figure: the publish time of
its oldest unacknowledged message, None when the backlog is empty).

A topic without subscriptions gets a document without subscriptions and costs
no read. The job logs progress lines on stderr (topics planned, the scan, the
groups analysed); executors print one line per partition.

Run::

    spark-submit spark_apps/audit_backlog.py [--home H] [--master M] [--remote sc://H:P]
        --topics topics.json --output audit.json

``topics.json`` is a JSON list of topic names; the output is
``{"topics": [document, ...]}`` in the same order.

The backlog audit DAG runs it for a run instead, with nothing but the run's identity
(``--dag-id=DAG --run-id=RUN``, rendered by Airflow from the run, never from an XCom): the
topics are read from, and the answer written to, the run's scratch folder
(:mod:`cursorops.spark.run_scratch`), and ``--topics`` and ``--output`` are refused.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.domain.analysis.entry_filters import EntryFilters
from cursorops.core.domain.analysis.topic_scan import TopicScan, decode_state
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.spark.analyze_backlog import (
    ENTRY_COLUMNS,
    RESULT_SCHEMA,
    ScanLimits,
    analyze_partition,
    collect_analyses,
    entry_chunk_rest,
)
from cursorops.spark.common import (
    config_from,
    emit_json,
    executor_states,
    read_paths,
    remote_from,
    run_job,
    spark_errors,
    with_home_options,
)
from cursorops.spark.session import job_logger, session_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

AUDIT_SCHEMA = pa.schema(
    [*RESULT_SCHEMA, pa.field("oldest_publish_ms", pa.int64())],
)
""":data:`cursorops.spark.analyze_backlog.RESULT_SCHEMA` and the oldest unacknowledged publish
time."""

KEY = "partition"
"""The grouping column: the topic partition's ordinal over all the topics audited (it
replaces the ledger store's ``partition`` column, which repeats from topic to topic)."""


def audit_partition(
    entries: pa.Table,
    names: Mapping[int, str],
    subscriptions: Mapping[str, Sequence[str]],
    states: Mapping[tuple[str, str], bytes],
    filters: Mapping[str, Mapping[str, EntryFilters]],
) -> pa.Table:
    """Every subscription's analysis of one topic partition, and its oldest age.

    ``names`` maps the :data:`KEY` value to the topic partition's name;
    ``subscriptions`` and ``filters`` are per topic partition.
    """
    name = names[entries.column(KEY)[0].as_py()]
    subs = subscriptions[name]
    analysed = analyze_partition(entries, names, subs, states, filters[name], ScanLimits())
    ordered = entries.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    ledger_ids = ordered.column("ledger_id").to_numpy()
    entry_ids = ordered.column("entry_id").to_numpy()
    batch_sizes = ordered.column("batch_size").to_numpy()
    publish = np.asarray(ordered.column("publish_time").to_numpy(), dtype=np.int64)
    rest = entry_chunk_rest(ordered)
    oldest: list[int | None] = []
    for subscription in subs:
        state = decode_state(states[(name, subscription)])
        counts = backlog.unacked_messages(state, ledger_ids, entry_ids, batch_sizes, rest)
        live = np.flatnonzero(counts)
        oldest.append(int(publish[live].min()) if live.size else None)
    return analysed.append_column(
        AUDIT_SCHEMA.field("oldest_publish_ms"), pa.array(oldest, pa.int64())
    )


def transform(
    entries: DataFrame,
    *,
    names: Mapping[int, str],
    subscriptions: Mapping[str, Sequence[str]],
    states: Mapping[tuple[str, str], bytes],
    filters: Mapping[str, Mapping[str, EntryFilters]],
) -> DataFrame:
    """Rows tagged with :data:`KEY` -> one :data:`AUDIT_SCHEMA` row per topic partition and
    subscription. Only each entry's first message is kept, as in analyze_backlog."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    shared = executor_states(states)
    names = dict(names)
    subs = {name: list(chosen) for name, chosen in subscriptions.items()}
    chosen_filters = {name: dict(f) for name, f in filters.items()}

    def audit_group(table):  # type: ignore[no-untyped-def]
        # Untyped on purpose: Spark reads type hints to pick the grouped-map flavour.
        return audit_partition(table, names, subs, shared, chosen_filters)

    first = entries.where(F.col("batch_index") <= 0)
    return first.groupBy(KEY).applyInArrow(audit_group, from_arrow_schema(AUDIT_SCHEMA))


def tag_partitions(
    spark: SparkSession, messages: DataFrame, owners: Mapping[int, int]
) -> DataFrame:
    """``messages`` with :data:`KEY` set from each row's ledger (``owners``: ledger id ->
    topic partition ordinal), through a broadcast join on a small table."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType(
        [StructField("ledger_id", LongType(), False), StructField(KEY, LongType(), False)]
    )
    table = spark.createDataFrame(sorted(owners.items()), schema)
    return messages.drop(KEY).join(F.broadcast(table), "ledger_id")


def plan_scans(config: Config, topics: Sequence[str], role: str, log: Any) -> list[TopicScan]:
    """Each topic's scan (authorized as CONSUME), with a progress line every 10 %."""
    from cursorops.core.services.broker import Broker

    scans = []
    step = max(1, len(topics) // 10)
    started = time.monotonic()
    with Broker(config) as broker:
        for done, topic in enumerate(topics, 1):
            scans.append(broker.analysis.scan_plan(role, topic, operation=Operation.CONSUME))
            if done % step == 0 or done == len(topics):
                log.info(
                    "planned %d/%d topic(s) in %.1fs", done, len(topics), time.monotonic() - started
                )
    return scans


def run(
    config: Config,
    topics: Sequence[str],
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
    remote: str | None = None,
) -> list[dict[str, Any]]:
    """One document per topic (:func:`cursorops.core.domain.analysis.backlog.analysis_document`,
    with each
    subscription's ``oldestPublishMs``), from one Spark job over all the topics."""
    log = job_logger("cursorops.audit_backlog")
    started = time.monotonic()
    scans = plan_scans(config, topics, role, log)
    names: dict[int, str] = {}
    owners: dict[int, int] = {}
    subscriptions: dict[str, list[str]] = {}
    filters: dict[str, dict[str, EntryFilters]] = {}
    states: dict[tuple[str, str], bytes] = {}
    paths: list[str] = []
    extra: set[str] = set()
    for scan in scans:
        if not scan.subscriptions:
            continue
        topic_filters = {sub.name: sub.filters() for sub in scan.subscriptions}
        extra.update(*(f.columns for f in topic_filters.values()))
        states.update(scan.states)
        for source in scan.partitions:
            key = len(names)
            names[key] = source.name
            owners.update((ledger, key) for ledger, _ in source.ledgers)
            subscriptions[source.name] = [sub.name for sub in scan.subscriptions]
            filters[source.name] = topic_filters
            paths.extend(source.paths)
    columns = [*ENTRY_COLUMNS, "publish_time", *sorted(extra - {*ENTRY_COLUMNS, "publish_time"})]
    log.info(
        "auditing %d topic(s): %d partition(s) with subscriptions, %d segment(s), %d cursor(s)",
        len(scans),
        len(names),
        len(paths),
        len(states),
    )
    rows: list[dict[str, Any]] = []
    if paths:
        with (
            session_scope(master, "cursorops-audit-backlog", spark, remote) as session,
            spark_errors(),
        ):
            messages = tag_partitions(session, read_paths(session, paths, columns), owners)
            result = transform(
                messages, names=names, subscriptions=subscriptions, states=states, filters=filters
            )
            rows = [row.asDict() for row in result.collect()]
    log.info(
        "analysed %d partition(s) of %d topic(s) in one job, %.1fs in all",
        len({row["topic_partition"] for row in rows}),
        len(scans),
        time.monotonic() - started,
    )
    return documents(scans, rows)


def documents(
    scans: Sequence[TopicScan], rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Spark's rows as one document per topic, in the order of ``scans``."""
    by_partition: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_partition.setdefault(row["topic_partition"], []).append(row)
    out = []
    for scan in scans:
        mine = [row for source in scan.partitions for row in by_partition.get(source.name, [])]
        document: dict[str, Any] = analysis_document(scan.topic, None, collect_analyses(scan, mine))
        oldest: dict[str, int | None] = {sub.name: None for sub in scan.subscriptions}
        for row in mine:
            seen, found = oldest[row["subscription"]], row["oldest_publish_ms"]
            if found is not None:
                oldest[row["subscription"]] = found if seen is None else min(seen, found)
        for name, value in oldest.items():
            document["subscriptions"][name]["oldestPublishMs"] = value
        out.append(document)
    return out


def read_topics(path: str) -> list[str]:
    """The ``--topics`` file: a JSON list of topic names."""
    try:
        with open(path, encoding="utf-8") as source:
            topics = json.load(source)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"Cannot read the topics file {path}: {exc}") from exc
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise InvalidArgumentError(f"Invalid topics file {path}: expected a JSON list of names")
    return topics


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = with_home_options(
        argparse.ArgumentParser(
            prog="audit_backlog",
            description="Exact backlog of every subscription of many topics, in one Spark job",
        )
    )
    parser.add_argument("--topics", help="JSON file: a list of topic names")
    parser.add_argument("--output", help="write the JSON here instead of stdout")
    parser.add_argument("--dag-id", help="a workflow run's DAG: its scratch folder's files")
    parser.add_argument("--run-id", help="a workflow run's id: its scratch folder's files")
    args = parser.parse_args(argv)

    def job() -> int:
        from cursorops.spark.run_scratch import AUDIT, TOPICS, checked_scratch, scratch_file

        remote = remote_from(args)
        config = config_from(args)
        topics, output = args.topics, args.output
        if args.dag_id is not None or args.run_id is not None:
            elsewhere = (topics, output, args.home, args.metadata_url, args.ledger_root)
            if args.dag_id is None or args.run_id is None or any(elsewhere):
                raise InvalidArgumentError(
                    "A run's audit takes --dag-id and --run-id, and no --topics, --output, "
                    "--home, --metadata-url or --ledger-root: its files are the run's "
                    "scratch folder's, its store the environment's"
                )
            checked_scratch(config, args.dag_id, args.run_id)
            topics = str(scratch_file(config, args.dag_id, args.run_id, TOPICS))
            output = str(scratch_file(config, args.dag_id, args.run_id, AUDIT))
        elif not topics:
            raise InvalidArgumentError("Give --topics (a JSON list of topic names)")
        found = run(config, read_topics(topics), args.master, role=args.role, remote=remote)
        emit_json({"topics": found}, output, sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    # Re-enter through the package, so executors unpickle these functions by module name.
    from cursorops.spark.audit_backlog import main as package_main

    sys.exit(package_main(sys.argv[1:]))

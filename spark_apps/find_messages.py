"""find_messages on Spark: a subscription's unacknowledged messages matching a predicate.

The answer is a match list (:mod:`cursorops.spark.match_list`): one Parquet row per
message, with its id and a preview, for a person to review and for
``apply_skip_plan`` to apply. No shuffle of the data: each Arrow batch of a
segment is decided where it is read, by
:func:`cursorops.core.domain.delivery.unacked_rows.unacked_rows` (the
cursor) and :meth:`cursorops.core.domain.analysis.predicates.Predicate.mask` (the predicate).

Run::

    spark-submit spark_apps/find_messages.py [--home H] [--master M] TOPIC -s SUB \
        (--predicate JSON | --predicate @file.json | --key K | --property K=V ...
         | --deliver-at-after now | --producer NAME ...) --output matches.parquet

Prints a JSON summary (matches per partition, the first rows) on stdout, or
to ``--summary``: under ``spark-submit`` the driver's log shares stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.analysis.match_conditions import MATCH_OPTIONS, predicate_from_options
from cursorops.core.domain.analysis.predicates import Predicate, parse_predicate
from cursorops.core.domain.analysis.topic_scan import TopicScan, decode_state
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.domain.delivery.unacked_rows import unacked_rows
from cursorops.core.domain.errors import InvalidArgumentError, InvalidPredicateError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.spark.common import (
    base_parser,
    config_from,
    emit_json,
    executor_states,
    read_messages,
    remote_from,
    run_job,
    spark_errors,
)
from cursorops.spark.match_list import (
    MATCH_LIST_SCHEMA,
    SORT_KEYS,
    match_list_rows,
    matched_messages,
    read_match_list,
)
from cursorops.spark.session import job_logger, session_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MESSAGE_COLUMNS = (
    "partition",
    "ledger_id",
    "entry_id",
    "batch_index",
    "batch_size",
    "publish_time",
    "deliver_at",
    "key",
    "properties",
    "payload",
    "uuid",
)
"""Read for every match list; :func:`message_columns` adds what the predicate needs beyond them."""
PREVIEW_ROWS = 20
"""Match-list rows shown in the job's JSON summary."""


def message_columns(predicate: Predicate) -> tuple[str, ...]:
    """:data:`MESSAGE_COLUMNS` and any other column the predicate reads (``producer_name``)."""
    return MESSAGE_COLUMNS + tuple(sorted(predicate.columns - set(MESSAGE_COLUMNS)))


def find_in_batches(
    batches: Iterator[pa.RecordBatch],
    topic: str,
    subscription: str,
    names: Mapping[int, str],
    states: Mapping[tuple[str, str], bytes],
    predicate: Predicate,
) -> Iterator[pa.RecordBatch]:
    """Match-list rows for the matching unacknowledged messages of some batches (any partitions)."""
    decoded: dict[str, CursorState] = {}
    for batch in batches:
        partitions = batch.column("partition").to_numpy()
        for index in np.unique(partitions).tolist():
            rows = (
                batch
                if partitions.size and (partitions == index).all()
                else batch.filter(pc.equal(batch.column("partition"), index))
            )
            name = names[index]
            if name not in decoded:
                decoded[name] = decode_state(states[(name, subscription)])
            live = rows.filter(pa.array(unacked_rows(decoded[name], rows)))
            chosen = live.filter(pa.array(predicate.mask(live)))
            if chosen.num_rows:
                yield from match_list_rows(chosen, topic, subscription, name).to_batches()


def transform(
    messages: DataFrame,
    *,
    topic: str,
    subscription: str,
    names: Mapping[int, str],
    states: Mapping[tuple[str, str], bytes],
    predicate: Predicate,
) -> DataFrame:
    """Message rows -> :data:`~cursorops.spark.match_list.MATCH_LIST_SCHEMA` rows, in id order."""
    from pyspark.sql.pandas.types import from_arrow_schema

    shared = executor_states(states)
    names = dict(names)

    def find(batches):  # type: ignore[no-untyped-def]
        return find_in_batches(batches, topic, subscription, names, shared, predicate)

    found = messages.mapInArrow(find, from_arrow_schema(MATCH_LIST_SCHEMA))
    # One sorted partition: the match list is one file, and a global orderBy would run the
    # whole scan twice (once to sample its range bounds).
    return found.repartition(1).sortWithinPartitions(*SORT_KEYS)


def run(
    config: Config,
    topic: str | TopicName,
    subscription: str,
    predicate: Predicate,
    output: str,
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
    remote: str | None = None,
) -> dict[str, Any]:
    """Write the match list to ``output`` (Parquet folder); return the summary document.

    On ``spark``, else on a session of ``master`` or of the Spark Connect server
    ``remote`` (:func:`cursorops.spark.session.build_session`); ``output`` is written
    where that session's executors run.
    """
    from cursorops.core.domain.content import masked
    from cursorops.core.services.broker import Broker

    log = job_logger("cursorops.find_messages")
    with Broker(config) as broker:
        scan = broker.analysis.scan_plan(
            role, topic, subscription, operation=Operation.PEEK_MESSAGES
        )
    log.info(
        "finding in %s for %s: %d partition(s), %d segment(s), predicate %s",
        scan.topic,
        subscription,
        len(scan.partitions),
        len(scan.paths),
        # Every reader of the DAG may open the task's log: the predicate's content is masked.
        json.dumps(masked(predicate.to_json()), sort_keys=True),
    )
    with (
        session_scope(master, "cursorops-find-messages", spark, remote) as session,
        spark_errors(scan),
    ):
        messages = read_messages(session, scan, message_columns(predicate))
        matches = transform(
            messages,
            topic=scan.topic,
            subscription=subscription,
            names=scan.names,
            states=scan.states,
            predicate=predicate,
        )
        matches.write.mode("overwrite").parquet(output)
        counts, preview = written_summary(session, output)
    return summary_document(scan, subscription, predicate, output, counts, preview)


def written_summary(
    session: SparkSession, output: str, *, local: bool = True
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Matches per topic partition (a chunked message once:
    :func:`cursorops.spark.match_list.matched_messages`), and the first :data:`PREVIEW_ROWS` rows
    in id order, of the match list just written to ``output``.

    Read here with pyarrow when ``output`` is a folder this process sees (``local``), as the
    tasks that use a match list read it (:func:`cursorops.spark.match_list.read_match_list`):
    a few milliseconds, where the two Spark jobs took a second on a warm server. Else, as
    on a cluster whose executors write where this process cannot read, by those two jobs.
    """
    if local and os.path.isdir(output):
        table = read_match_list(output)
        first = pc.select_k_unstable(table, PREVIEW_ROWS, [(key, "ascending") for key in SORT_KEYS])
        preview = table.take(first).sort_by([(key, "ascending") for key in SORT_KEYS])
        return matched_messages(table), preview.to_pylist()
    from pyspark.sql import functions as F

    written = session.read.parquet(output)
    # A chunked message once: the rows without a uuid, and each uuid of a partition once.
    plain = F.sum(F.when(F.col("uuid").isNull(), 1).otherwise(0))
    counts = {
        row["topic_partition"]: int(row["count"])
        for row in written.groupBy("topic_partition")
        .agg((plain + F.countDistinct("uuid")).alias("count"))
        .collect()
    }
    preview_rows = written.orderBy(*SORT_KEYS).limit(PREVIEW_ROWS).collect()
    return counts, [row.asDict() for row in preview_rows]


def summary_document(
    scan: TopicScan,
    subscription: str,
    predicate: Predicate,
    output: str,
    counts: Mapping[str, int],
    preview: list[dict[str, Any]],
) -> dict[str, Any]:
    per_partition = {source.name: counts.get(source.name, 0) for source in scan.partitions}
    return {
        "topic": scan.topic,
        "subscription": subscription,
        "predicate": predicate.to_json(),
        "matchList": output,
        "matches": sum(per_partition.values()),
        "perPartition": per_partition,
        "preview": [
            {
                "messageId": row["message_id"],
                "topicPartition": row["topic_partition"],
                "key": row["key"],
                "publishTime": row["publish_time"],
                "deliverAt": row["deliver_at"],
                "properties": dict(row["properties"] or {}),
                "payloadExcerpt": row["payload_excerpt"],
            }
            for row in preview
        ],
    }


def add_match_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per match option
    (:data:`cursorops.core.domain.analysis.match_conditions.MATCH_OPTIONS`)."""
    for option in MATCH_OPTIONS:
        if option.kind == "pairs":
            parser.add_argument(
                option.flag, action="append", metavar="NAME=VALUE", help=option.help
            )
        elif option.kind == "time":
            parser.add_argument(option.flag, metavar="TIME", help=option.help)
        else:
            parser.add_argument(option.flag, help=option.help)


def predicate_document(args: Any) -> dict[str, Any]:
    """The predicate from ``--predicate`` (JSON or @file) merged with the match flags."""
    document: dict[str, Any] = {}
    if args.predicate is not None:
        text = args.predicate
        if text.startswith("@"):
            try:
                with open(text[1:], encoding="utf-8") as source:
                    text = source.read()
            except OSError as exc:
                raise InvalidPredicateError(f"Invalid predicate file {text[1:]}: {exc}") from exc
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise InvalidPredicateError(f"Invalid predicate: not JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise InvalidPredicateError("Invalid predicate: expected a JSON object")
        document.update(loaded)
    return predicate_from_options(
        document, **{option.name: getattr(args, option.name) for option in MATCH_OPTIONS}
    )


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(
        "find_messages",
        "Write the unacknowledged messages of a subscription matching a predicate as a match list",
    )
    parser.add_argument("-s", "--subscription", required=True)
    parser.add_argument("--predicate", help="the predicate as JSON, or @path to a JSON file")
    add_match_flags(parser)
    parser.add_argument("--output", required=True, help="where to write the match list (Parquet)")
    parser.add_argument("--summary", help="write the JSON summary here instead of stdout")
    args = parser.parse_args(argv)

    def job() -> int:
        remote = remote_from(args)
        now_ms = time.time_ns() // 1_000_000
        predicate = parse_predicate(predicate_document(args), now_ms=now_ms)
        if not args.output.strip():
            raise InvalidArgumentError("Invalid --output: empty path")
        document = run(
            config_from(args),
            args.topic,
            args.subscription,
            predicate,
            args.output,
            args.master,
            role=args.role,
            remote=remote,
        )
        emit_json(document, args.summary, sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    from cursorops.spark.find_messages import main as package_main

    sys.exit(package_main(sys.argv[1:]))

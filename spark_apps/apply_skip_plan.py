"""apply_skip_plan: apply a skip plan through the Broker, in one transaction.

Spark does the one part that grows with the input and changes nothing: it reads
a match list that ``find_messages`` wrote (a Parquet file or Spark's folder of
part files, possibly millions of rows), checks that every row is an id of this
topic, and reduces it to its distinct ids (:func:`transform`, a pure
DataFrame -> DataFrame function). The driver then makes the one write, through
``core``: :func:`cursorops.core.services.gating.skip.plan_skip` validates every id against the
ledgers and the cursor (nothing written on any bad id), and
:func:`cursorops.core.services.gating.skip.apply_skip` acknowledges the plan on every partition
and writes its audit record (stamped by the broker's clock) in ONE
metadata-store transaction: a killed job leaves all of it or none of it, and
re-running converges.

A plan already made by :func:`~cursorops.core.services.gating.skip.plan_skip` (its JSON, e.g.
the approved plan of a workflow) is applied as it is with ``--skip-plan``; the
broker re-validates it first. Ids given with ``--ids`` / ``--ids-file`` need no
Spark pass.

Run::

    spark-submit spark_apps/apply_skip_plan.py [--home H] [--master M] TOPIC -s SUB \\
        (--match-list matches.parquet | --skip-plan plan.json | --ids L:E[:B] ...
         | --ids-file ids.txt) [--output outcome.json]

Under ``spark-submit`` the driver's log shares stdout with the JSON: use ``--output``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidSkipPlanError,
)
from cursorops.core.domain.ids import skip_payload
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.spark.common import base_parser, config_from, emit_json, remote_from, run_job
from cursorops.spark.session import job_logger, session_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ID_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("ledger_id", pa.int64()),
        pa.field("entry_id", pa.int64()),
        pa.field("batch_index", pa.int32()),
    ]
)
"""The columns of a match list that say which message a row names."""

CHECKED_SCHEMA = pa.schema(
    [
        pa.field("ledger_id", pa.int64()),
        pa.field("entry_id", pa.int64()),
        pa.field("batch_index", pa.int32()),
        pa.field("problem", pa.string()),
    ]
)
"""One row per distinct id; ``problem`` is null for a usable row, else why it is not."""

PROBLEMS_SHOWN = 5


def transform(matches: DataFrame, *, topic: str) -> DataFrame:
    """Match-list rows (:data:`ID_SCHEMA`) -> distinct ids with a ``problem`` per row (pure).

    A row of another topic, or with a null id column, gets a problem; usable
    rows are deduplicated. Sorted by id. Nothing is read but ``matches``.
    """
    from pyspark.sql import functions as F

    null_id = F.col("ledger_id").isNull() | F.col("entry_id").isNull()
    problem = (
        F.when(
            null_id | F.col("batch_index").isNull(),
            F.lit("holds a null ledger_id, entry_id or batch_index"),
        )
        .when(F.col("topic").isNull(), F.lit("holds a row without a topic"))
        .when(F.col("topic") != F.lit(topic), F.concat(F.lit("holds ids of "), F.col("topic")))
    )
    return (
        matches.select(*ID_SCHEMA.names)
        .withColumn("problem", problem)
        .select("ledger_id", "entry_id", "batch_index", "problem")
        .distinct()
        .orderBy("ledger_id", "entry_id", "batch_index", "problem")
    )


def match_list_file_ids(spark: SparkSession, path: str, topic: str) -> list[MessageId]:
    """The distinct ids of a match list of ``topic``, read and checked on Spark."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql.pandas.types import from_arrow_schema

    if not os.path.exists(path):
        raise InvalidArgumentError(f"Invalid match list {path}: no such file or folder")
    try:
        frame = spark.read.parquet(path)
        missing = [name for name in ID_SCHEMA.names if name not in frame.columns]
        if missing:
            raise InvalidArgumentError(
                f"Invalid match list {path}: missing column(s) {', '.join(missing)}"
            )
        rows = transform(
            spark.read.schema(from_arrow_schema(ID_SCHEMA)).parquet(path), topic=topic
        ).collect()
    except (PySparkException, Py4JError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidArgumentError(
            f"Invalid match list {path}: not a readable Parquet match list: {reason}"
        ) from exc
    bad = [row for row in rows if row["problem"] is not None]
    if bad:
        shown = sorted({row["problem"] for row in bad})[:PROBLEMS_SHOWN]
        raise InvalidArgumentError(
            f"Invalid match list {path}: it {' and '.join(shown)}; {len(bad)} unusable row(s) for "
            f"{topic}, nothing skipped"
        )
    return [MessageId(row["ledger_id"], row["entry_id"], -1, row["batch_index"]) for row in rows]


def run(
    config: Config,
    topic: str | TopicName,
    subscription: str,
    ids: Sequence[MessageId] | None = None,
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
    match_list: str | None = None,
    plan: SkipPlan | None = None,
    remote: str | None = None,
) -> dict[str, Any]:
    """Apply ``plan``, or the plan of ``ids`` / of the match list (Parquet) at ``match_list``.

    Exactly one of the three. Returns
    :meth:`cursorops.core.domain.acks.skip.SkipOutcome.to_pulsar_json`.
    An empty id list (a match list of no message) applies as a no-op, still
    audited. Only a match list needs Spark: ``spark``, else a
    session of ``master`` or of the Spark Connect server ``remote``.
    """
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating import skip as skips

    log = job_logger("cursorops.apply_skip_plan")
    if sum(x is not None for x in (ids, match_list, plan)) != 1:
        raise InvalidArgumentError("Give exactly one of ids, a match list or a skip plan")
    parsed = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    name = str(parsed)
    if match_list is not None:
        with session_scope(master, "cursorops-apply-skip-plan", spark, remote) as session:
            ids = match_list_file_ids(session, match_list, name)
        log.info("match list %s: %d distinct id(s)", match_list, len(ids))
    with Broker(config) as broker:
        if plan is None:
            plan = (
                skips.plan_skip(broker.gated, role, parsed, subscription, ids)
                if ids
                else SkipPlan(name, subscription, (), broker.clock())
            )
        elif (plan.topic, plan.subscription) != (name, subscription):
            raise InvalidSkipPlanError(
                f"Invalid skip plan {plan.plan_id}: it is a plan of {plan.topic} / "
                f"{plan.subscription}, not of {name} / {subscription}; nothing skipped"
            )
        log.info(
            "applying plan %s to %s / %s: %d message(s) on %d partition(s)",
            plan.plan_id,
            name,
            subscription,
            len(plan.items),
            len(plan.partitions()),
        )
        outcome = skips.apply_skip(broker.gated, role, plan, via="spark")
    return outcome.to_pulsar_json()


def ids_from_arguments(args: Any) -> list[MessageId]:
    """Ids from ``--ids`` and ``--ids-file``."""
    texts: list[str] = []
    if args.ids_file is not None:
        try:
            with open(args.ids_file, encoding="utf-8") as source:
                texts = [
                    line.strip() for line in source if line.strip() and not line.startswith("#")
                ]
        except OSError as exc:
            raise InvalidArgumentError(f"Invalid --ids-file {args.ids_file}: {exc}") from exc
    for text in args.ids or []:
        texts.extend(part for part in text.split(",") if part.strip())
    if not texts:
        raise InvalidMessageIdError("No message ids given")
    return skip_payload.parse_triplets([text.strip() for text in texts])


def skip_plan_from_file(path: str) -> SkipPlan:
    try:
        with open(path, encoding="utf-8") as source:
            return SkipPlan.from_json(source.read())
    except OSError as exc:
        raise InvalidArgumentError(f"Invalid --skip-plan {path}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(
        "apply_skip_plan",
        "Apply a skip plan to a subscription: every partition in one transaction, audited",
    )
    parser.add_argument("-s", "--subscription", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--match-list", help="a match list written by find_messages (Parquet)")
    source.add_argument("--skip-plan", help="a skip plan (JSON, as SkipPlan.to_json writes it)")
    source.add_argument(
        "--ids", nargs="+", action="extend", metavar="L:E[:B]", help="message id triplets"
    )
    source.add_argument("--ids-file", help="a file of triplets, one per line")
    parser.add_argument("--output", help="write the JSON outcome here instead of stdout")
    args = parser.parse_args(argv)

    def job() -> int:
        config = config_from(args)
        topic = TopicName.parse(args.topic)
        common = {"master": args.master, "role": args.role, "remote": remote_from(args)}
        if args.match_list is not None:
            document = run(config, topic, args.subscription, match_list=args.match_list, **common)
        elif args.skip_plan is not None:
            plan = skip_plan_from_file(args.skip_plan)
            document = run(config, topic, args.subscription, plan=plan, **common)
        else:
            ids = ids_from_arguments(args)
            document = run(config, topic, args.subscription, ids, **common)
        emit_json(document, args.output, sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    from cursorops.spark.apply_skip_plan import main as package_main

    sys.exit(package_main(sys.argv[1:]))

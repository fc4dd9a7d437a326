"""apply_skip_plan on Spark: acknowledge a skip plan's messages, partition by partition.

1. On the driver, :meth:`core.broker.Broker.plan_skip` validates every id at
   once (authorization, subscription type, existence, batch index range,
   partition routing) with :func:`core.skip.validate`. Any bad id: an error
   naming it, and nothing is written.
2. On the executors, one task per topic partition opens that partition's
   :class:`~core.managed_cursor.ManagedCursor` and acknowledges the targets it
   does not already hold (:func:`core.skip.group_targets`); each partition's
   acknowledgement is one durable journal delta.
3. On the driver, one audit record for the whole plan, as ``Broker.apply_skip``
   writes it, and the outcome as JSON.

Applying a plan twice changes nothing more: the second run reports every
message as already acknowledged.

Run::

    spark-submit spark_apps/apply_skip_plan.py [--home H] [--master M] TOPIC -s SUB \
        (--plan plan.parquet | --ids L:E[:B] ... | --ids-file ids.txt) [--output outcome.json]

Under ``spark-submit`` the driver's log shares stdout with the JSON: use ``--output``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from core import skip
from core.authz import Operation
from core.config import Config
from core.cursor import AckTarget
from core.errors import InvalidArgumentError, InvalidMessageIdError
from core.message_id import MessageId
from core.position import Position
from spark_apps.common import (
    base_parser,
    config_from,
    emit_json,
    run_job,
    spark_errors,
)
from spark_apps.session import job_logger, session_scope
from spark_apps.skip_plan import plan_ids, read_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TARGET_SCHEMA = pa.schema(
    [
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("ledger_id", pa.int64(), nullable=False),
        pa.field("entry_id", pa.int64(), nullable=False),
        pa.field("batch_index", pa.int32(), nullable=False),
        pa.field("batch_size", pa.int32(), nullable=False),
    ]
)
"""One acknowledgement to write: a whole entry (batch_index -1) or one batch index."""

COUNT_SCHEMA = pa.schema(
    [
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("requested", pa.int64(), nullable=False),
        pa.field("acknowledged", pa.int64(), nullable=False),
        pa.field("already_acknowledged", pa.int64(), nullable=False),
    ]
)
"""Per topic partition: targets given, newly acknowledged, found acknowledged at apply time."""


def acknowledge_partition(targets: pa.Table, metadata_url: str, subscription: str) -> pa.Table:
    """Acknowledge one topic partition's targets through its ManagedCursor (one delta).

    Targets the cursor already holds (acknowledged since validation, or by an
    earlier run) are left out, so re-running is a no-op.
    """
    from core.ledger_layout import LedgerLayout
    from core.managed_cursor import ManagedCursor
    from core.store.metadata import MetadataStore

    name = targets.column("topic_partition")[0].as_py()
    wanted = [
        AckTarget(Position(ledger, entry), index, size)
        for ledger, entry, index, size in zip(
            targets.column("ledger_id").to_pylist(),
            targets.column("entry_id").to_pylist(),
            targets.column("batch_index").to_pylist(),
            targets.column("batch_size").to_pylist(),
            strict=True,
        )
    ]
    with MetadataStore(metadata_url) as store:
        layout = LedgerLayout.of(
            (ledger.ledger_id, ledger.entries) for ledger in store.ledgers(name)
        )
        cursor = ManagedCursor.open(store, name, subscription, layout)
        fresh = [t for t in wanted if not cursor.state.is_acked(t.position, t.batch_index)]
        if fresh:
            cursor.acknowledge(fresh)
    print(
        f"cursorops apply-skip-plan: {name}: {len(fresh)} acknowledged, "
        f"{len(wanted) - len(fresh)} already acknowledged",
        file=sys.stderr,
        flush=True,
    )
    return pa.table(
        {
            "topic_partition": [name],
            "requested": [len(wanted)],
            "acknowledged": [len(fresh)],
            "already_acknowledged": [len(wanted) - len(fresh)],
        },
        schema=COUNT_SCHEMA,
    )


def transform(targets: DataFrame, *, metadata_url: str, subscription: str) -> DataFrame:
    """Target rows (:data:`TARGET_SCHEMA`) -> one :data:`COUNT_SCHEMA` row per topic partition.

    Writes to the cursors: each group acknowledges its partition's targets.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    def apply_group(table):  # type: ignore[no-untyped-def]
        return acknowledge_partition(table, metadata_url, subscription)

    return targets.groupBy("topic_partition").applyInArrow(
        apply_group, from_arrow_schema(COUNT_SCHEMA)
    )


def targets_table(items: Sequence[skip.SkipItem]) -> pa.Table:
    """The acknowledgements to write, per :func:`core.skip.group_targets`."""
    rows = [
        {
            "topic_partition": name,
            "ledger_id": target.position.ledger_id,
            "entry_id": target.position.entry_id,
            "batch_index": target.batch_index,
            "batch_size": target.batch_size,
        }
        for name, group in skip.group_targets(items).items()
        for target in group
    ]
    return pa.Table.from_pylist(rows, schema=TARGET_SCHEMA)


def run(
    config: Config,
    topic: str,
    subscription: str,
    ids: Sequence[MessageId],
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
) -> dict[str, Any]:
    """Validate ``ids`` (nothing written on any error), apply per partition, audit once.

    Returns the outcome document: skipped and already acknowledged ids, and
    per-partition counts of newly acknowledged messages.
    """
    from core.broker import Broker

    log = job_logger("cursorops.apply_skip_plan")
    with Broker(config) as broker:
        info = broker.authorized_topic(role, Operation.SKIP, topic)
        if not ids:
            # An empty plan (find_messages matched nothing) is applied as a no-op.
            broker.metadata.get_subscription(info.name, subscription)
            return outcome_document(info.name, subscription, [], {})
        items = broker.plan_skip(role, topic, subscription, ids)
        targets = targets_table(items)
        log.info(
            "plan for %s / %s validated: %d message(s), %d to acknowledge on %d partition(s)",
            info.name,
            subscription,
            len(items),
            targets.num_rows,
            len(set(targets.column("topic_partition").to_pylist())),
        )
        counts: dict[str, Mapping[str, Any]] = {}
        if targets.num_rows:
            with (
                session_scope(master, "cursorops-apply-skip-plan", spark) as session,
                spark_errors(),
            ):
                result = transform(
                    session.createDataFrame(targets),
                    metadata_url=config.metadata_url,
                    subscription=subscription,
                )
                counts = {row["topic_partition"]: row.asDict() for row in result.collect()}
        document = outcome_document(info.name, subscription, items, counts)
        broker.metadata.record_audit(
            "skip",
            info.name,
            subscription,
            role,
            {
                "skipped": document["skipped"],
                "alreadyAcknowledged": document["alreadyAcknowledged"],
                "perPartition": document["perPartition"],
                "engine": "spark",
            },
            time.time_ns() // 1_000_000,
        )
    return document


def outcome_document(
    topic: str,
    subscription: str,
    items: Sequence[skip.SkipItem],
    counts: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Like ``SkipOutcome.to_json``: per-partition counts are the newly acknowledged ids."""
    fresh = [item for item in items if not item.already_acknowledged]
    late = {name: int(row["already_acknowledged"]) for name, row in counts.items()}
    per_partition = {name: int(row["acknowledged"]) for name, row in counts.items()}
    for item in items:
        per_partition.setdefault(item.topic_partition, 0)
    return {
        "topic": topic,
        "subscription": subscription,
        "skipped": [item.message_id.triplet() for item in fresh],
        "alreadyAcknowledged": [
            item.message_id.triplet() for item in items if item.already_acknowledged
        ],
        "perPartition": dict(sorted(per_partition.items())),
        "acknowledgedMeanwhile": {name: n for name, n in sorted(late.items()) if n},
    }


def ids_from_arguments(args: Any, topic: str) -> list[MessageId]:
    """Ids from ``--plan`` (checked to be a plan of ``topic``), ``--ids`` or ``--ids-file``."""
    from core.topic_name import TopicName

    if args.plan is not None:
        plan = read_plan(args.plan)
        wanted = str(TopicName.parse(topic))
        topics = set(plan.column("topic").to_pylist())
        if topics - {wanted}:
            others = ", ".join(sorted(str(t) for t in topics - {wanted}))
            raise InvalidArgumentError(
                f"Invalid plan {args.plan}: it holds ids of {others}, not of {wanted}; "
                "nothing skipped"
            )
        return plan_ids(plan)
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
    return skip.parse_triplets([text.strip() for text in texts])


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(
        "apply_skip_plan",
        "Acknowledge a skip plan's messages for a subscription, per partition on Spark",
    )
    parser.add_argument("-s", "--subscription", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", help="a plan written by find_messages (Parquet)")
    source.add_argument(
        "--ids", nargs="+", action="extend", metavar="L:E[:B]", help="message id triplets"
    )
    source.add_argument("--ids-file", help="a file of triplets, one per line")
    parser.add_argument("--output", help="write the JSON outcome here instead of stdout")
    args = parser.parse_args(argv)

    def job() -> int:
        ids = ids_from_arguments(args, args.topic)
        document = run(
            config_from(args), args.topic, args.subscription, ids, args.master, role=args.role
        )
        emit_json(document, args.output, sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    from spark_apps.apply_skip_plan import main as package_main

    sys.exit(package_main(sys.argv[1:]))

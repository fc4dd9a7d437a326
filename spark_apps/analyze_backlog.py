"""analyze-backlog on Spark: PIP-187's result, exact, for every partition and subscription.

One pass over the topic's data answers every subscription at once. The driver
lists the committed segments and loads each cursor; Spark reads one row per
entry (the first message of each, which is what the entry filters look at),
groups the rows by topic partition, and each group calls
:func:`core.backlog.analyze` per subscription, with the verdicts of
:meth:`core.filters.EntryFilters.verdicts` of the subscription's filters. So
the answer is core's, message for message: for a subscription without entry
filters it equals :meth:`core.broker.Broker.analyze_backlog`'s field for field
(that path does not run entry filters; its entry and message counts still agree).

No cap by default. ``--max-entries`` caps the backlog entries examined per
partition and subscription and ``--time-limit`` stops scanning once the time is
up; either sets ``aborted`` and ``resumeAfter``, the position to give back as
``--start-after`` to continue.

``markerMessages`` is always 0: the ledger store holds no marker messages.

Run::

    spark-submit spark_apps/analyze_backlog.py [--home H] [--master M] TOPIC [-s SUB]
        [--max-entries N] [--time-limit 2m] [--start-after L:E ...] [--output result.json]

The job logs a line per step and per partition on stderr, and executors print
one line per partition they analyse. Under ``spark-submit`` PySpark's runner
merges the driver's stderr into stdout, so give ``--output`` to keep the JSON
apart from the log.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from core import backlog, cursor_codec
from core.authz import Operation
from core.backlog import (
    COUNT_FIELDS,
    ID_FIELDS,
    BacklogAnalysis,
    PartitionAnalysis,
    analysis_document,
)
from core.config import Config
from core.cursor import CursorState
from core.errors import InvalidArgumentError
from core.filters import EntryFilters, describe
from core.position import EARLIEST, Position
from spark_apps.common import (
    TopicScan,
    base_parser,
    config_from,
    emit_json,
    parse_position,
    read_messages,
    run_job,
    scan_topic,
    spark_errors,
)
from spark_apps.session import job_logger, session_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from core.broker import Broker

ENTRY_COLUMNS = ("partition", "ledger_id", "entry_id", "batch_index", "batch_size")
"""What every analysis reads; entry filters add the columns they look at."""

CHUNK_ENTRIES = 1 << 17
"""Entries analysed between two looks at the clock when a time limit is set."""


RESULT_SCHEMA = pa.schema(
    [
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("subscription", pa.string(), nullable=False),
        *(pa.field(name, pa.int64(), nullable=False) for name in COUNT_FIELDS),
        pa.field("aborted", pa.bool_(), nullable=False),
        *(pa.field(name, pa.string()) for name in ID_FIELDS),
    ]
)
"""One row per topic partition and subscription: a :class:`BacklogAnalysis` flattened."""


@dataclass(frozen=True)
class ScanLimits:
    """Optional limits, per topic partition and subscription."""

    max_entries: int | None = None
    """Backlog entries examined at most; None = no cap."""
    deadline_ms: int | None = None
    """Epoch ms after which no further chunk is scanned; None = no time limit."""
    start_after: Mapping[str, Position] = field(default_factory=dict)
    """Topic partition -> the position to resume after (an earlier ``resume_after``)."""


def analyze_entries(
    state: CursorState,
    ledger_ids: np.ndarray,
    entry_ids: np.ndarray,
    batch_sizes: np.ndarray,
    verdicts: np.ndarray | None,
    *,
    start_after: Position | None = None,
    max_entries: int | None = None,
    deadline_ms: int | None = None,
) -> BacklogAnalysis:
    """:func:`core.backlog.analyze`, in chunks when a deadline is set.

    Without a deadline this *is* one ``backlog.analyze`` call. With one, chunks
    of :data:`CHUNK_ENTRIES` entries are analysed until the clock passes it;
    then ``aborted`` is set and ``resume_after`` names the last entry examined
    (the mark-delete position when none was; None when that is the very start).
    """
    if deadline_ms is None:
        return backlog.analyze(
            state,
            ledger_ids,
            entry_ids,
            batch_sizes,
            verdicts,
            start_after=start_after,
            max_entries=max_entries,
        )
    total = BacklogAnalysis()
    remaining = max_entries
    examined = start_after
    if examined is None and state.mark_delete != EARLIEST:
        examined = state.mark_delete
    for begin in range(0, len(ledger_ids), CHUNK_ENTRIES):
        end = begin + CHUNK_ENTRIES
        if time.time_ns() // 1_000_000 >= deadline_ms:
            total.aborted = True
            total.resume_after = None if examined is None else str(examined)
            break
        if remaining == 0:
            # Capped exactly at a chunk border: aborted only if backlog is left.
            rest = backlog.analyze(
                state,
                ledger_ids[begin:],
                entry_ids[begin:],
                batch_sizes[begin:],
                None,
                start_after=start_after,
                max_entries=0,
            )
            if rest.aborted:
                total.aborted = True
                total.resume_after = total.last_message_id
            break
        part = backlog.analyze(
            state,
            ledger_ids[begin:end],
            entry_ids[begin:end],
            batch_sizes[begin:end],
            None if verdicts is None else verdicts[begin:end],
            start_after=start_after,
            max_entries=remaining,
        )
        total.add(part)
        if part.aborted:
            total.resume_after = part.resume_after
            break
        if remaining is not None:
            remaining -= part.entries
        last = min(end, len(ledger_ids)) - 1
        examined = Position(int(ledger_ids[last]), int(entry_ids[last]))
    return total


def analyze_partition(
    entries: pa.Table,
    names: Mapping[int, str],
    subscriptions: Sequence[str],
    states: Mapping[tuple[str, str], bytes],
    filters: Mapping[str, EntryFilters],
    limits: ScanLimits,
) -> pa.Table:
    """Every subscription's analysis of one topic partition (the body of a Spark group).

    ``entries`` holds the first-message row of entries of that partition, any order.
    """
    entries = entries.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    name = names[entries.column("partition")[0].as_py()]
    ledger_ids = entries.column("ledger_id").to_numpy()
    entry_ids = entries.column("entry_id").to_numpy()
    batch_sizes = entries.column("batch_size").to_numpy()
    started = time.monotonic()
    rows = []
    for subscription in subscriptions:
        state, _ = cursor_codec.decode(states[(name, subscription)])
        chosen = filters.get(subscription)
        verdicts = chosen.verdicts(entries) if chosen else None
        result = analyze_entries(
            state,
            ledger_ids,
            entry_ids,
            batch_sizes,
            verdicts,
            start_after=limits.start_after.get(name),
            max_entries=limits.max_entries,
            deadline_ms=limits.deadline_ms,
        )
        rows.append(_row(name, subscription, result))
    print(
        f"cursorops analyze-backlog: {name}: {len(ledger_ids)} entries, "
        f"{len(subscriptions)} subscription(s) in {time.monotonic() - started:.2f}s",
        file=sys.stderr,
        flush=True,
    )
    return pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)


def _row(name: str, subscription: str, result: BacklogAnalysis) -> dict[str, Any]:
    row: dict[str, Any] = {"topic_partition": name, "subscription": subscription}
    for item in fields(result):
        row[item.name] = getattr(result, item.name)
    return row


def transform(
    entries: DataFrame,
    *,
    names: Mapping[int, str],
    subscriptions: Sequence[str],
    states: Mapping[tuple[str, str], bytes],
    filters: Mapping[str, EntryFilters] | None = None,
    limits: ScanLimits | None = None,
) -> DataFrame:
    """Message rows -> one :data:`RESULT_SCHEMA` row per topic partition and subscription.

    ``entries`` needs :data:`ENTRY_COLUMNS` plus the columns the filters read;
    any message rows will do, only each entry's first message is kept (the rows
    :func:`core.filters.first_messages` keeps). Partitions without entries yield
    no row. Cursor states go to the executors as one broadcast.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    shared = entries.sparkSession.sparkContext.broadcast(dict(states))
    chosen = dict(filters or {})
    bound = limits or ScanLimits()
    names = dict(names)
    subs = list(subscriptions)

    def analyze_group(table):  # type: ignore[no-untyped-def]
        # Untyped on purpose: Spark reads type hints to pick the grouped-map flavour.
        return analyze_partition(table, names, subs, shared.value, chosen, bound)

    first = entries.where(F.col("batch_index") <= 0)
    return first.groupBy("partition").applyInArrow(analyze_group, from_arrow_schema(RESULT_SCHEMA))


def collect_analyses(scan: TopicScan, rows: Sequence[Mapping[str, Any]]) -> list[PartitionAnalysis]:
    """Spark's rows as the broker's list: partitions in order, subscriptions in order, zeros
    for a partition without entries."""
    found = {(row["topic_partition"], row["subscription"]): row for row in rows}
    out = []
    for source in scan.partitions:
        for sub in scan.subscriptions:
            row = found.get((source.name, sub.name))
            result = BacklogAnalysis()
            if row is not None:
                for name in COUNT_FIELDS:
                    setattr(result, name, int(row[name]))
                result.aborted = bool(row["aborted"])
                for name in ID_FIELDS:
                    setattr(result, name, row[name])
            out.append(PartitionAnalysis(source.name, sub.name, result))
    return out


def route_start_positions(
    scan: TopicScan, positions: Sequence[Position], ledger_owner: Mapping[int, str]
) -> dict[str, Position]:
    """Each resume position to its topic partition (ledger ids are unique across the store)."""
    names = {source.name for source in scan.partitions}
    routed: dict[str, Position] = {}
    for position in positions:
        owner = ledger_owner.get(position.ledger_id)
        if owner not in names:
            raise InvalidArgumentError(
                f"Invalid --start-after {position}: ledger {position.ledger_id} is not a "
                f"ledger of {scan.topic.name}"
            )
        if owner in routed:
            raise InvalidArgumentError(
                f"Invalid --start-after {position}: {owner} already resumes after {routed[owner]}"
            )
        routed[owner] = position
    return routed


def topic_entries(broker: Broker, role: str, topic: str) -> int:
    """Committed entries of every partition of ``topic``, from the metadata store only.

    What a scan reads grows with this, so ``cursorops topics analyze-backlog``
    picks its engine by it. Authorizes ``role`` first (CONSUME), as the analysis does.
    """
    info = broker.authorized_topic(role, Operation.CONSUME, topic)
    return sum(
        ledger.entries
        for name in info.partition_names()
        for ledger in broker.metadata.ledgers(name)
    )


def run(
    config: Config,
    topic: str,
    subscription: str | None = None,
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
    max_entries: int | None = None,
    time_limit_ms: int | None = None,
    start_after: Sequence[Position] = (),
) -> list[PartitionAnalysis]:
    """The Spark twin of :meth:`core.broker.Broker.analyze_backlog` (same list, same order).

    Builds a session on ``master`` unless ``spark`` is given (and then stops it).
    """
    from core.broker import Broker

    log = job_logger("cursorops.analyze_backlog")
    if max_entries is not None and max_entries < 1:
        raise InvalidArgumentError(f"Invalid --max-entries {max_entries}: expected at least 1")
    with Broker(config) as broker:
        scan = scan_topic(broker, role, topic, subscription, Operation.CONSUME)
        owners = {
            ledger.ledger_id: source.name
            for source in scan.partitions
            for ledger in broker.metadata.ledgers(source.name)
        }
    filters = {sub.name: EntryFilters.from_properties(sub.properties) for sub in scan.subscriptions}
    for name, chosen in filters.items():
        for line in describe(chosen):
            log.info("subscription %s filter %s", name, line)
    deadline = None if time_limit_ms is None else time.time_ns() // 1_000_000 + time_limit_ms
    limits = ScanLimits(max_entries, deadline, route_start_positions(scan, start_after, owners))
    if not scan.subscriptions:
        log.info("%s has no subscription: nothing to analyse", scan.topic.name)
        return []
    columns = list(ENTRY_COLUMNS) + sorted(
        frozenset().union(*(f.columns for f in filters.values())) - set(ENTRY_COLUMNS)
    )
    log.info(
        "analysing %s: %d partition(s), %d segment(s), %d subscription(s)",
        scan.topic.name,
        len(scan.partitions),
        len(scan.paths),
        len(scan.subscriptions),
    )
    with (
        session_scope(master, "cursorops-analyze-backlog", spark) as session,
        spark_errors(scan),
    ):
        messages = read_messages(session, scan, columns)
        result = transform(
            messages,
            names=scan.names,
            subscriptions=[sub.name for sub in scan.subscriptions],
            states=scan.states,
            filters=filters,
            limits=limits,
        )
        rows = [row.asDict() for row in result.collect()]
    analyses = collect_analyses(scan, rows)
    for source in scan.partitions:
        mine = [one for one in analyses if one.topic_partition == source.name]
        log.info(
            "%s: %s",
            source.name,
            "; ".join(
                f"{one.subscription} {one.result.entries} entries, {one.result.messages} messages"
                + (
                    f", aborted, resume after {one.result.resume_after}"
                    if one.result.aborted
                    else ""
                )
                for one in mine
            ),
        )
    return analyses


_DURATION = re.compile(r"([0-9]+)(ms|s|m|h)?")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, None: 1_000}


def parse_time_limit(text: str) -> int:
    """``90`` (seconds), ``250ms``, ``30s``, ``2m``, ``1h`` as milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise InvalidArgumentError(
            f"Invalid --time-limit '{text}': expected a positive duration such as 90, 30s, 2m"
        )
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(
        "analyze_backlog",
        "PIP-187 backlog analysis, exact and uncapped, per partition and subscription, on Spark",
    )
    parser.add_argument("-s", "--subscription", help="one subscription (default: all)")
    parser.add_argument("--max-entries", type=int, help="cap per partition and subscription")
    parser.add_argument("--time-limit", help="stop scanning after this long (90, 30s, 2m)")
    parser.add_argument(
        "--start-after",
        nargs="+",
        action="extend",
        default=[],
        metavar="L:E",
        help="resume after these positions (an earlier resumeAfter), one per partition",
    )
    parser.add_argument("--output", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)

    def job() -> int:
        analyses = run(
            config_from(args),
            args.topic,
            args.subscription,
            args.master,
            role=args.role,
            max_entries=args.max_entries,
            time_limit_ms=None if args.time_limit is None else parse_time_limit(args.time_limit),
            start_after=[parse_position(text, "--start-after") for text in args.start_after],
        )
        document = analysis_document(_topic_name(args.topic), args.subscription, analyses)
        emit_json(document, args.output, sys.stdout)
        return 0

    return run_job(job)


def _topic_name(topic: str) -> str:
    from core.topic_name import TopicName

    return str(TopicName.parse(topic))


if __name__ == "__main__":
    # Re-enter through the package, so executors unpickle these functions by module name.
    from spark_apps.analyze_backlog import main as package_main

    sys.exit(package_main(sys.argv[1:]))

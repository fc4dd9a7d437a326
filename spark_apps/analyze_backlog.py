"""analyze-backlog on Spark: PIP-187's result, exact, for every partition and subscription.

One pass over the topic's data answers every subscription at once. The driver
takes a :class:`cursorops.core.domain.analysis.topic_scan.TopicScan` from
:meth:`cursorops.core.services.broker.analysis.Analysis.scan_plan` (the committed segments, and each
subscription with its entry filters and cursor states); Spark reads one row per
entry (the first message of each, which is what the entry filters look at),
groups the rows by topic partition, and each group calls
:func:`cursorops.core.domain.analysis.backlog.analyze` per subscription, with the verdicts of
:meth:`cursorops.core.domain.analysis.entry_filters.EntryFilters.verdicts` of the subscription's
filters. So the answer is core's, message for message, and equals
:meth:`cursorops.core.services.broker.analysis.Analysis.analyze_backlog`'s field for field.

No cap by default. ``--max-entries`` makes the answer a page of at most that
many backlog entries per subscription over the whole topic, partitions in
order, and ``--time-limit`` ends a page once the time is up; a page that stops
early sets ``aborted`` and ``resumeAfter``, a :class:`ResumeToken`
(``"P:L:E"``) to give back as ``--start-after``. Pages never overlap and sum
to the unpaged answer exactly.

``markerMessages`` is always 0: the ledger store holds no marker messages.

Run::

    spark-submit spark_apps/analyze_backlog.py [--home H] [--master M] TOPIC [-s SUB]
        [--max-entries N] [--time-limit 2m] [--start-after P:L:E] [--output result.json]

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
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import (
    COUNT_FIELDS,
    ID_FIELDS,
    BacklogAnalysis,
    PartitionAnalysis,
    analysis_document,
)
from cursorops.core.domain.analysis.entry_filters import EntryFilters, describe
from cursorops.core.domain.analysis.topic_scan import TopicScan, decode_state
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.domain.durations import parse_duration_ms
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids import chunked_messages
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.topic_name import TopicName, shown
from cursorops.spark.common import (
    ascii_int,
    base_parser,
    config_from,
    emit_json,
    executor_states,
    read_messages,
    remote_from,
    run_job,
    spark_errors,
)
from cursorops.spark.session import job_logger, session_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENTRY_COLUMNS = (
    "partition",
    "ledger_id",
    "entry_id",
    "batch_index",
    "batch_size",
    "chunk_id",
    "num_chunks_from_msg",
)
"""What every analysis reads (the chunk columns: a chunked message counts once, at its
last chunk); entry filters add the columns they look at."""

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
    """Backlog entries examined at most in each partition; None = no cap."""
    deadline_ms: int | None = None
    """Epoch ms after which no further chunk is scanned; None = no time limit."""
    start_after: Mapping[str, Position] = field(default_factory=dict)
    """Topic partition -> the position to resume after."""
    budgets: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """``(topic partition, subscription)`` -> backlog entries examined at most there;
    overrides ``max_entries`` (a page's share of its cap, see :func:`page_budgets`)."""


@dataclass(frozen=True)
class ResumeToken:
    """Where a page stopped: ``"P:L:E"``.

    Partitions before ordinal ``P`` (the partition index; 0 for a
    non-partitioned topic) are finished; partition ``P`` resumes after position
    ``L:E`` (``-1:-1``: from its start); later partitions are not started.
    """

    partition: int
    position: Position

    def __str__(self) -> str:
        return f"{self.partition}:{self.position}"


_TOKEN = re.compile(r"([0-9]{1,10}):(-1:-1|[0-9]{1,19}:[0-9]{1,19})")
_LEGACY_TOKEN = re.compile(r"([0-9]{1,19}):([0-9]{1,19})")
_INT64_MAX = (1 << 63) - 1


def parse_resume_token(text: str, scan: TopicScan, ledger_owner: Mapping[int, str]) -> ResumeToken:
    """``P:L:E`` (a page's ``resumeAfter``), or a bare ``L:E``, routed to its ledger's partition.

    The ledger must belong to the partition named: a token is never moved
    onto another partition.
    """
    names = [source.name for source in scan.partitions]
    where = f"Invalid --start-after '{text}'"
    match = _TOKEN.fullmatch(text.strip())
    legacy = None if match else _LEGACY_TOKEN.fullmatch(text.strip())
    if match is None and legacy is None:
        raise InvalidArgumentError(
            f"{where}: expected partition:ledgerId:entryId, a page's resumeAfter"
        )
    if match is not None:
        ledger, entry = map(int, match.group(2).split(":"))
        ordinal = int(match.group(1))
        if ordinal >= len(names):
            raise InvalidArgumentError(
                f"{where}: {scan.topic} has no partition {ordinal} "
                f"({len(names)} partition(s), numbered from 0)"
            )
    else:
        assert legacy is not None
        ledger, entry = int(legacy.group(1)), int(legacy.group(2))
        owner = ledger_owner.get(ledger)
        ordinal = names.index(owner) if owner in names else -1
    position = Position(ledger, entry)
    if position != EARLIEST:
        if max(ledger, entry) > _INT64_MAX:
            raise InvalidArgumentError(f"{where}: the ledger or entry id is out of range")
        if ledger_owner.get(ledger) not in names:
            raise InvalidArgumentError(f"{where}: ledger {ledger} is not a ledger of {scan.topic}")
        if ledger_owner[ledger] != names[ordinal]:
            raise InvalidArgumentError(
                f"{where}: ledger {ledger} belongs to {ledger_owner[ledger]}, not to partition "
                f"{ordinal}"
            )
    return ResumeToken(ordinal, position)


def page_budgets(
    partitions: Sequence[str],
    subscriptions: Sequence[str],
    backlog_entries: Mapping[tuple[str, str], int],
    max_entries: int,
    first: int,
) -> dict[tuple[str, str], int]:
    """Each partition's share of a page of ``max_entries`` backlog entries, per subscription.

    Partitions are taken in order from ordinal ``first`` (earlier ones get 0:
    earlier pages finished them), each as far as the page's remaining budget
    goes. ``backlog_entries`` are the entries each would examine uncapped.
    """
    budgets = {}
    for subscription in subscriptions:
        remaining = max_entries
        for ordinal, name in enumerate(partitions):
            take = (
                0
                if ordinal < first
                else min(backlog_entries.get((name, subscription), 0), remaining)
            )
            budgets[(name, subscription)] = take
            remaining -= take
    return budgets


def paginate(
    partitions: Sequence[str], analyses: Sequence[PartitionAnalysis], first: int
) -> list[PartitionAnalysis]:
    """One page from per-partition results: every partition in order, cut at the first abort.

    Partitions before ordinal ``first`` count nothing (earlier pages did);
    the first aborted partition keeps what it counted and gets the page's
    :class:`ResumeToken` as ``resume_after``; every later partition counts
    nothing and is ``aborted`` (not reached: a time limit may have let it
    run, but the next page scans it, so this page must not count it).
    """
    ordinal_of = {name: ordinal for ordinal, name in enumerate(partitions)}
    stopped: set[str] = set()
    out = []
    for one in sorted(analyses, key=lambda a: ordinal_of[a.topic_partition]):
        ordinal = ordinal_of[one.topic_partition]
        result = one.result
        if ordinal < first:
            result = BacklogAnalysis()
        elif one.subscription in stopped:
            result = BacklogAnalysis(aborted=True)
        elif result.aborted:
            stopped.add(one.subscription)
            after = (
                Position(*map(int, result.resume_after.split(":")))
                if result.resume_after
                else EARLIEST
            )
            result = replace(result, resume_after=str(ResumeToken(ordinal, after)))
        out.append(PartitionAnalysis(one.topic_partition, one.subscription, result))
    order = {(a.topic_partition, a.subscription): i for i, a in enumerate(analyses)}
    return sorted(out, key=lambda a: order[(a.topic_partition, a.subscription)])


def entry_chunk_rest(entries: pa.Table) -> np.ndarray | None:
    """Per entry row, whether it is a chunk before its message's last
    (:func:`cursorops.core.domain.ids.chunked_messages.chunk_rest`); None when the rows hold no such
    chunk, or have no chunk columns (rows built without them)."""
    import pyarrow.compute as pc

    if "num_chunks_from_msg" not in entries.column_names:
        return None
    chunks = entries.column("num_chunks_from_msg")
    if chunks.null_count == len(chunks):
        return None
    rest = chunked_messages.chunk_rest(
        pc.fill_null(entries.column("chunk_id"), -1).to_numpy(),
        pc.fill_null(chunks, 0).to_numpy(),
    )
    return rest if rest.any() else None


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
    chunk_rest: np.ndarray | None = None,
) -> BacklogAnalysis:
    """:func:`cursorops.core.domain.analysis.backlog.analyze`, in chunks when a deadline is set
    (``chunk_rest``
    as it takes it: a chunked message counted once).

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
            chunk_rest=chunk_rest,
        )
    total = BacklogAnalysis()
    remaining = max_entries
    examined = start_after
    if examined is None and state.mark_delete != EARLIEST:
        examined = state.mark_delete
    for begin in range(0, len(ledger_ids), CHUNK_ENTRIES):
        end = begin + CHUNK_ENTRIES
        if time.time_ns() // 1_000_000 >= deadline_ms:
            total = replace(
                total, aborted=True, resume_after=None if examined is None else str(examined)
            )
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
                chunk_rest=None if chunk_rest is None else chunk_rest[begin:],
            )
            if rest.aborted:
                total = replace(total, aborted=True, resume_after=total.last_message_id)
            break
        part = backlog.analyze(
            state,
            ledger_ids[begin:end],
            entry_ids[begin:end],
            batch_sizes[begin:end],
            None if verdicts is None else verdicts[begin:end],
            start_after=start_after,
            max_entries=remaining,
            chunk_rest=None if chunk_rest is None else chunk_rest[begin:end],
        )
        total = total.plus(part)
        if part.aborted:
            total = replace(total, resume_after=part.resume_after)
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
    rest = entry_chunk_rest(entries)
    started = time.monotonic()
    rows = []
    for subscription in subscriptions:
        state = decode_state(states[(name, subscription)])
        chosen = filters.get(subscription)
        verdicts = chosen.verdicts(entries) if chosen else None
        result = analyze_entries(
            state,
            ledger_ids,
            entry_ids,
            batch_sizes,
            verdicts,
            start_after=limits.start_after.get(name),
            max_entries=limits.budgets.get((name, subscription), limits.max_entries),
            deadline_ms=limits.deadline_ms,
            chunk_rest=rest,
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
    :func:`cursorops.core.domain.analysis.entry_filters.first_messages` keeps). Partitions without
    entries yield
    no row. Cursor states go to the executors inside the function's closure
    (see :func:`cursorops.spark.common.executor_states`).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    shared = executor_states(states)
    chosen = dict(filters or {})
    bound = limits or ScanLimits()
    names = dict(names)
    subs = list(subscriptions)

    def analyze_group(table):  # type: ignore[no-untyped-def]
        # Untyped on purpose: Spark reads type hints to pick the grouped-map flavour.
        return analyze_partition(table, names, subs, shared, chosen, bound)

    first = entries.where(F.col("batch_index") <= 0)
    return first.groupBy("partition").applyInArrow(analyze_group, from_arrow_schema(RESULT_SCHEMA))


COUNT_SCHEMA = pa.schema(
    [
        pa.field("topic_partition", pa.string(), nullable=False),
        pa.field("subscription", pa.string(), nullable=False),
        pa.field("entries", pa.int64(), nullable=False),
    ]
)
"""Backlog entries after the start position, per topic partition and subscription."""


def count_partition(
    entries: pa.Table,
    names: Mapping[int, str],
    subscriptions: Sequence[str],
    states: Mapping[tuple[str, str], bytes],
    start_after: Mapping[str, Position],
) -> pa.Table:
    """Every subscription's backlog entries in one topic partition (the body of a Spark group)."""
    entries = entries.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    name = names[entries.column("partition")[0].as_py()]
    ledger_ids = entries.column("ledger_id").to_numpy()
    entry_ids = entries.column("entry_id").to_numpy()
    batch_sizes = entries.column("batch_size").to_numpy()
    rest = entry_chunk_rest(entries)
    rows = []
    for subscription in subscriptions:
        state = decode_state(states[(name, subscription)])
        result = backlog.analyze(
            state,
            ledger_ids,
            entry_ids,
            batch_sizes,
            start_after=start_after.get(name),
            chunk_rest=rest,
        )
        rows.append(
            {"topic_partition": name, "subscription": subscription, "entries": result.entries}
        )
    return pa.Table.from_pylist(rows, schema=COUNT_SCHEMA)


def count_transform(
    entries: DataFrame,
    *,
    names: Mapping[int, str],
    subscriptions: Sequence[str],
    states: Mapping[tuple[str, str], bytes],
    start_after: Mapping[str, Position] | None = None,
) -> DataFrame:
    """Message rows -> one :data:`COUNT_SCHEMA` row per topic partition and subscription.

    What a page needs before it analyses: how far each partition's backlog
    goes, so the page's cap can be shared out in partition order. Partitions
    without entries yield no row.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    shared = executor_states(states)
    names = dict(names)
    subs = list(subscriptions)
    starts = dict(start_after or {})

    def count_group(table):  # type: ignore[no-untyped-def]
        return count_partition(table, names, subs, shared, starts)

    first = entries.where(F.col("batch_index") <= 0)
    return first.groupBy("partition").applyInArrow(count_group, from_arrow_schema(COUNT_SCHEMA))


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
                values: dict[str, Any] = {name: int(row[name]) for name in COUNT_FIELDS}
                values["aborted"] = bool(row["aborted"])
                values.update((name, row[name]) for name in ID_FIELDS)
                result = BacklogAnalysis(**values)
            out.append(PartitionAnalysis(source.name, sub.name, result))
    return out


def run(
    config: Config,
    topic: str | TopicName,
    subscription: str | None = None,
    master: str | None = None,
    *,
    role: str = "admin",
    spark: SparkSession | None = None,
    max_entries: int | None = None,
    time_limit_ms: int | None = None,
    start_after: str | None = None,
    remote: str | None = None,
) -> list[PartitionAnalysis]:
    """The Spark twin of :meth:`cursorops.core.services.broker.analysis.Analysis.analyze_backlog`
    (same list, same order).

    Paged when ``max_entries`` or ``time_limit_ms`` is given: a page examines at
    most ``max_entries`` backlog entries per subscription over the whole topic,
    partitions in order, and the partition where it stops carries the
    :class:`ResumeToken` to give back as ``start_after`` (one subscription
    then). Pages never overlap and together count exactly the unpaged answer.
    Builds a session on ``master`` (or on the Spark Connect server ``remote``,
    see :func:`cursorops.spark.session.build_session`) unless ``spark`` is given, and
    then stops it.
    """
    from cursorops.core.services.broker import Broker

    log = job_logger("cursorops.analyze_backlog")
    if max_entries is not None and max_entries < 1:
        raise InvalidArgumentError(f"Invalid --max-entries {max_entries}: expected at least 1")
    with Broker(config) as broker:
        scan = broker.analysis.scan_plan(role, topic, subscription, operation=Operation.CONSUME)
    token = (
        None if start_after is None else parse_resume_token(start_after, scan, scan.ledger_owner)
    )
    if token is not None and len(scan.subscriptions) > 1:
        raise InvalidArgumentError(
            f"Invalid --start-after '{start_after}': a resume token continues one "
            "subscription's pages; give -s"
        )
    filters = {sub.name: sub.filters() for sub in scan.subscriptions}
    for name, chosen in filters.items():
        for line in describe(chosen):
            log.info("subscription %s filter %s", name, line)
    if not scan.subscriptions:
        log.info("%s has no subscription: nothing to analyse", scan.topic)
        return []
    partitions = [source.name for source in scan.partitions]
    subs = [sub.name for sub in scan.subscriptions]
    first = 0 if token is None else token.partition
    starts = {} if token is None else {partitions[token.partition]: token.position}
    columns = list(ENTRY_COLUMNS) + sorted(
        frozenset().union(*(f.columns for f in filters.values())) - set(ENTRY_COLUMNS)
    )
    log.info(
        "analysing %s: %d partition(s), %d segment(s), %d subscription(s)",
        scan.topic,
        len(scan.partitions),
        len(scan.paths),
        len(scan.subscriptions),
    )
    with (
        session_scope(master, "cursorops-analyze-backlog", spark, remote) as session,
        spark_errors(scan),
    ):
        messages = read_messages(session, scan, columns)
        budgets = {}
        if max_entries is not None:
            counted = count_transform(
                messages,
                names=scan.names,
                subscriptions=subs,
                states=scan.states,
                start_after=starts,
            ).collect()
            backlog_entries = {
                (r["topic_partition"], r["subscription"]): r["entries"] for r in counted
            }
            budgets = page_budgets(partitions, subs, backlog_entries, max_entries, first)
        elif first:
            budgets = {(name, sub): 0 for name in partitions[:first] for sub in subs}
        deadline = None if time_limit_ms is None else time.time_ns() // 1_000_000 + time_limit_ms
        result = transform(
            messages,
            names=scan.names,
            subscriptions=subs,
            states=scan.states,
            filters=filters,
            limits=ScanLimits(None, deadline, starts, budgets),
        )
        rows = [row.asDict() for row in result.collect()]
    analyses = collect_analyses(scan, rows)
    if max_entries is not None or time_limit_ms is not None or token is not None:
        analyses = paginate(partitions, analyses, first)
    for source in scan.partitions:
        mine = [one for one in analyses if one.topic_partition == source.name]
        log.info(
            "%s: %s",
            source.name,
            "; ".join(
                f"{one.subscription} {one.result.entries} entries, {one.result.messages} messages"
                + (
                    f", aborted, resume after {one.result.resume_after}"
                    if one.result.resume_after
                    else ""
                )
                for one in mine
            ),
        )
    return analyses


def page_document(
    topic: str, subscription: str | None, analyses: Sequence[PartitionAnalysis]
) -> dict[str, Any]:
    """:func:`cursorops.core.domain.analysis.backlog.analysis_document`, with each subscription's
    resume token.

    A subscription's summary carries the ``resumeAfter`` of the partition where
    its page stopped (None when it is complete); so does the total when one
    subscription was analysed.
    """
    document: dict[str, Any] = analysis_document(topic, subscription, analyses)
    tokens: dict[str, str | None] = {}
    for one in analyses:
        tokens.setdefault(one.subscription, None)
        if one.result.resume_after is not None and tokens[one.subscription] is None:
            tokens[one.subscription] = one.result.resume_after
    for name, token in tokens.items():
        document["subscriptions"][name]["resumeAfter"] = token
    if len(tokens) == 1:
        document["total"]["resumeAfter"] = next(iter(tokens.values()))
    return document


def parse_time_limit(text: str) -> int:
    """A positive duration in :mod:`cursorops.core.domain.durations`' grammar (``250ms``, ``30s``,
    ``2m``)."""
    limit_ms = parse_duration_ms(text, "--time-limit")
    if limit_ms == 0:
        raise InvalidArgumentError(
            f"Invalid --time-limit {shown(text)}: expected a positive duration such as 30s or 2m"
        )
    return limit_ms


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(
        "analyze_backlog",
        "PIP-187 backlog analysis, exact and uncapped, per partition and subscription, on Spark",
    )
    parser.add_argument("-s", "--subscription", help="one subscription (default: all)")
    parser.add_argument(
        "--max-entries",
        type=ascii_int,
        help="page size: backlog entries per subscription over the whole topic",
    )
    parser.add_argument("--time-limit", help="stop scanning after this long (90s, 2m)")
    parser.add_argument(
        "--start-after",
        metavar="P:L:E",
        help="continue a paged analysis: the previous page's resumeAfter (needs -s with "
        "several subscriptions)",
    )
    parser.add_argument("--output", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)

    def job() -> int:
        remote = remote_from(args)
        topic = TopicName.parse(args.topic)
        analyses = run(
            config_from(args),
            topic,
            args.subscription,
            args.master,
            role=args.role,
            max_entries=args.max_entries,
            time_limit_ms=None if args.time_limit is None else parse_time_limit(args.time_limit),
            start_after=args.start_after,
            remote=remote,
        )
        document = page_document(str(topic), args.subscription, analyses)
        emit_json(document, args.output, sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    # Re-enter through the package, so executors unpickle these functions by module name.
    from cursorops.spark.analyze_backlog import main as package_main

    sys.exit(package_main(sys.argv[1:]))

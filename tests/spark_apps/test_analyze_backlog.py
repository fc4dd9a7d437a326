"""analyze_backlog: the transform on inline data, and Spark == core on randomised topics."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.testing import assertDataFrameEqual

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.domain.analysis.entry_filters import EntryFilters, first_messages
from cursorops.core.domain.ids.position import Position
from cursorops.core.services.broker import Broker
from cursorops.spark import analyze_backlog
from cursorops.spark.analyze_backlog import (
    RESULT_SCHEMA,
    analyze_entries,
    transform,
)
from tests.spark_apps.topics import TOPIC, core_analyses, cursor_states, make_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _as_tuples(analyses: list) -> list[tuple[str, str, backlog.BacklogAnalysis]]:
    return [(a.topic_partition, a.subscription, a.result) for a in analyses]


# -- the transform on inline rows -------------------------------------------------------


@pytest.mark.spark
def test_transform_discounts_acknowledged_batch_indexes_and_applies_filters(
    spark: SparkSession,
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("partition", IntegerType(), False),
            StructField("ledger_id", LongType(), False),
            StructField("entry_id", LongType(), False),
            StructField("batch_index", IntegerType(), False),
            StructField("batch_size", IntegerType(), False),
            StructField("key", StringType(), True),
        ]
    )
    rows = [
        (0, 5, 0, 0, 3, "a"),
        (0, 5, 0, 1, 3, "b"),
        (0, 5, 0, 2, 3, "b"),
        (0, 5, 1, -1, 0, "b"),
        (0, 5, 2, -1, 0, "a"),
        (1, 9, 0, 0, 2, "b"),
        (1, 9, 0, 1, 2, "a"),
        (1, 9, 1, -1, 0, None),
    ]
    p0 = CursorState()
    p0.acknowledge(
        [AckTarget(Position(5, 0), 1, 3), AckTarget(Position(5, 1))], LedgerLayout.of([(5, 3)])
    )
    p1 = CursorState(mark_delete=Position(9, 0))
    result = transform(
        spark.createDataFrame(rows, schema),
        names={0: "p0", 1: "p1"},
        subscriptions=["s"],
        states={("p0", "s"): cursor_codec.encode(p0), ("p1", "s"): cursor_codec.encode(p1)},
        filters={"s": EntryFilters.from_properties({"entryFilter.reject.key": "b"})},
    )
    #   p0: 5:0 has 2 of 3 left (its first message's key 'a': accepted), 5:1 acked, 5:2 left.
    #   p1: mark-delete 9:0, so only 9:1 (no key: accepted).
    expected = spark.createDataFrame(
        [
            ("p0", "s", 2, 3, 2, 0, 0, 3, 0, 0, 0, False, "5:0", "5:2", None),
            ("p1", "s", 1, 1, 1, 0, 0, 1, 0, 0, 0, False, "9:1", "9:1", None),
        ],
        from_arrow_schema(RESULT_SCHEMA),
    )
    assertDataFrameEqual(result, expected)


@pytest.mark.spark
def test_transform_of_no_rows_is_no_rows(spark: SparkSession) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from cursorops.spark.common import spark_message_schema

    empty = spark.createDataFrame([], spark_message_schema())
    result = transform(empty, names={}, subscriptions=["s"], states={})
    assertDataFrameEqual(result, spark.createDataFrame([], from_arrow_schema(RESULT_SCHEMA)))


@pytest.mark.spark
def test_transform_judges_each_entry_by_the_rows_core_calls_first_messages(
    spark: SparkSession,
) -> None:
    """Only each entry's first message decides its verdict, in Spark as in core."""
    import pyarrow as pa

    table = pa.table(
        {
            "partition": pa.array([0] * 7, pa.int32()),
            "ledger_id": pa.array([5] * 7, pa.int64()),
            "entry_id": pa.array([0, 0, 0, 1, 2, 2, 3], pa.int64()),
            # Index 1 before index 0 in the data: order must not pick the first message.
            "batch_index": pa.array([1, 0, 2, -1, 1, 0, -1], pa.int32()),
            "batch_size": pa.array([3, 3, 3, 0, 2, 2, 0], pa.int32()),
            "key": pa.array(["bad", "good", "bad", "bad", "good", "bad", "good"]),
        }
    )
    filters = EntryFilters.from_properties({"entryFilter.reject.key": "bad"})
    first = first_messages(table).sort_by([("entry_id", "ascending")])
    expected = backlog.analyze(
        CursorState(),
        first.column("ledger_id").to_numpy(),
        first.column("entry_id").to_numpy(),
        first.column("batch_size").to_numpy(),
        filters.verdicts(first),
    )
    # 5:0 (first key good, 3 messages) and 5:3 accepted; 5:1 and 5:2 (first key bad) rejected.
    assert (expected.filter_accepted_entries, expected.filter_accepted_messages) == (2, 4)
    assert (expected.filter_rejected_entries, expected.filter_rejected_messages) == (2, 3)
    rows = transform(
        spark.createDataFrame(table.to_pandas()),
        names={0: "p0"},
        subscriptions=["s"],
        states={("p0", "s"): cursor_codec.encode(CursorState())},
        filters={"s": filters},
    ).collect()
    assert len(rows) == 1
    got = dataclasses.asdict(expected)
    assert {name: rows[0][name] for name in got} == got


# -- the chunked, time-limited scan against core's one-shot analysis ------------------------


@st.composite
def scans(draw: st.DrawFn) -> tuple[CursorState, np.ndarray, np.ndarray, np.ndarray, dict]:
    n = draw(st.integers(0, 40))
    sizes = np.array(draw(st.lists(st.sampled_from([0, 2, 4]), min_size=n, max_size=n)))
    ledgers = np.array([1] * (n // 2) + [3] * (n - n // 2), dtype=np.int64)
    entries = np.array(list(range(n // 2)) + list(range(n - n // 2)), dtype=np.int64)
    layout = LedgerLayout.of([(1, n // 2), (3, n - n // 2)])
    state = CursorState()
    targets = []
    for row in draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n)) if n else []:
        position = Position(int(ledgers[row]), int(entries[row]))
        size = int(sizes[row])
        if size and draw(st.booleans()):
            targets.append(AckTarget(position, draw(st.integers(0, size - 1)), size))
        else:
            targets.append(AckTarget(position))
    state.acknowledge(targets, layout)
    verdicts = np.array(draw(st.lists(st.sampled_from([0, 1, 2]), min_size=n, max_size=n)))
    options = {
        "max_entries": draw(st.none() | st.integers(0, n + 1)),
        "start_after": draw(
            st.none() | st.sampled_from([Position(1, 2), Position(3, 0), Position(0, 0)])
        ),
    }
    return state, ledgers, entries, sizes, {"verdicts": verdicts, **options}


@settings(max_examples=200, deadline=None)
@given(scans(), st.integers(1, 7))
def test_chunked_scan_equals_one_shot_analysis(
    case: tuple[CursorState, np.ndarray, np.ndarray, np.ndarray, dict], chunk: int
) -> None:
    state, ledgers, entries, sizes, options = case
    expected = backlog.analyze(
        state,
        ledgers,
        entries,
        sizes,
        options["verdicts"],
        start_after=options["start_after"],
        max_entries=options["max_entries"],
    )
    saved = analyze_backlog.CHUNK_ENTRIES
    analyze_backlog.CHUNK_ENTRIES = chunk
    try:
        got = analyze_entries(
            state,
            ledgers,
            entries,
            sizes,
            options["verdicts"],
            start_after=options["start_after"],
            max_entries=options["max_entries"],
            deadline_ms=time.time_ns() // 1_000_000 + 3_600_000,
        )
    finally:
        analyze_backlog.CHUNK_ENTRIES = saved
    if options["max_entries"] == 0 and expected.aborted:
        # backlog.analyze names no position when capped at zero; the scan names where it stood.
        expected = dataclasses.replace(expected, resume_after=None)
    assert got == expected


def test_a_passed_deadline_aborts_where_the_scan_stood() -> None:
    state = CursorState(mark_delete=Position(1, 3))
    ledgers = np.ones(10, dtype=np.int64)
    entries = np.arange(10, dtype=np.int64)
    sizes = np.zeros(10, dtype=np.int64)
    got = analyze_entries(state, ledgers, entries, sizes, None, deadline_ms=0)
    assert (got.aborted, got.entries, got.resume_after) == (True, 0, "1:3")
    got = analyze_entries(CursorState(), ledgers, entries, sizes, None, deadline_ms=0)
    assert (got.aborted, got.resume_after) == (True, None)


# -- Spark == core on randomised topics ---------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "partitions"), [(11, 3), (12, 0), (13, 4)])
def test_spark_equals_core_on_random_topics(
    spark: SparkSession, tmp_path: Path, seed: int, partitions: int
) -> None:
    topic = make_topic(tmp_path / "home", seed, partitions=partitions, messages=300)
    expected = core_analyses(topic.config, TOPIC)
    got = analyze_backlog.run(topic.config, TOPIC, spark=spark)
    assert _as_tuples(got) == _as_tuples(expected)
    assert sum(a.result.filter_rejected_messages for a in got) > 0
    assert sum(a.result.filter_rescheduled_entries for a in got) > 0
    # Without filters, the broker's own pure-Python path gives the very same answer.
    with Broker(topic.config) as broker:
        plain = broker.analysis.analyze_backlog("admin", TOPIC)
    for mine, theirs in zip(got, plain, strict=True):
        assert (mine.topic_partition, mine.subscription) == (
            theirs.topic_partition,
            theirs.subscription,
        )
        if mine.subscription != "filtered":
            assert mine.result == theirs.result
        else:
            assert (mine.result.entries, mine.result.messages) == (
                theirs.result.entries,
                theirs.result.messages,
            )
    one = analyze_backlog.run(topic.config, TOPIC, "keyed", spark=spark)
    assert _as_tuples(one) == [t for t in _as_tuples(expected) if t[1] == "keyed"]


def _pages(home: Path, subscription: str, max_entries: int, tmp_path: Path) -> list[dict[str, Any]]:
    """Every page of a paged analysis through ``main``: resumeAfter fed back as --start-after."""
    pages: list[dict[str, Any]] = []
    token = None
    while True:
        out = tmp_path / f"page-{len(pages)}.json"
        argv = ["--home", str(home), TOPIC, "-s", subscription, "--max-entries", str(max_entries)]
        argv += ["--output", str(out)] + ([] if token is None else ["--start-after", token])
        assert analyze_backlog.main(argv) == 0
        page = json.loads(out.read_text())
        pages.append(page)
        token = page["total"]["resumeAfter"]
        assert (token is not None) == page["total"]["aborted"]
        if token is None:
            return pages
        assert page["total"]["entries"] <= max_entries
        assert len(pages) < 500


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _parse_id(text: str) -> tuple[int, int]:
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "partitions"), [(21, 2), (22, 0), (23, 3)])
def test_pages_add_up_to_the_unpaged_analysis_exactly(
    spark: SparkSession, tmp_path: Path, seed: int, partitions: int
) -> None:
    rng = random.Random(seed)
    topic = make_topic(tmp_path / "home", seed, partitions=partitions, messages=rng.randint(30, 60))
    subscription = rng.choice(["plain", "filtered"])
    whole = {
        a.topic_partition: a.result
        for a in core_analyses(topic.config, TOPIC)
        if a.subscription == subscription
    }
    total_entries = sum(r.entries for r in whole.values())
    assert total_entries > 3
    # Spark jobs are slow here: sizes that make at most 5 pages, one of them a single page.
    sizes = {rng.randint(-(-total_entries // 5), total_entries // 2), total_entries + 1}
    for max_entries in sorted(sizes):
        (tmp_path / str(max_entries)).mkdir()
        pages = _pages(topic.config.home, subscription, max_entries, tmp_path / str(max_entries))
        assert len(pages) == -(-total_entries // max_entries)
        summed = {name: backlog.BacklogAnalysis() for name in whole}
        last_seen: dict[str, tuple[int, int]] = {}
        for page in pages:
            for row in page["partitions"]:
                name = row["topicPartition"]
                counts = {field: row[_camel(field)] for field in backlog.COUNT_FIELDS}
                summed[name] = summed[name].plus(backlog.BacklogAnalysis(**counts))
                if row["entries"]:
                    # No overlap: each page starts after where the last one ended.
                    first, last = _parse_id(row["firstMessageId"]), _parse_id(row["lastMessageId"])
                    assert first > last_seen.get(name, (-1, -1)) and last >= first
                    last_seen[name] = last
        for name, result in whole.items():
            assert [getattr(summed[name], f) for f in backlog.COUNT_FIELDS] == [
                getattr(result, f) for f in backlog.COUNT_FIELDS
            ]


@pytest.mark.spark
def test_time_limit_reports_aborted_and_where_to_resume(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic = make_topic(tmp_path / "home", 31, partitions=2, messages=120)
    got = analyze_backlog.run(topic.config, TOPIC, "plain", spark=spark, time_limit_ms=1)
    states = cursor_states(topic.config, TOPIC, "plain")
    first, second = got
    assert all(one.result.aborted and one.result.entries == 0 for one in got)
    # The page stops in the first partition, where nothing was examined yet; the second is
    # not reached (its own scan, if any, is not counted: the next page does it).
    mark_delete = states[first.topic_partition].mark_delete
    assert first.result.resume_after == f"0:{mark_delete if mark_delete >= (0, 0) else '-1:-1'}"
    assert second.result.resume_after is None
    document: dict[str, Any] = analyze_backlog.page_document(TOPIC, "plain", got)
    assert document["total"]["aborted"] is True
    assert document["total"]["resumeAfter"] == first.result.resume_after


def test_totals_over_partitions_have_no_first_or_last_id() -> None:
    analyses = [
        dataclasses.replace(
            a, result=backlog.BacklogAnalysis(entries=i, messages=2 * i, first_message_id="1:0")
        )
        for i, a in enumerate(
            [
                analyze_backlog_partition("p0", "a"),
                analyze_backlog_partition("p0", "b"),
                analyze_backlog_partition("p1", "a"),
            ]
        )
    ]
    document: dict[str, Any] = analysis_document(TOPIC, None, analyses)
    assert document["total"]["messages"] == 6
    assert document["subscriptions"]["a"]["entries"] == 2
    assert document["total"]["firstMessageId"] is None


def analyze_backlog_partition(partition: str, subscription: str):  # type: ignore[no-untyped-def]
    return backlog.PartitionAnalysis(partition, subscription, backlog.BacklogAnalysis())

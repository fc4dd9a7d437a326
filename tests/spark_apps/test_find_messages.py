"""find_messages: the transform on inline rows, and Spark == core == the read path."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis.match_conditions import MATCH_OPTIONS
from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.errors import InvalidPredicateError
from cursorops.core.domain.ids.position import Position
from cursorops.core.store.ledger import MESSAGE_SCHEMA
from cursorops.spark import find_messages
from cursorops.spark.find_messages import add_match_flags, predicate_document, transform
from cursorops.spark.match_list import MATCH_LIST_SCHEMA, match_list_ids, read_match_list
from tests.spark_apps.topics import NOW, TOPIC, core_matches, make_topic, peeked_matches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
def test_transform_finds_unacknowledged_matches_only(spark: SparkSession) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from cursorops.spark.common import spark_message_schema

    def message(entry: int, index: int, size: int, key: str | None, deliver_at: int | None,
                payload: bytes) -> tuple[Any, ...]:  # fmt: skip
        return (0, 7, entry, index, size, NOW, deliver_at, key, {"c": "x"}, payload, "p", entry,
                None, None, *[None] * (len(MESSAGE_SCHEMA) - 14))  # fmt: skip

    rows = [
        message(0, 0, 3, "a", None, b"first"),
        message(0, 1, 3, "a", None, b"second"),
        message(0, 2, 3, "b", None, b"third"),
        message(1, -1, 0, "a", NOW + 5, b"\xe2\x82\xac delayed"),
        message(2, -1, 0, "a", None, b"acked"),
    ]
    state = CursorState()
    state.acknowledge(
        [AckTarget(Position(7, 0), 1, 3), AckTarget(Position(7, 2))], LedgerLayout.of([(7, 3)])
    )
    frame = spark.createDataFrame(rows, spark_message_schema()).select(
        *find_messages.MESSAGE_COLUMNS
    )
    result = transform(
        frame,
        topic="persistent://t/n/x",
        subscription="s",
        names={0: "persistent://t/n/x-partition-0"},
        states={("persistent://t/n/x-partition-0", "s"): cursor_codec.encode(state)},
        predicate=parse_predicate({"key": "a"}),
    )

    def planned(entry: int, index: int, size: int, deliver_at: int | None, payload: bytes,
                message_id: str) -> tuple[Any, ...]:  # fmt: skip
        return (
            "persistent://t/n/x", "s", "persistent://t/n/x-partition-0", 0, 7, entry, index,
            size, message_id, "a", NOW, deliver_at, {"c": "x"}, len(payload),
            payload.decode(), None,
        )  # fmt: skip

    expected = spark.createDataFrame(
        [
            planned(0, 0, 3, None, b"first", "7:0:0"),
            planned(1, -1, 0, NOW + 5, "€ delayed".encode(), "7:1"),
        ],
        from_arrow_schema(MATCH_LIST_SCHEMA),
    )
    assertDataFrameEqual(result, expected, checkRowOrder=True)


def _args(**given: Any) -> argparse.Namespace:
    names = ("predicate", *(option.name for option in MATCH_OPTIONS))
    return argparse.Namespace(**{name: None for name in names} | given)


def test_the_flags_are_the_match_options() -> None:
    parser = argparse.ArgumentParser()
    add_match_flags(parser)
    args = parser.parse_args(
        ["--property", "a=1", "--property", "b=2", "--deliver-at-after", "now"]
    )
    assert vars(args) == {option.name: None for option in MATCH_OPTIONS} | {
        "property": ["a=1", "b=2"],
        "deliver_at_after": "now",
    }
    assert predicate_document(argparse.Namespace(predicate=None, **vars(args))) == {
        "properties": {"a": "1", "b": "2"},
        "deliverAt": {"after": "now"},
    }


def test_shortcut_options_build_the_predicate_document(tmp_path: Path) -> None:
    source = tmp_path / "p.json"
    source.write_text('{"jsonField": {"path": "a.b", "equals": [1]}}')
    document = predicate_document(
        _args(
            predicate=f"@{source}",
            key="k",
            property=["region=eu", "tier=gold=1"],
            deliver_at_after="now",
            payload_contains="boom",
            producer="orders-a",
        )
    )
    assert document == {
        "jsonField": {"path": "a.b", "equals": [1]},
        "key": "k",
        "properties": {"region": "eu", "tier": "gold=1"},
        "deliverAt": {"after": "now"},
        "payloadContains": "boom",
        "producer": "orders-a",
    }
    assert parse_predicate(document, now_ms=NOW).deliver_at is not None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"predicate": '{"key": "a"}', "key": "b"}, "key given both"),
        ({"property": ["novalue"]}, "^Invalid --property 'novalue': expected NAME=VALUE$"),
        (
            {"predicate": '{"producer": "a"}', "producer": "b"},
            "^Invalid predicate: producer given both in --predicate and as an option$",
        ),
        ({"predicate": "@/nonexistent/p.json"}, "Invalid predicate file"),
        ({"predicate": "[1]"}, "expected a JSON object"),
    ],
)
def test_bad_predicate_options(given: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        predicate_document(_args(**given))


PREDICATES: list[dict[str, Any]] = [
    {"key": "k2"},
    {"properties": {"color": "green"}, "deliverAt": {"after": NOW}},
    {"jsonField": {"path": "order.state", "equals": "paid"}, "payloadContains": "paid"},
    {"producer": "orders-b", "key": "k1"},
    {"publishTime": {"after": NOW + 2_000, "before": NOW + 5_000}},
]


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "partitions"), [(41, 3), (42, 0)])
def test_spark_match_list_equals_core_and_the_read_path(
    spark: SparkSession, tmp_path: Path, seed: int, partitions: int
) -> None:
    topic = make_topic(tmp_path / "home", seed, partitions=partitions, messages=260)
    for number, document in enumerate(PREDICATES):
        predicate = parse_predicate(document)
        output = str(tmp_path / f"matches-{number}")
        summary = find_messages.run(topic.config, TOPIC, "plain", predicate, output, spark=spark)
        matches = read_match_list(output)
        assert matches.schema.names == MATCH_LIST_SCHEMA.names
        found = sorted(matches.column("message_id").to_pylist())
        assert found == core_matches(topic.config, TOPIC, "plain", predicate)
        assert found == peeked_matches(topic.config, TOPIC, "plain", predicate)
        assert summary["matches"] == len(found) == sum(summary["perPartition"].values())
        assert len(summary["preview"]) == min(len(found), find_messages.PREVIEW_ROWS)
        assert [m.triplet() for m in match_list_ids(matches)] == matches.column(
            "message_id"
        ).to_pylist()
        keys = ["partition", "ledger_id", "entry_id", "batch_index"]
        ordered = matches.select(keys).to_pylist()
        assert ordered == sorted(ordered, key=lambda r: tuple(r[k] for k in keys))
    assert found, "the last predicate matches something on every seed"


@pytest.mark.spark
def test_nothing_found_writes_an_empty_match_list(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(tmp_path / "home", 43, partitions=2, messages=60)
    output = str(tmp_path / "plan")
    summary = find_messages.run(
        topic.config, TOPIC, "plain", parse_predicate({"key": "nobody"}), output, spark=spark
    )
    assert summary["matches"] == 0 and summary["preview"] == []
    assert pq.read_table(output).num_rows == 0
    # The job's log (an Airflow task log, open to every reader of the DAG) masks the
    # predicate's content.
    logged = capfd.readouterr().err
    assert '"key": "6 bytes, masked"' in logged and "nobody" not in logged


@pytest.mark.spark
def test_the_summary_read_here_equals_the_summary_spark_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic = make_topic(tmp_path / "home", 44, partitions=3, messages=400)
    output = str(tmp_path / "matches")
    find_messages.run(
        topic.config, TOPIC, "plain", parse_predicate(PREDICATES[-1]), output, spark=spark
    )
    here = find_messages.written_summary(spark, output)
    by_spark = find_messages.written_summary(spark, output, local=False)
    assert here[0] == by_spark[0] and sum(here[0].values()) > find_messages.PREVIEW_ROWS
    # Maps come back as pairs from pyarrow and as dicts from Spark: the document makes both dicts.
    assert [{**r, "properties": dict(r["properties"] or {})} for r in here[1]] == [
        {**r, "properties": dict(r["properties"] or {})} for r in by_spark[1]
    ]
    assert len(here[1]) == find_messages.PREVIEW_ROWS

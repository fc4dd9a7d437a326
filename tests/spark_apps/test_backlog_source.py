"""The backlog as a Spark data source (``spark.read.format("cursorops")``): the rows the
relation holds, one input partition per topic partition, the same answers as DuckDB's, no
content for a role that may not peek, pushed filters, and a pinned snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cursorops.spark
from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests.spark_apps.topics import TOPIC, make_topic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

SUBSCRIPTION = "plain"
ORDER = ["partition", "ledger_id", "entry_id", "batch_index"]
CONTENT = ("key", "ordering_key", "properties", "payload")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("backlog-source")
    make_topic(home, seed=7, partitions=3, messages=300)
    with Broker(Config.from_home(home)) as broker:
        broker.admin.grant_permission("admin", "acme/ops", "writer", ["produce"])
    return home


def _read(spark: SparkSession, home: Path, **options: str) -> DataFrame:
    cursorops.spark.register(spark)
    reader = spark.read.format("cursorops").option("home", str(home))
    for name, value in {"topic": TOPIC, "subscription": SUBSCRIPTION, **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def _relation(home: Path, role: str = "admin") -> Any:
    with Broker(Config.from_home(home)) as broker:
        return broker.backlog.relation(role, TOPIC, SUBSCRIPTION)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        if row["properties"] is not None:
            row["properties"] = sorted(dict(row["properties"]).items())
    return sorted(rows, key=lambda r: [r[c] for c in ORDER])


def test_spark_reads_the_relation_one_partition_per_topic_partition(
    spark: SparkSession, home: Path
) -> None:
    relation = _relation(home)
    frame = _read(spark, home)
    assert frame.rdd.getNumPartitions() == 3
    got = [r.asDict(recursive=True) for r in frame.collect()]
    assert relation.table.num_rows > 0
    assert _sorted(got) == _sorted(relation.table.to_pylist())


def test_spark_and_duckdb_give_the_same_answers(spark: SparkSession, home: Path) -> None:
    sql = (
        "SELECT key, partition, count(*) AS n, min(publish_time) AS oldest "
        "FROM backlog GROUP BY key, partition ORDER BY key NULLS FIRST, partition"
    )
    _read(spark, home).createOrReplaceTempView("backlog")
    spark_rows = [r.asDict() for r in spark.sql(sql).collect()]
    with Broker(Config.from_home(home)) as broker:
        duck_rows = broker.backlog.query("admin", TOPIC, SUBSCRIPTION, sql).table.to_pylist()
    assert spark_rows == duck_rows and len(spark_rows) > 1


def test_a_role_that_may_not_peek_reads_no_content(spark: SparkSession, home: Path) -> None:
    rows = _read(spark, home, role="writer").collect()
    assert rows and all(getattr(r, c) is None for r in rows for c in CONTENT)
    assert {r.size > 0 for r in rows} == {True}


def test_pushed_filters_leave_out_whole_partitions_and_rows(
    spark: SparkSession, home: Path
) -> None:
    relation = _relation(home)
    rows = relation.table.to_pylist()
    cut = sorted(r["publish_time"] for r in rows)[len(rows) // 2]
    frame = _read(spark, home).filter(f"partition = 1 AND publish_time >= {cut}")
    assert frame.rdd.getNumPartitions() == 1
    got = sorted((r.ledger_id, r.entry_id, r.batch_index) for r in frame.collect())
    expected = sorted(
        (r["ledger_id"], r["entry_id"], r["batch_index"])
        for r in rows
        if r["partition"] == 1 and r["publish_time"] >= cut
    )
    assert got == expected and got
    # A filter the source does not apply is Spark's alone, with the same answer.
    keyed = _read(spark, home).filter("key IN ('k1', 'k2') OR partition = 0").count()
    assert keyed == sum(1 for r in rows if r["key"] in ("k1", "k2") or r["partition"] == 0)


def test_a_read_pinned_to_its_snapshot_reads_and_another_fails(
    spark: SparkSession, home: Path
) -> None:
    relation = _relation(home)
    assert _read(spark, home, snapshot=relation.snapshot.id).count() == relation.table.num_rows
    with pytest.raises(Exception, match="not 0123456789abcdef: it changed since"):
        _read(spark, home, snapshot="0123456789abcdef").count()


def test_a_read_without_a_subscription_says_what_it_needs(spark: SparkSession, home: Path) -> None:
    cursorops.spark.register(spark)
    with pytest.raises(Exception, match=r'\.option\("subscription", \.\.\.\)'):
        spark.read.format("cursorops").option("topic", TOPIC).load().count()

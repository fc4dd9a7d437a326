"""apply_skip_plan: per-partition acknowledgement, equal to the broker's skip, idempotent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.broker import Broker
from core.filters import parse_predicate
from core.message_id import MessageId
from core.position import Position
from spark_apps import analyze_backlog, apply_skip_plan, find_messages
from spark_apps.apply_skip_plan import COUNT_SCHEMA, TARGET_SCHEMA, transform
from spark_apps.skip_plan import plan_ids, read_plan
from tests.spark_apps.frames import assert_frames_equal
from tests.spark_apps.topics import (
    TOPIC,
    core_analyses,
    cursor_records,
    cursor_states,
    make_topic,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
def test_transform_acknowledges_per_partition_and_is_idempotent(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    topic = make_topic(tmp_path / "home", 51, partitions=2, messages=40)
    with Broker(topic.config) as broker:
        info = broker.metadata.get_topic(TOPIC)
        p0, p1 = info.partition_names()
        first = {p: broker.metadata.ledgers(p)[0].ledger_id for p in (p0, p1)}
    before = cursor_states(topic.config, TOPIC, "exclusive")
    targets = spark.createDataFrame(
        [(p0, first[p0], 0, -1, 0), (p0, first[p0], 1, -1, 0), (p1, first[p1], 0, -1, 0)],
        from_arrow_schema(TARGET_SCHEMA),
    )
    already = {
        p: sum(
            before[p].is_entry_acked(Position(first[p], e)) for e in ((0, 1) if p == p0 else (0,))
        )
        for p in (p0, p1)
    }
    counts = from_arrow_schema(COUNT_SCHEMA)
    result = transform(targets, metadata_url=topic.config.metadata_url, subscription="exclusive")
    assert_frames_equal(
        result,
        spark.createDataFrame(
            [(p0, 2, 2 - already[p0], already[p0]), (p1, 1, 1 - already[p1], already[p1])],
            counts,
        ),
    )
    again = transform(targets, metadata_url=topic.config.metadata_url, subscription="exclusive")
    assert_frames_equal(again, spark.createDataFrame([(p0, 2, 0, 2), (p1, 1, 0, 1)], counts))
    after = cursor_states(topic.config, TOPIC, "exclusive")
    assert all(after[p].is_entry_acked(Position(first[p], 0)) for p in (p0, p1))


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "partitions"), [(61, 3), (62, 0)])
def test_find_then_apply_equals_the_broker_skip_and_is_idempotent(
    spark: SparkSession, tmp_path: Path, seed: int, partitions: int
) -> None:
    spark_side = make_topic(tmp_path / "spark", seed, partitions=partitions, messages=220)
    broker_side = make_topic(tmp_path / "broker", seed, partitions=partitions, messages=220)
    predicate = parse_predicate({"properties": {"color": "blue"}})
    output = str(tmp_path / "plan")
    found = find_messages.run(spark_side.config, TOPIC, "plain", predicate, output, spark=spark)
    ids = plan_ids(read_plan(output))
    assert found["matches"] == len(ids) > 0

    outcome = apply_skip_plan.run(spark_side.config, TOPIC, "plain", ids, spark=spark)
    with Broker(broker_side.config) as broker:
        reference: dict[str, Any] = broker.skip_messages("admin", TOPIC, "plain", ids).to_json()
    assert sorted(outcome["skipped"]) == sorted(reference["skipped"])
    assert sorted(outcome["alreadyAcknowledged"]) == sorted(reference["alreadyAcknowledged"])
    assert outcome["perPartition"] == dict(sorted(reference["perPartition"].items()))
    assert cursor_states(spark_side.config, TOPIC, "plain") == cursor_states(
        broker_side.config, TOPIC, "plain"
    )

    # Applying again changes nothing: no cursor record is written.
    records = cursor_records(spark_side.config, TOPIC)
    again = apply_skip_plan.run(spark_side.config, TOPIC, "plain", ids, spark=spark)
    assert again["skipped"] == [] and len(again["alreadyAcknowledged"]) == len(ids)
    assert set(again["perPartition"].values()) == {0}
    assert cursor_records(spark_side.config, TOPIC) == records

    rerun = find_messages.run(
        spark_side.config, TOPIC, "plain", predicate, str(tmp_path / "plan2"), spark=spark
    )
    assert rerun["matches"] == 0
    after = analyze_backlog.run(spark_side.config, TOPIC, spark=spark)
    assert [(a.topic_partition, a.subscription, a.result) for a in after] == [
        (a.topic_partition, a.subscription, a.result)
        for a in core_analyses(spark_side.config, TOPIC)
    ]
    with Broker(spark_side.config) as broker:
        audit = [r for r in broker.metadata.audit_log(TOPIC) if r.kind == "skip"]
    assert len(audit) == 2 and audit[-1].detail["engine"] == "spark"


@pytest.mark.spark
def test_main_applies_ids_and_an_empty_plan(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(tmp_path / "home", 71, partitions=2, messages=40)
    with Broker(topic.config) as broker:
        partition = broker.metadata.get_topic(TOPIC).partition_names()[1]
        ledger = broker.metadata.ledgers(partition)[-1]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(f"# poison pills\n{ledger.ledger_id}:0\n")
    common = ["--home", str(topic.config.home), TOPIC, "-s", "plain"]
    assert apply_skip_plan.main([*common, "--ids-file", str(ids_file)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["skipped"] + document["alreadyAcknowledged"] == [f"{ledger.ledger_id}:0"]
    assert cursor_states(topic.config, TOPIC, "plain")[partition].is_entry_acked(
        Position(ledger.ledger_id, 0)
    )

    empty = str(tmp_path / "empty-plan")
    summary = find_messages.run(
        topic.config, TOPIC, "plain", parse_predicate({"key": "nobody"}), empty, spark=spark
    )
    assert summary["matches"] == 0
    records = cursor_records(topic.config, TOPIC)
    assert apply_skip_plan.main([*common, "--plan", empty]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["skipped"] == [] and document["perPartition"] == {}
    assert cursor_records(topic.config, TOPIC) == records


def test_plan_ids_keep_batch_indexes() -> None:
    from spark_apps.skip_plan import plan_from_ids

    ids = [MessageId(3, 4, -1, 2), MessageId(3, 5)]
    plan = plan_from_ids(TOPIC, "s", ids)
    assert plan.column("message_id").to_pylist() == ["3:4:2", "3:5"]
    assert plan_ids(plan) == ids

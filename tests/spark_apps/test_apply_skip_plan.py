"""apply_skip_plan: a pure Spark check of the plan, then one gating.skip.apply_skip; equal to the
broker's skip, idempotent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.testing import assertDataFrameEqual

from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.spark import analyze_backlog, apply_skip_plan, find_messages
from cursorops.spark.apply_skip_plan import CHECKED_SCHEMA, ID_SCHEMA, transform
from cursorops.spark.match_list import match_list_ids, read_match_list
from tests.spark_apps.topics import (
    TOPIC,
    Installation,
    core_analyses,
    cursor_records,
    cursor_states,
    make_topic,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
def test_transform_checks_and_dedupes_plan_rows_and_writes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    topic = make_topic(tmp_path / "home", 51, partitions=2, messages=40)
    records = cursor_records(topic.config, TOPIC)
    other = "persistent://acme/ops/invoices"
    rows = spark.createDataFrame(
        [
            (TOPIC, 7, 1, -1),
            (TOPIC, 3, 0, 2),
            (TOPIC, 7, 1, -1),
            (other, 3, 0, 2),
            (TOPIC, None, 4, -1),
            (None, 9, 9, -1),
        ],
        from_arrow_schema(ID_SCHEMA),
    )
    expected = spark.createDataFrame(
        [
            (None, 4, -1, "holds a null ledger_id, entry_id or batch_index"),
            (3, 0, 2, None),
            (3, 0, 2, f"holds ids of {other}"),
            (7, 1, -1, None),
            (9, 9, -1, "holds a row without a topic"),
        ],
        from_arrow_schema(CHECKED_SCHEMA),
    )
    assertDataFrameEqual(transform(rows, topic=TOPIC), expected)
    assert cursor_records(topic.config, TOPIC) == records


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "partitions"), [(61, 3), (62, 0)])
def test_find_then_apply_equals_the_broker_skip_and_is_idempotent(
    spark: SparkSession, tmp_path: Path, seed: int, partitions: int
) -> None:
    spark_side = make_topic(tmp_path / "spark", seed, partitions=partitions, messages=220)
    # The same installation, copied: the broker's own skip there is the reference.
    shutil.copytree(spark_side.config.home, tmp_path / "broker")
    broker_side = Installation(Config.from_home(tmp_path / "broker"), TOPIC, partitions)
    predicate = parse_predicate({"properties": {"color": "blue"}})
    output = str(tmp_path / "plan")
    found = find_messages.run(spark_side.config, TOPIC, "plain", predicate, output, spark=spark)
    ids = match_list_ids(read_match_list(output))
    assert found["matches"] == len(ids) > 0

    outcome = apply_skip_plan.run(spark_side.config, TOPIC, "plain", match_list=output, spark=spark)
    with Broker(broker_side.config) as broker:
        reference: dict[str, Any] = skips.skip_messages(
            broker.gated, "admin", TOPIC, "plain", ids
        ).to_pulsar_json()
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
    assert len(audit) == 2 and all(record.detail["via"] == "spark" for record in audit)


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
    assert apply_skip_plan.main([*common, "--match-list", empty]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["skipped"] == [] and document["perPartition"] == {}
    assert cursor_records(topic.config, TOPIC) == records


def test_match_list_ids_keep_batch_indexes() -> None:
    from cursorops.spark.match_list import match_list_from_ids

    ids = [MessageId(3, 4, -1, 2), MessageId(3, 5)]
    plan = match_list_from_ids(TOPIC, "s", ids)
    assert plan.column("message_id").to_pylist() == ["3:4:2", "3:5"]
    assert match_list_ids(plan) == ids


@pytest.mark.spark
def test_main_applies_a_broker_plan_once_and_refuses_a_plan_of_another_subscription(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(tmp_path / "home", 72, partitions=3, messages=60)
    with Broker(topic.config) as broker:
        names = broker.metadata.get_topic(TOPIC).partition_names()
        ids = [MessageId(broker.metadata.ledgers(name)[-1].ledger_id, 0) for name in names]
        plan = skips.plan_skip(broker.gated, "admin", TOPIC, "plain", ids)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.dumps())
    common = ["--home", str(topic.config.home), TOPIC]
    records = cursor_records(topic.config, TOPIC)
    assert apply_skip_plan.main([*common, "-s", "keyed", "--skip-plan", str(plan_file)]) == 2
    assert "not of persistent://acme/ops/orders / keyed" in capsys.readouterr().err
    assert cursor_records(topic.config, TOPIC) == records

    assert apply_skip_plan.main([*common, "-s", "plain", "--skip-plan", str(plan_file)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["planId"] == plan.plan_id
    assert sorted(document["skipped"] + document["alreadyAcknowledged"]) == sorted(
        m.triplet() for m in ids
    )
    states = cursor_states(topic.config, TOPIC, "plain")
    assert all(
        states[n].is_entry_acked(Position(m.ledger_id, 0)) for n, m in zip(names, ids, strict=True)
    )
    with Broker(topic.config) as broker:
        audit = [r for r in broker.metadata.audit_log(TOPIC) if r.kind == "skip"]
    assert [r.detail["planId"] for r in audit] == [plan.plan_id]

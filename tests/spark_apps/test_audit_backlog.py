"""The one-job backlog audit: every topic's document equals core's, topic by topic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.services.broker import Broker
from cursorops.spark import audit_backlog
from tests.spark_apps.topics import core_analyses, make_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

TOPICS = {
    # name: (seed, partitions)
    "persistent://acme/ops/a": (21, 3),
    "persistent://acme/ops/b": (22, 0),
    "persistent://acme/ops/c": (23, 2),
}


def test_one_job_gives_every_topic_the_answer_of_core(spark: SparkSession, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for topic, (seed, partitions) in TOPICS.items():
        config = make_topic(home, seed, partitions=partitions, messages=200, topic=topic).config
    with Broker(config) as broker:
        broker.admin.create_topic("admin", "persistent://acme/ops/quiet", 0)
        broker.admin.create_topic("admin", "persistent://acme/ops/empty", 2)
        broker.admin.create_subscription("admin", "persistent://acme/ops/empty", "idle")
    names = [*TOPICS, "persistent://acme/ops/empty", "persistent://acme/ops/quiet"]

    documents = audit_backlog.run(config, names, spark=spark)

    assert [d["topic"] for d in documents] == names
    with Broker(config) as broker:
        for topic, document in zip(names, documents, strict=True):
            expected = analysis_document(topic, None, core_analyses(config, topic))
            ages = broker.analysis.backlog_ages("admin", topic)
            oldest = {
                name: s.pop("oldestPublishMs") for name, s in document["subscriptions"].items()
            }
            assert document == expected, topic
            assert oldest == ages, topic
    assert documents[-1]["subscriptions"] == {}
    assert documents[-2]["subscriptions"]["idle"]["messages"] == 0


def test_main_reads_the_topics_file_and_writes_one_document_per_topic(
    spark: SparkSession, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    config = make_topic(home, 31, partitions=2, messages=60, topic="persistent://acme/ops/m").config
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps(["persistent://acme/ops/m"]))
    out = tmp_path / "audit.json"
    code = audit_backlog.main(
        ["--home", str(config.home), "--topics", str(topics), "--output", str(out)]
    )
    assert code == 0
    [document] = json.loads(out.read_text())["topics"]
    assert document["topic"] == "persistent://acme/ops/m"
    assert set(document["subscriptions"]) == {"plain", "filtered", "keyed", "exclusive"}


def test_a_bad_topics_file_is_one_error_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    topics = tmp_path / "topics.json"
    topics.write_text('{"not": "a list"}')
    code = audit_backlog.main(["--home", str(tmp_path / "h"), "--topics", str(topics)])
    assert code != 0
    assert "Invalid topics file" in capsys.readouterr().err


@pytest.mark.spark
def test_a_run_s_audit_reads_and_writes_its_scratch_folder_only(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cursorops.spark.run_scratch import AUDIT, TOPICS, checked_scratch

    config = make_topic(tmp_path / "home", 82, partitions=1, messages=20).config
    monkeypatch.setenv("CURSOROPS_HOME", str(config.home))
    monkeypatch.setenv("CURSOROPS_METADATA_URL", "")
    monkeypatch.setenv("CURSOROPS_LEDGER_ROOT", "")
    folder = checked_scratch(config, "cursorops_backlog_audit", "scheduled__1", create=True)
    (folder / TOPICS).write_text(json.dumps(["persistent://acme/ops/orders"]))
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    run = ["--dag-id=cursorops_backlog_audit", "--run-id=scheduled__1"]
    for hostile in (["--output", str(victim)], ["--topics", str(victim)], ["--ledger-root", "/"]):
        assert audit_backlog.main([*run, *hostile]) != 0
        assert victim.read_text() == "{}" and not (folder / AUDIT).exists()
    assert audit_backlog.main(run) == 0
    [document] = json.loads((folder / AUDIT).read_text())["topics"]
    assert document["topic"] == "persistent://acme/ops/orders"
    assert audit_backlog.main(["--dag-id=cursorops_backlog_audit", "--run-id=scheduled__2"]) != 0

"""``cursorops topics analyze-backlog``: the same document from the Python and the Spark engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from tests.spark_apps.topics import TOPIC, make_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _analyze(home: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict, str]:
    cli = pytest.importorskip("cursorops.cli.main")
    code = cli.main(["--home", str(home), "-o", "json", "topics", "analyze-backlog", TOPIC, *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), captured.err


def test_engines_print_the_same_document(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(tmp_path / "home", 101, partitions=3, messages=200)
    with Broker(topic.config) as broker:
        entries = broker.analysis.entry_count("admin", TOPIC)
    home = Path(topic.config.home)
    python, note = _analyze(home, capsys, "--engine", "python")
    assert note == ""
    on_spark, _ = _analyze(home, capsys, "--engine", "spark")
    assert on_spark == python
    auto_small, note = _analyze(home, capsys)
    assert auto_small == python and "Spark" not in note
    auto_big, note = _analyze(home, capsys, "--spark-threshold", str(entries - 1))
    assert auto_big == python
    one, _ = _analyze(home, capsys, "-s", "keyed", "--engine", "spark")
    assert one == _analyze(home, capsys, "-s", "keyed", "--engine", "python")[0]
    # The Spark engine ran on the route's worker thread, where the process's session is
    # not the active one: it used that session and left it running.
    assert spark.range(3).count() == 3


def test_entry_count_counts_every_partition(tmp_path: Path) -> None:
    topic = make_topic(tmp_path / "home", 102, partitions=2, messages=50)
    with Broker(topic.config) as broker:
        # The stats read every partition's entry index; the count only the ledger list.
        expected = broker.analysis.topic_stats("admin", TOPIC).entries
        assert broker.analysis.entry_count("admin", TOPIC) == expected > 0
        broker.admin.create_subscription("admin", TOPIC, "late", SubscriptionType.SHARED)
        assert broker.analysis.entry_count("admin", TOPIC) == expected
        with pytest.raises(NotAuthorizedError):
            broker.analysis.entry_count("nobody", TOPIC)

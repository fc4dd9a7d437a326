"""A Spark job over segments with and without the later columns: as if every one had them.

The ledger store writes a segment without the later columns (``LATER_COLUMNS``) null
on every one of its rows; segments written before that hold every column. A topic
mixing both, read by ``find_messages`` (which reads ``uuid``, a later column), must
give the matches the core and the read path give.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.services.broker import Broker
from cursorops.core.store.ledger import (
    LATER_COLUMNS,
    MESSAGE_SCHEMA,
    SEGMENT_WRITE_OPTIONS,
    with_later_columns,
)
from cursorops.spark import find_messages
from cursorops.spark.match_list import read_match_list
from tests.spark_apps.topics import NOW, TOPIC, core_matches, make_topic, peeked_matches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
def test_find_messages_over_segments_with_and_without_the_later_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic = make_topic(tmp_path / "home", 45, partitions=2, messages=200)
    with Broker(topic.config) as broker:
        paths = [
            path
            for number in range(topic.partitions)
            for path in broker.ledgers.segment_paths(f"{TOPIC}-partition-{number}")
        ]
    # Every other segment rewritten as segments were written before: every column.
    for path in paths[::2]:
        table = with_later_columns(pq.read_table(path), MESSAGE_SCHEMA.names)
        pq.write_table(table, path, **SEGMENT_WRITE_OPTIONS)
    schemas = [pq.read_schema(path).names for path in paths]
    assert all(names == MESSAGE_SCHEMA.names for names in schemas[::2])
    lacking = [set(LATER_COLUMNS) - set(names) for names in schemas[1::2]]
    assert all({"uuid", "metadata", "encryption_keys"} <= columns for columns in lacking)
    for path in paths:
        os.utime(path)

    predicate = parse_predicate({"deliverAt": {"after": NOW}})
    output = str(tmp_path / "matches")
    summary = find_messages.run(topic.config, TOPIC, "plain", predicate, output, spark=spark)
    matches = read_match_list(output)
    found = sorted(matches.column("message_id").to_pylist())
    assert found, "the predicate matches something"
    assert found == core_matches(topic.config, TOPIC, "plain", predicate)
    assert found == peeked_matches(topic.config, TOPIC, "plain", predicate)
    assert summary["matches"] == len(found)
    assert set(matches.column("uuid").to_pylist()) == {None}
    assert None not in matches.column("deliver_at").to_pylist()
    assert {None, "k0", "k1", "k2", "k3"} > set(matches.column("key").to_pylist()) != {None}

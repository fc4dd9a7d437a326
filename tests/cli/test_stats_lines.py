"""``topics stats`` for people: a partition's stats say which partition they are."""

from __future__ import annotations

from cursorops.cli.output import stats_lines

_COMMON = {"entries": 1, "messages": 1, "subscriptions": {}}


def test_a_partition_s_stats_name_the_partition() -> None:
    stats = {"topic": "persistent://a/b/t-partition-2", "partitions": 4, "partitionIndex": 2}
    lines = stats_lines({**stats, **_COMMON})
    assert lines[1] == "partition:     2 (of 4)"


def test_a_topic_s_stats_give_its_partition_count() -> None:
    lines = stats_lines({"topic": "persistent://a/b/t", "partitions": 4, **_COMMON})
    assert lines[1] == "partitions:    4"

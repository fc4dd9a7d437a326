"""The Spark jobs count a chunked message once, as the Broker does, and a match on one of
its chunks plans them all."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.chunked_messages import chunk_rest
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import Entry, OutgoingMessage
from cursorops.spark import analyze_backlog, apply_skip_plan, audit_backlog, find_messages
from cursorops.spark.match_list import match_list_ids, read_match_list
from tests.conftest import acknowledge

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOPIC = "persistent://acme/ops/large"


def _entry(payload: bytes, producer: str, chunk: tuple[str, int, int, int] | None) -> Entry:
    key = "big" if chunk is not None else "small"
    entry = Entry.of_messages(
        [OutgoingMessage(payload, key=key, sequence_id=1)], False, producer, 1
    )
    return dataclasses.replace(entry, chunk=chunk)


def chunked_topic(home: Path, seed: int) -> Config:
    """Two partitions, each with plain messages and chunked ones interleaved (three
    producers), some chunked messages without their last chunk; a Shared subscription
    with scattered acknowledgements, of single chunks too."""
    rng = random.Random(seed)
    config = Config.from_home(home, max_entries_per_ledger=rng.choice([4, 9, 1000]))
    ticks = iter(range(1_000, 10**9, 1_000))
    with Broker(config, clock=lambda: next(ticks)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC, 2)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        for partition in broker.metadata.get_topic(TOPIC).partition_names():
            entries: list[Entry] = []
            open_messages: dict[str, list[int]] = {}
            for n in range(40):
                producer = rng.choice(["a", "b", "c"])
                if rng.random() < 0.4:
                    entries.append(_entry(b"plain-%d" % n, "small", None))
                    continue
                parts = open_messages.setdefault(producer, [n, rng.randint(2, 4), 0])
                uuid = f"{producer}-{parts[0]}"
                entries.append(_entry(b"chunk-%d" % n, producer, (uuid, parts[2], parts[1], 99)))
                parts[2] += 1
                if parts[2] == parts[1]:
                    del open_messages[producer]
            positions = broker.producing.append_entries("admin", partition, entries)
            acked = [AckTarget(p) for p in positions if rng.random() < 0.25]
            if acked:
                acknowledge(broker, partition, "s", acked)
    return config


@pytest.mark.spark
@pytest.mark.parametrize("seed", [3, 4])
def test_spark_counts_a_chunked_message_once_as_the_broker_does(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    config = chunked_topic(tmp_path / "home", seed)
    with Broker(config) as broker:
        expected = broker.analysis.analyze_backlog("admin", TOPIC, "s")
        ages = broker.analysis.backlog_ages("admin", TOPIC)
        # Every unacknowledged entry, each chunk on its own (nothing here is batched).
        entries = len(broker.reading.peek_messages("admin", TOPIC, "s", 10_000))
    got = analyze_backlog.run(config, TOPIC, "s", spark=spark)
    assert got == expected
    assert sum(a.result.messages for a in got) < entries
    (document,) = audit_backlog.run(config, [TOPIC], spark=spark)
    wanted = analysis_document(TOPIC, None, expected)
    wanted["subscriptions"]["s"]["oldestPublishMs"] = ages["s"]
    assert document == wanted


@pytest.mark.spark
def test_a_match_on_one_chunk_counts_once_and_plans_the_whole_message(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = chunked_topic(tmp_path / "home", 5)
    output = str(tmp_path / "matches")
    predicate = parse_predicate({"key": "big"})
    summary = find_messages.run(config, TOPIC, "s", predicate, output, spark=spark)
    matches = read_match_list(output)
    uuids = {
        (row["topic_partition"], row["uuid"])
        for row in matches.select(["topic_partition", "uuid"]).to_pylist()
    }
    assert None not in {u for _, u in uuids}
    # Every chunk row matched; each chunked message counts once.
    assert summary["matches"] == len(uuids) < matches.num_rows
    assert find_messages.written_summary(spark, output, local=False)[0] == summary["perPartition"]
    # A list naming one chunk of each message: the plan made of it holds every chunk.
    firsts = {}
    for row in matches.to_pylist():
        firsts.setdefault((row["topic_partition"], row["uuid"]), row)
    one_each = matches.filter(
        np.isin(
            matches.column("message_id").to_numpy(zero_copy_only=False),
            [row["message_id"] for row in firsts.values()],
        )
    )
    with Broker(config) as broker:
        plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", match_list_ids(one_each))
        whole = skips.plan_skip(broker.gated, "admin", TOPIC, "s", match_list_ids(matches))
    assert sorted(m.triplet() for m in plan.message_ids()) == sorted(
        m.triplet() for m in whole.message_ids()
    )
    outcome = apply_skip_plan.run(config, TOPIC, "s", match_list=output, spark=spark)
    assert len(outcome["skipped"]) >= matches.num_rows
    with Broker(config) as broker:
        peeked = broker.reading.peek_messages("admin", TOPIC, "s", 1000)
    assert all(m.chunk is None for m in peeked)


def test_the_time_limited_scan_counts_chunks_as_the_one_shot_analysis() -> None:
    rng = np.random.default_rng(7)
    n = 500
    ledger_ids = np.full(n, 3, np.int64)
    entry_ids = np.arange(n, dtype=np.int64)
    batch_sizes = rng.choice([0, 0, 4], n).astype(np.int64)
    chunks = np.where((batch_sizes == 0) & (rng.random(n) < 0.5), 3, 0)
    rest = chunk_rest(np.where(chunks > 0, rng.integers(0, 3, n), -1), chunks)
    state = CursorState(mark_delete=Position(3, 40))
    saved = analyze_backlog.CHUNK_ENTRIES
    analyze_backlog.CHUNK_ENTRIES = 64
    try:
        timed = analyze_backlog.analyze_entries(
            state, ledger_ids, entry_ids, batch_sizes, None, deadline_ms=2**62, chunk_rest=rest
        )
    finally:
        analyze_backlog.CHUNK_ENTRIES = saved
    once = backlog.analyze(state, ledger_ids, entry_ids, batch_sizes, None, chunk_rest=rest)
    assert timed == once
    assert once.messages < backlog.analyze(state, ledger_ids, entry_ids, batch_sizes, None).messages

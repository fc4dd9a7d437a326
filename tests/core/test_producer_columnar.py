"""The producer's columnar path for plain messages writes what the per-message path writes.

Same routing, entries, batch indexes, sequence ids, rows and message ids, on a
non-partitioned and a partitioned topic, across several sends of one producer
(the round-robin rotation and the sequence carry over), for any batch size.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.producer import OutgoingMessage, Producer
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.metadata import MetadataStore


def _shape(ids: list[MessageId]) -> list[tuple[int, int, int, int]]:
    return [(i.entry_id, i.partition, i.batch_index, i.batch_size) for i in ids]


def _rows(store: LedgerStore, name: str) -> list[dict[str, object]]:
    table = store.read_table(TopicName.parse(name)).drop_columns(["ledger_id"])
    return table.to_pylist()


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    partitions=st.sampled_from([0, 1, 3, 16]),
    batch_size=st.integers(1, 5),
    start=st.integers(0, 15),
    sends=st.lists(st.integers(1, 40), min_size=1, max_size=3),
)
def test_columnar_and_per_message_paths_agree(
    partitions: int, batch_size: int, start: int, sends: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as home:
        config = Config.from_home(Path(home))
        with MetadataStore.from_config(config) as metadata:
            metadata.create_tenant("acme")
            metadata.create_namespace("acme/ops")
            metadata.create_topic("persistent://acme/ops/columnar", partitions)
            metadata.create_topic("persistent://acme/ops/rows", partitions)
            store = LedgerStore(config.ledger_root, metadata, 7)
            first = start % max(partitions, 1)
            fast = Producer(
                store, metadata.get_topic("persistent://acme/ops/columnar"), "p", batch_size, first
            )
            slow = Producer(
                store, metadata.get_topic("persistent://acme/ops/rows"), "p", batch_size, first
            )
            number = 0
            for count in sends:
                messages = [OutgoingMessage(f"m{number + i}".encode()) for i in range(count)]
                number += count
                fast_ids = fast.send(messages, now_ms=5)
                slow_ids = slow._send_rows(messages, now_ms=5)
                assert _shape(fast_ids) == _shape(slow_ids)
            fast_topic = metadata.get_topic("persistent://acme/ops/columnar")
            slow_topic = metadata.get_topic("persistent://acme/ops/rows")
            for fast_name, slow_name in zip(
                fast_topic.partition_names(), slow_topic.partition_names(), strict=True
            ):
                assert _rows(store, fast_name) == _rows(store, slow_name)

"""Segments are written without their all-null later columns, and read as if they had them.

Each segment here is written twice: by the ledger store (which leaves out the later
columns, ``LATER_COLUMNS``, null on every one of its rows) and, under a second root
listed by the same metadata, as a segment with every column of ``MESSAGE_SCHEMA``
(how segments were written before). Every reader of the core must give the same answer on both, and
``read_table`` the rows as appended.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store.ledger import (
    LATER_COLUMNS,
    MESSAGE_SCHEMA,
    SEGMENT_WRITE_OPTIONS,
    LedgerStore,
)
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.segment_reader import SegmentCache, batches_after

TOPIC = TopicName.parse("persistent://acme/orders/events")
NULLABLE = [f.name for f in MESSAGE_SCHEMA if f.nullable]
MESSAGE_COLUMNS = [
    n for n in MESSAGE_SCHEMA.names if n not in ("partition", "ledger_id", "entry_id")
]
START = Position(-1, -1)

INT64 = st.integers(0, 2**62)
INT32 = st.integers(0, 2**31 - 1)
TEXT = st.text(max_size=4)
BYTES = st.binary(max_size=6)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "deliver_at": INT64,
    "key": TEXT,
    "event_time": INT64,
    "ordering_key": BYTES,
    "null_value": st.booleans(),
    "encrypted": st.booleans(),
    "encryption_keys": st.lists(TEXT, max_size=2),
    "uuid": TEXT,
    "chunk_id": st.integers(0, 4),
    "num_chunks_from_msg": st.integers(0, 4),
    "total_chunk_msg_size": INT64,
    "schema_version": BYTES,
    "metadata": BYTES,
    "entry_payload": BYTES,
    "single_metadata": BYTES,
}


def test_every_nullable_column_has_values_here() -> None:
    assert sorted(VALUES) == sorted(NULLABLE)
    assert set(LATER_COLUMNS) < set(NULLABLE)


@st.composite
def segment(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """One append's entries (one segment), each a list of message rows: the nullable
    columns outside a drawn subset null on every row, those inside set on some rows
    (on every row with ``full``)."""
    chosen = draw(st.sets(st.sampled_from(NULLABLE)))
    full = draw(st.booleans())
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 3))
        batched = size > 1 or draw(st.booleans())
        rows = []
        for index in range(size):
            row: dict[str, Any] = {
                "batch_index": index if batched else -1,
                "batch_size": size if batched else 0,
                "publish_time": draw(INT64),
                "properties": draw(st.dictionaries(TEXT, TEXT, max_size=2)),
                "payload": draw(BYTES),
                "producer_name": draw(TEXT),
                "sequence_id": draw(INT64),
            }
            for name in NULLABLE:
                value = draw(VALUES[name]) if name in chosen else None
                if name in chosen and not full and draw(st.booleans()):
                    value = None
                row[name] = value
            rows.append(row)
        entries.append(rows)
    return entries


def _columns(rows: Sequence[dict[str, Any]]) -> dict[str, pa.Array]:
    return {
        name: pa.array(
            [list(r[name].items()) if name == "properties" else r[name] for r in rows],
            MESSAGE_SCHEMA.field(name).type,
        )
        for name in MESSAGE_COLUMNS
    }


def _stored(
    rows: Sequence[dict[str, Any]], positions: Sequence[Position], sizes: list[int]
) -> list[dict[str, Any]]:
    """The rows as a segment holds them, with partition, ledger and entry ids."""
    ids = [p for p, n in zip(positions, sizes, strict=True) for _ in range(n)]
    return [
        {
            "partition": -1,
            "ledger_id": p.ledger_id,
            "entry_id": p.entry_id,
            **{
                name: list(row[name].items()) if name == "properties" else row[name]
                for name in MESSAGE_COLUMNS
            },
        }
        for p, row in zip(ids, rows, strict=True)
    ]


def _table(batches: Sequence[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(list(batches), MESSAGE_SCHEMA)


def _check(segments: Sequence[list[list[dict[str, Any]]]], work: Path) -> None:
    metadata = MetadataStore(f"sqlite:///{work / 'metadata.db'}")
    try:
        metadata.create_tenant("acme")
        metadata.create_namespace("acme/orders")
        metadata.create_topic(str(TOPIC), 0)
        store = LedgerStore(str(work / "written"), metadata, 1_000)
        expected: list[dict[str, Any]] = []
        for entries in segments:
            sizes = [len(entry) for entry in entries]
            rows = [row for entry in entries for row in entry]
            positions = store.append_columns(TOPIC, np.asarray(sizes), _columns(rows))
            stored = _stored(rows, positions, sizes)
            expected += stored
            # The same segment as written before: every column, nulls included.
            [listed] = [
                s
                for s in metadata.segments(str(TOPIC))
                if (s.ledger_id, s.first_entry) == positions[0]
            ]
            old = work / "old" / listed.path
            old.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(
                pa.Table.from_pylist(stored, MESSAGE_SCHEMA), old, **SEGMENT_WRITE_OPTIONS
            )
            # Written without the later columns null on every row, and only those.
            null = [n for n in LATER_COLUMNS if all(r[n] is None for r in rows)]
            written = pq.read_schema(os.path.join(store.root, listed.path)).names
            assert written == [n for n in MESSAGE_SCHEMA.names if n not in null]
        old_store = LedgerStore(str(work / "old"), metadata, 1_000)
        listed = metadata.segments(str(TOPIC))

        table = store.read_table(TOPIC)
        assert table.schema == MESSAGE_SCHEMA
        assert table.to_pylist() == expected
        assert old_store.read_table(TOPIC).equals(table)
        for columns in (["payload", "key", "encryption_keys"], ["chunk_id", "metadata"]):
            assert store.read_table(TOPIC, columns).equals(old_store.read_table(TOPIC, columns))
        # Filters on later columns, pushed down to files that may lack them.
        for condition in (
            pc.field("key").is_null(),
            pc.field("deliver_at") > 2**61,
            pc.field("encrypted") == True,  # noqa: E712 (an Arrow expression)
            pc.field("chunk_id").is_valid() | (pc.field("batch_index") > 0),
        ):
            found = store.read_table(TOPIC, filter=condition)
            assert found.schema == MESSAGE_SCHEMA
            assert found.equals(old_store.read_table(TOPIC, filter=condition))
        positions = sorted({Position(r["ledger_id"], r["entry_id"]) for r in expected})
        some = positions[::2]
        assert store.read_entries(TOPIC, some).equals(old_store.read_entries(TOPIC, some))
        index, old_index = store.entry_index(TOPIC), old_store.entry_index(TOPIC)
        for name in ("ledger_id", "entry_id", "batch_size", "deliver_at", "publish_time"):
            assert np.array_equal(getattr(index, name), getattr(old_index, name)), name
        assert np.array_equal(index.chunk_rest, old_index.chunk_rest)
        after = positions[len(positions) // 2]
        for position in (START, after):
            lazy = _table(list(batches_after(store.root, listed, position)))
            assert lazy.equals(_table(list(batches_after(old_store.root, listed, position))))
            cached = SegmentCache(store.root).batches_after(listed, position, batch_rows=7)
            assert _table(list(cached)).equals(lazy)
            # Served from memory: the table as appended, every column.
            fresh = SegmentCache(store.root, fresh=store.recent.get)
            assert _table(list(fresh.batches_after(listed, position))).equals(lazy)
        assert _table(list(batches_after(store.root, listed, START))).to_pylist() == expected
    finally:
        metadata.close()


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(segment(), min_size=1, max_size=4))
def test_any_subset_of_optional_columns_reads_back_as_written(
    segments: list[list[list[dict[str, Any]]]],
) -> None:
    with tempfile.TemporaryDirectory() as work:
        _check(segments, Path(work))


def _row(**values: Any) -> dict[str, Any]:
    return {
        "batch_index": -1,
        "batch_size": 0,
        "publish_time": 1_000,
        "properties": {},
        "payload": b"m",
        "producer_name": "p",
        "sequence_id": 0,
        **{name: None for name in NULLABLE},
        **values,
    }


EVERY = {
    "deliver_at": 5,
    "key": "k",
    "event_time": 6,
    "ordering_key": b"o",
    "null_value": True,
    "encrypted": True,
    "encryption_keys": ["a", "b"],
    "uuid": "u",
    "chunk_id": 0,
    "num_chunks_from_msg": 2,
    "total_chunk_msg_size": 9,
    "schema_version": b"v",
    "metadata": b"md",
    "entry_payload": b"ep",
    "single_metadata": b"sm",
}


@pytest.mark.parametrize(
    "segments",
    [
        pytest.param([[[_row()]]], id="all-null"),
        pytest.param([[[_row(**EVERY)]]], id="none-null"),
        pytest.param([[[_row()]], [[_row(**EVERY)]], [[_row(key="k")], [_row()]]], id="mixed"),
        pytest.param(
            [
                [
                    [
                        _row(batch_index=i, batch_size=3, deliver_at=7 if i == 2 else None)
                        for i in range(3)
                    ]
                ]
            ],
            id="one-row-set",
        ),
    ],
)
def test_all_null_none_null_and_mixed_segments(
    segments: list[list[list[dict[str, Any]]]], tmp_path: Path
) -> None:
    _check(segments, tmp_path)

"""Segments served from the ledger store's memory: the same rows as the files, only
once committed, and a file that is not the one written is read from disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.position import Position
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry
from cursorops.core.store import segment_reader
from cursorops.core.store.ledger import MESSAGE_SCHEMA, RecentSegments
from cursorops.core.store.segment_reader import SegmentCache

TOPIC = "persistent://acme/ops/recent"


@pytest.fixture
def broker(tmp_path: Path, metadata_url: str) -> Iterator[Broker]:
    with Broker(Config.from_home(tmp_path / "home", metadata_url=metadata_url)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        yield broker


def _entry(first: int, n: int) -> Entry:
    """A batch of ``n`` messages with keys, properties, delays and event times on some."""
    numbers = range(first, first + n)
    return Entry(
        batched=True,
        producer_name="p",
        publish_time=1_000 + first,
        payloads=[f"m{i}".encode() * (1 + i % 3) for i in numbers],
        sequence_ids=list(numbers),
        keys=[f"k{i % 5}" if i % 2 else None for i in numbers],
        properties=[[("a", str(i))] if i % 3 == 0 else [] for i in numbers],
        deliver_at=[5_000 + i if i % 7 == 0 else None for i in numbers],
        event_times=[9_000 + i if i % 4 == 0 else None for i in numbers],
        ordering_keys=[b"o" if i % 6 == 0 else None for i in numbers],
    )


def _read(cache: SegmentCache, broker: Broker, after: Position) -> pa.Table:
    segments = broker.metadata.segments(TOPIC)
    batches = list(cache.batches_after(segments, after, batch_rows=1000))
    return pa.Table.from_batches(batches) if batches else MESSAGE_SCHEMA.empty_table()


def test_rows_from_memory_are_the_rows_of_the_file(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two appends; the first segment spans three Parquet row groups.
    entries = [_entry(100 * i, 100) for i in range(120)]
    broker.producing.append_entries("admin", TOPIC, entries[:100])
    positions = broker.producing.append_entries("admin", TOPIC, entries[100:])
    segments = broker.metadata.segments(TOPIC)
    assert len(segments) == 2
    root = broker.ledgers.root
    assert pq.ParquetFile(Path(root) / segments[0].path).num_row_groups == 3
    from_files = SegmentCache(root)
    from_memory = SegmentCache(root, fresh=broker.ledgers.recent.get)
    middle = Position(positions[0].ledger_id, 45)
    for after in (Position(-1, -1), middle, positions[10], positions[-1]):
        expected = _read(from_files, broker, after)
        with monkeypatch.context() as patch:
            # Served from memory: the files are not read.
            patch.setattr(segment_reader.pq, "read_metadata", _refuse)
            patch.setattr(segment_reader.pq, "ParquetFile", _refuse)
            got = _read(from_memory, broker, after)
        assert got.num_rows == expected.num_rows
        assert got.equals(expected.cast(got.schema))
    assert _read(from_memory, broker, Position(-1, -1)).num_rows == 12_000


def _refuse(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the segment file was read")


def test_only_committed_segments_are_kept(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    broker.producing.append_entries("admin", TOPIC, [_entry(0, 3)])
    kept = broker.ledgers.recent
    assert len(kept._items) == 1
    metadata = broker.metadata

    def no_commit(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the commit failed")

    with monkeypatch.context() as patch:
        patch.setattr(
            "cursorops.core.store.ledger_index.allocated_entries", _failing(no_commit), raising=True
        )
        with pytest.raises(RuntimeError, match="the commit failed"):
            broker.producing.append_entries("admin", TOPIC, [_entry(3, 3)])
    assert len(kept._items) == 1
    assert len(metadata.segments(TOPIC)) == 1


def _failing(fail: object) -> object:
    """``allocated_entries`` that allocates, lets the segment be written, then fails."""
    from contextlib import contextmanager

    from cursorops.core.store import ledger_index

    real = ledger_index.allocated_entries

    @contextmanager
    def allocate(*args: object, **kwargs: object) -> Iterator[object]:
        with real(*args, **kwargs) as allocations:  # type: ignore[arg-type]
            yield allocations
            assert callable(fail)
            fail()

    return allocate


def test_a_file_not_the_one_written_is_read_from_disk(broker: Broker) -> None:
    broker.producing.append_entries("admin", TOPIC, [_entry(0, 3)])
    [segment] = broker.metadata.segments(TOPIC)
    path = Path(broker.ledgers.root) / segment.path
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 2), path)
    cache = SegmentCache(broker.ledgers.root, fresh=broker.ledgers.recent.get)
    assert _read(cache, broker, Position(-1, -1)).num_rows == 2


def test_the_oldest_segments_go_past_the_limit() -> None:
    table = pa.table({"payload": pa.array([b"x" * 100] * 10)})
    recent = RecentSegments(3 * table.nbytes)
    for i in range(5):
        recent.put((f"s{i}", i, i), table)
    assert [recent.get((f"s{i}", i, i)) is not None for i in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    assert recent.get(("s4", 0, 0)) is None
    recent.put(("big", 9, 9), pa.concat_tables([table] * 4))
    assert recent.get(("big", 9, 9)) is None

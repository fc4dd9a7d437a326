from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    BrokerFencedError,
    InvalidArgumentError,
    LedgerStoreError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store.ledger import LATER_COLUMNS, MESSAGE_SCHEMA, LedgerStore, RowDraft
from cursorops.core.store.metadata import LedgerInfo, MetadataStore
from tests.core.store.test_cursor_door_append import columns

TOPIC = TopicName.parse("persistent://acme/orders/events")
PARTITIONED = TopicName.parse("persistent://acme/orders/payments")
P1 = PARTITIONED.partition(1)


@pytest.fixture
def ledger_store(metadata_store: MetadataStore, tmp_path: Path) -> LedgerStore:
    metadata_store.create_tenant("acme")
    metadata_store.create_namespace("acme/orders")
    metadata_store.create_topic(str(TOPIC), 0)
    metadata_store.create_topic(str(PARTITIONED), 2)
    return LedgerStore(str(tmp_path / "ledgers"), metadata_store, 4)


def draft(payload: bytes, **kwargs: object) -> RowDraft:
    fields: dict[str, object] = {
        "publish_time": 1_000,
        "producer_name": "p",
        "sequence_id": 0,
        **kwargs,
    }
    return RowDraft(payload=payload, **fields)  # type: ignore[arg-type]


def single(payload: bytes, **kwargs: object) -> list[RowDraft]:
    """A non-batched entry."""
    return [draft(payload, **kwargs)]


def batch(*payloads: bytes, **kwargs: object) -> list[RowDraft]:
    return [
        draft(p, batch_index=i, batch_size=len(payloads), **kwargs) for i, p in enumerate(payloads)
    ]


def payloads(table: pa.Table) -> list[bytes]:
    return table["payload"].to_pylist()


def test_message_schema_follows_the_architecture() -> None:
    assert [(f.name, str(f.type), f.nullable) for f in MESSAGE_SCHEMA] == [
        ("partition", "int32", False),
        ("ledger_id", "int64", False),
        ("entry_id", "int64", False),
        ("batch_index", "int32", False),
        ("batch_size", "int32", False),
        ("publish_time", "int64", False),
        ("deliver_at", "int64", True),
        ("key", "string", True),
        ("properties", "map<string, string>", False),
        ("payload", "binary", False),
        ("producer_name", "string", False),
        ("sequence_id", "int64", False),
        ("event_time", "int64", True),
        ("ordering_key", "binary", True),
        ("null_value", "bool", True),
        ("encrypted", "bool", True),
        ("encryption_keys", "list<item: string>", True),
        ("uuid", "string", True),
        ("chunk_id", "int32", True),
        ("num_chunks_from_msg", "int32", True),
        ("total_chunk_msg_size", "int64", True),
        ("schema_version", "binary", True),
        ("metadata", "binary", True),
        ("entry_payload", "binary", True),
        ("single_metadata", "binary", True),
    ]


def test_append_and_read_back(ledger_store: LedgerStore) -> None:
    entries = [
        single(b"a", key="k1", properties={"x": "1"}, sequence_id=7),
        batch(b"b0", b"b1", b"b2", publish_time=2_000),
        single(b"d", deliver_at=9_000),
    ]
    positions = ledger_store.append(TOPIC, entries)
    ledger_id = positions[0].ledger_id
    assert positions == [Position(ledger_id, 0), Position(ledger_id, 1), Position(ledger_id, 2)]
    table = ledger_store.read_table(TOPIC)
    assert table.schema == MESSAGE_SCHEMA
    rows = table.to_pylist()
    assert [(r["entry_id"], r["batch_index"], r["batch_size"]) for r in rows] == [
        (0, -1, 0),
        (1, 0, 3),
        (1, 1, 3),
        (1, 2, 3),
        (2, -1, 0),
    ]
    assert rows[0] == {
        "partition": -1,
        "ledger_id": ledger_id,
        "entry_id": 0,
        "batch_index": -1,
        "batch_size": 0,
        "publish_time": 1_000,
        "deliver_at": None,
        "key": "k1",
        "properties": [("x", "1")],
        "payload": b"a",
        "producer_name": "p",
        "sequence_id": 7,
        "event_time": None,
        "ordering_key": None,
        **{name: None for name in LATER_COLUMNS[2:]},
    }
    assert rows[1]["publish_time"] == 2_000
    assert rows[4]["deliver_at"] == 9_000
    assert ledger_store.metadata.ledgers(str(TOPIC)) == [LedgerInfo(ledger_id, str(TOPIC), 3, 5)]


def test_segment_files_follow_the_layout(ledger_store: LedgerStore, tmp_path: Path) -> None:
    [position] = ledger_store.append(P1, [single(b"x")])
    ledger_store.append(P1, [single(b"y"), single(b"z")])
    [other] = ledger_store.append(TOPIC, [single(b"t")])
    root = tmp_path / "ledgers" / "acme" / "orders"
    attempt = "-[0-9a-f]{8}[.]parquet"
    first, second = ledger_store.segment_paths(P1)
    folder = re.escape(str(root / "payments" / "partition-1"))
    assert re.fullmatch(f"{folder}/ledger-{position.ledger_id:020d}-{0:012d}{attempt}", first)
    assert re.fullmatch(f"{folder}/ledger-{position.ledger_id:020d}-{1:012d}{attempt}", second)
    [alone] = ledger_store.segment_paths(TOPIC)
    folder = re.escape(str(root / "events" / "partition-none"))
    assert re.fullmatch(f"{folder}/ledger-{other.ledger_id:020d}-{0:012d}{attempt}", alone)
    # Relative paths are registered, so the root may move.
    assert re.fullmatch(
        f"acme/orders/payments/partition-1/ledger-{position.ledger_id:020d}-000000000000{attempt}",
        ledger_store.metadata.segments(str(P1))[0].path,
    )
    # Nothing a client sent: the later columns, all null, are not written.
    written = pa.schema([f for f in MESSAGE_SCHEMA if f.name not in LATER_COLUMNS])
    for path in ledger_store.segment_paths(P1) + ledger_store.segment_paths(TOPIC):
        assert pq.read_schema(path).remove_metadata() == written
    assert ledger_store.read_table(P1)["partition"].to_pylist() == [1, 1, 1]
    # No temporary files are left behind.
    leftovers = [p for p in (tmp_path / "ledgers").rglob("*") if p.name.startswith(".")]
    assert leftovers == []


def test_rollover(ledger_store: LedgerStore) -> None:
    positions = ledger_store.append(TOPIC, [single(str(i).encode()) for i in range(10)])
    ledgers = sorted({p.ledger_id for p in positions})
    assert len(ledgers) == 3
    assert positions == [Position(ledgers[i // 4], i % 4) for i in range(10)]
    assert [
        (info.entries, info.messages) for info in ledger_store.metadata.ledgers(str(TOPIC))
    ] == [
        (4, 4),
        (4, 4),
        (2, 2),
    ]
    more = ledger_store.append(TOPIC, [batch(b"a", b"b"), single(b"c"), single(b"d")])
    assert more[:2] == [Position(ledgers[2], 2), Position(ledgers[2], 3)]
    assert more[2].ledger_id > ledgers[2] and more[2].entry_id == 0
    assert len(ledger_store.segment_paths(TOPIC)) == 5
    assert payloads(ledger_store.read_table(TOPIC)) == [str(i).encode() for i in range(10)] + [
        b"a",
        b"b",
        b"c",
        b"d",
    ]


def test_from_config(tmp_config: Config) -> None:
    config = Config.from_home(tmp_config.home, max_entries_per_ledger=2)
    with MetadataStore.from_config(config) as metadata:
        metadata.create_tenant("acme")
        metadata.create_namespace("acme/orders")
        metadata.create_topic(str(TOPIC), 0)
        store = LedgerStore.from_config(config, metadata)
        positions = store.append(TOPIC, [single(b"1"), single(b"2"), single(b"3")])
        assert len({p.ledger_id for p in positions}) == 2
        assert all(path.startswith(config.ledger_root) for path in store.segment_paths(TOPIC))


def test_read_table_columns_and_filter(ledger_store: LedgerStore) -> None:
    ledger_store.append(TOPIC, [single(b"a", key="x"), batch(b"b", b"c", key="y"), single(b"d")])
    table = ledger_store.read_table(TOPIC, columns=["payload", "key"])
    assert table.column_names == ["payload", "key"]
    assert payloads(table) == [b"a", b"b", b"c", b"d"]
    filtered = ledger_store.read_table(TOPIC, filter=pc.field("key") == "y")
    assert payloads(filtered) == [b"b", b"c"]
    only = ledger_store.read_table(TOPIC, columns=["batch_index"], filter=pc.field("key") == "x")
    assert only.to_pylist() == [{"batch_index": -1}]
    empty = ledger_store.read_table(P1, columns=["payload"])
    assert empty.num_rows == 0 and empty.column_names == ["payload"]
    assert ledger_store.read_table(P1).schema == MESSAGE_SCHEMA
    with pytest.raises(InvalidArgumentError, match="Unknown columns"):
        ledger_store.read_table(TOPIC, columns=["payload", "nope"])
    with pytest.raises(InvalidArgumentError, match="Invalid filter"):
        ledger_store.read_table(TOPIC, filter=pc.field("nope") == 1)
    with pytest.raises(TopicNotFoundError):
        ledger_store.read_table(TopicName.parse("persistent://acme/orders/none"))


def test_entry_index(ledger_store: LedgerStore) -> None:
    ledger_store.append(
        TOPIC,
        [
            single(b"a", publish_time=10),
            batch(b"b", b"c", publish_time=20),
            single(b"d", publish_time=30, deliver_at=500),
            single(b"e", publish_time=40),
            # Not what a producer writes, but the index takes the latest over the entry.
            [
                draft(b"f0", batch_index=0, batch_size=3, publish_time=50),
                draft(b"f1", batch_index=1, batch_size=3, publish_time=50, deliver_at=700),
                draft(b"f2", batch_index=2, batch_size=3, publish_time=50, deliver_at=600),
            ],
        ],
    )
    index = ledger_store.entry_index(TOPIC)
    first, second = sorted({int(x) for x in index.ledger_id})
    assert len(index) == 5
    assert index.ledger_id.tolist() == [first] * 4 + [second]
    assert index.entry_id.tolist() == [0, 1, 2, 3, 0]
    assert index.batch_size.tolist() == [0, 2, 0, 0, 3]
    assert index.deliver_at.tolist() == [-1, -1, 500, -1, 700]
    assert index.publish_time.tolist() == [10, 20, 30, 40, 50]
    assert index.messages.tolist() == [1, 2, 1, 1, 3]
    assert index.positions()[-1] == Position(second, 0)
    assert index.ledger_id.dtype == np.int64 and index.deliver_at.dtype == np.int64

    empty = ledger_store.entry_index(P1)
    assert len(empty) == 0 and empty.positions() == []


def test_read_entries(ledger_store: LedgerStore) -> None:
    positions = ledger_store.append(
        TOPIC, [single(b"a"), batch(b"b0", b"b1"), single(b"c"), single(b"d"), batch(b"e0", b"e1")]
    )
    table = ledger_store.read_entries(TOPIC, [positions[4], positions[1], positions[4]])
    assert payloads(table) == [b"b0", b"b1", b"e0", b"e1"]
    assert table.schema == MESSAGE_SCHEMA
    missing = Position(positions[0].ledger_id, 99)
    assert payloads(ledger_store.read_entries(TOPIC, [missing, Position(10**9, 0)])) == []
    assert payloads(ledger_store.read_entries(TOPIC, [missing, positions[2]])) == [b"c"]
    assert ledger_store.read_entries(TOPIC, []).num_rows == 0
    with pytest.raises(InvalidArgumentError, match="Invalid position"):
        ledger_store.read_entries(TOPIC, [(1, 2, 3)])  # type: ignore[list-item]


def _fail_after_publish(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash after the segment file is in place but before the metadata commit."""
    real_write = LedgerStore._write_segment

    def write_then_crash(store: LedgerStore, path: str, table: pa.Table) -> None:
        real_write(store, path, table)
        raise RuntimeError("crash before commit")

    monkeypatch.setattr(LedgerStore, "_write_segment", write_then_crash)


def test_crash_inside_append_leaves_nothing_visible(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    [first] = ledger_store.append(TOPIC, [single(b"kept")])
    with monkeypatch.context() as patch:
        _fail_after_publish(patch)
        with pytest.raises(RuntimeError, match="crash before commit"):
            ledger_store.append(TOPIC, [single(b"lost-1"), single(b"lost-2")])
    assert payloads(ledger_store.read_table(TOPIC)) == [b"kept"]
    assert len(ledger_store.entry_index(TOPIC)) == 1
    assert ledger_store.metadata.ledgers(str(TOPIC)) == [
        LedgerInfo(first.ledger_id, str(TOPIC), 1, 1)
    ]
    assert len(ledger_store.segment_paths(TOPIC)) == 1
    # The orphan file is on disk but never read; the next append reuses its entry ids.
    positions = ledger_store.append(TOPIC, [single(b"next")])
    assert positions == [Position(first.ledger_id, 1)]
    assert payloads(ledger_store.read_table(TOPIC)) == [b"kept", b"next"]


def test_failed_write_leaves_no_files(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken_write(*_args: object, **_kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(pq, "write_table", broken_write)
    with pytest.raises(LedgerStoreError, match="Cannot write ledger segment .*ledger-.*parquet"):
        ledger_store.append(TOPIC, [single(b"x")])
    assert [p for p in (tmp_path / "ledgers").rglob("*") if p.is_file()] == []
    assert ledger_store.metadata.ledgers(str(TOPIC)) == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing"])
def test_unreadable_segment(ledger_store: LedgerStore, damage: str) -> None:
    ledger_store.append(TOPIC, [single(b"a")])
    positions = ledger_store.append(TOPIC, [single(b"b")])
    bad = ledger_store.segment_paths(TOPIC)[1]
    if damage == "garbage":
        Path(bad).write_bytes(b"not parquet at all")
    elif damage == "truncated":
        data = Path(bad).read_bytes()
        Path(bad).write_bytes(data[: len(data) // 2])
    else:
        os.unlink(bad)
    for read in (
        lambda: ledger_store.read_table(TOPIC),
        lambda: ledger_store.entry_index(TOPIC),
        lambda: ledger_store.read_entries(TOPIC, positions),
    ):
        with pytest.raises(LedgerStoreError) as info:
            read()
        assert bad in str(info.value)


def test_append_validation(ledger_store: LedgerStore) -> None:
    bad_entries: list[tuple[Sequence[Sequence[RowDraft]], str]] = [
        ([[]], "non-empty"),
        ([[draft(b"a"), draft(b"b")]], "batch_index/batch_size 0/2"),
        ([[draft(b"a", batch_index=0, batch_size=2)]], "one-message entry"),
        (
            [[draft(b"a", batch_index=1, batch_size=2), draft(b"b", batch_index=0, batch_size=2)]],
            "message 0 of a batch of 2",
        ),
        ([single("text")], "payload must be bytes"),  # type: ignore[arg-type]
        ([single(b"a", deliver_at=-5)], "deliver_at"),
        ([single(b"a", publish_time=-1)], "publish_time"),
        ([single(b"a", properties={"k": 1})], "properties"),
        ([single(b"a", key=3)], "key"),
        ([draft(b"a")], "sequence of RowDraft"),  # type: ignore[list-item]
    ]
    for entries, message in bad_entries:
        with pytest.raises(InvalidArgumentError, match=message):
            ledger_store.append(TOPIC, [single(b"fine"), *entries])
    assert ledger_store.read_table(TOPIC).num_rows == 0
    assert ledger_store.append(TOPIC, []) == []
    with pytest.raises(TopicNotFoundError):
        ledger_store.append(PARTITIONED, [single(b"a")])
    with pytest.raises(TopicNotFoundError):
        ledger_store.append(PARTITIONED.partition(2), [single(b"a")])
    with pytest.raises(InvalidArgumentError, match="max_entries_per_ledger"):
        LedgerStore("/tmp/x", ledger_store.metadata, 0)


def test_concurrent_appends_to_one_partition(ledger_store: LedgerStore) -> None:
    results: dict[int, list[Position]] = {}
    errors: list[BaseException] = []

    def append(thread: int) -> None:
        try:
            got: list[Position] = []
            for i in range(10):
                got += ledger_store.append(
                    P1, [single(f"{thread}-{i}-{j}".encode()) for j in range(1 + i % 3)]
                )
            results[thread] = got
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    everything = [p for got in results.values() for p in got]
    assert len(everything) == len(set(everything)) == 4 * sum(1 + i % 3 for i in range(10))
    table = ledger_store.read_table(P1)
    stored = dict(
        zip(
            zip(table["ledger_id"].to_pylist(), table["entry_id"].to_pylist(), strict=True),
            payloads(table),
            strict=True,
        )
    )
    assert set(stored) == set(everything)
    for number, got in results.items():
        expected = [f"{number}-{i}-{j}".encode() for i in range(10) for j in range(1 + i % 3)]
        assert [stored[p] for p in got] == expected
    for info in ledger_store.metadata.ledgers(str(P1)):
        assert info.entries <= 4


def test_a_killed_writer_s_file_is_never_read_nor_written_over(
    ledger_store: LedgerStore,
) -> None:
    """A kill while a segment is written (before its commit) leaves the file cut short
    under that attempt's name: it is never read, and the next append, allocated the same
    entry ids, writes a file of its own (a writer the store gave up on may still be
    writing the first)."""
    name = TOPIC
    [first] = ledger_store.append(name, [single(b"a")])
    folder = Path(ledger_store.segment_paths(name)[0]).parent
    stale = folder / f"ledger-{first.ledger_id:020d}-{1:012d}-0badf00d.parquet"
    left = b"half a parquet file, longer than the segment that replaces it" * 100
    stale.write_bytes(left)
    assert payloads(ledger_store.read_table(name)) == [b"a"]
    assert len(ledger_store.entry_index(name)) == 1
    assert ledger_store.append(name, [single(b"b")]) == [Position(first.ledger_id, 1)]
    assert payloads(ledger_store.read_table(name)) == [b"a", b"b"]
    assert stale.read_bytes() == left
    assert str(stale) not in ledger_store.segment_paths(name)


def test_a_write_whose_commit_fails_leaves_no_file(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = TOPIC
    ledger_store.append(name, [single(b"a")])
    folder = Path(ledger_store.segment_paths(name)[0]).parent
    before = sorted(folder.iterdir())
    from cursorops.core.store import ledger as ledger_module

    real = ledger_module.LedgerStore._write_segment

    def written_then_refused(store: LedgerStore, path: str, table: pa.Table) -> None:
        real(store, path, table)
        assert Path(path).exists()
        raise BrokerFencedError("declared dead meanwhile")

    monkeypatch.setattr(ledger_module.LedgerStore, "_write_segment", written_then_refused)
    with pytest.raises(BrokerFencedError):
        ledger_store.append(name, [single(b"b")])
    with pytest.raises(BrokerFencedError):
        ledger_store.append_columns(name, np.ones(1, np.int64), columns([b"c"]))
    assert sorted(folder.iterdir()) == before
    assert payloads(ledger_store.read_table(name)) == [b"a"]


@pytest.mark.parametrize(
    "bad",
    [
        {"key": "k\udcff"},
        {"properties": {"p": "\udc80"}},
        {"properties": {"\udc80": "v"}},
        {"deliver_at": 2**63},
        {"publish_time": 2**64},
    ],
)
def test_keys_properties_and_times_that_parquet_cannot_hold_are_refused(
    ledger_store: LedgerStore, bad: dict[str, object]
) -> None:
    name = TOPIC
    with pytest.raises(InvalidArgumentError):
        ledger_store.append(name, [single(b"x", **bad)])
    assert ledger_store.metadata.ledgers(str(name)) == []


def test_a_failed_fsync_leaves_no_file_and_nothing_listed(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken_fsync(_descriptor: int) -> None:
        raise OSError("I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", broken_fsync)
        with pytest.raises(LedgerStoreError, match="Cannot write ledger segment .*I/O error"):
            ledger_store.append(TOPIC, [single(b"x")])
    assert [p for p in (tmp_path / "ledgers").rglob("*") if p.is_file()] == []
    assert ledger_store.segment_paths(TOPIC) == []
    assert ledger_store.append(TOPIC, [single(b"y")])[0].entry_id == 0
    assert payloads(ledger_store.read_table(TOPIC)) == [b"y"]

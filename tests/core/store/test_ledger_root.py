"""The ledger root as a ``pyarrow.fs`` file system: a plain path and a ``file://`` URI
serve a broker end to end, every read goes through the root's file system, and any
other scheme is refused before anything is created."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.ledger_root import LedgerRoot, open_ledger_root
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.segment_reader import SegmentCache, batches_after
from tests.core.store.test_cursor_door_append import columns

TOPIC = "persistent://acme/ops/rooted"


def _setup(broker: Broker) -> None:
    broker.admin.create_tenant("admin", "acme")
    broker.admin.create_namespace("admin", "acme/ops")
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))


def test_a_file_uri_root_serves_a_broker_end_to_end(tmp_path: Path, metadata_url: str) -> None:
    local = tmp_path / "shared ledgers"
    uri = local.as_uri()
    assert "%20" in uri
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url, ledger_root=uri)
    with Broker(config) as broker:
        assert broker.ledgers.root == str(local)
        assert isinstance(broker.ledgers.filesystem, pafs.LocalFileSystem)
        _setup(broker)
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(5)]
        )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(5, 8)]
        )
        # Written under the URI's local path, decoded.
        assert len(_files(local)) == 2
        payloads = broker.ledgers.read_table(TOPIC, ["payload"]).column("payload").to_pylist()
        assert payloads == [f"m{i}".encode() for i in range(8)]
    # Another process (no segment in memory) reads the files through the file system.
    with Broker(config) as other:
        consumer = other.reading.dispatcher("admin", TOPIC, "s").subscribe(
            "c", receiver_queue_size=10
        )
        got = consumer.receive_many(10)
        assert [m.payload for m in got] == [f"m{i}".encode() for i in range(8)]
        consumer.acknowledge(got)
        assert len(other.ledgers.entry_index(TOPIC)) == 8
        assert [m.payload for m in other.reading.consume("admin", TOPIC, "s", 5)] == []


def test_a_plain_path_root_is_local_and_absolute(
    tmp_path: Path, metadata_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url, ledger_root="ledgers")
    with Broker(config) as broker:
        assert broker.ledgers.root == str(tmp_path / "ledgers")
        assert isinstance(broker.ledgers.filesystem, pafs.LocalFileSystem)
        _setup(broker)
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"a"), OutgoingMessage(b"b")])
        assert len(_files(tmp_path / "ledgers")) == 1
        got = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c").receive_many(5)
        assert [m.payload for m in got] == [b"a", b"b"]


@pytest.mark.parametrize(
    "root",
    [
        "s3://bucket/ledgers",
        "S3://bucket/ledgers",
        "gs://bucket/ledgers",
        "hdfs://namenode:8020/ledgers",
        "abfs://container@account/ledgers",
        "ledgers:old",
    ],
)
def test_a_root_that_is_not_local_is_refused_at_open_and_changes_nothing(
    tmp_path: Path, root: str
) -> None:
    home = tmp_path / "home"
    config = Config.from_home(home, ledger_root=root)
    with pytest.raises(InvalidArgumentError) as refused:
        Broker(config)
    message = str(refused.value)
    assert repr(root) in message
    assert "only local roots" in message
    assert "fsync" in message
    # Refused before the metadata store was opened: nothing was created.
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "root", ["file://elsewhere/ledgers", "file://localhost/ledgers", "/tmp/a\x00b"]
)
def test_a_malformed_local_root_is_refused(tmp_path: Path, root: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        Broker(Config.from_home(tmp_path / "home", ledger_root=root))
    assert repr(root) in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_the_root_resolves_once() -> None:
    resolved = open_ledger_root("file:///srv/x/../ledgers")
    assert resolved.path == "/srv/ledgers"
    assert open_ledger_root(resolved) is resolved


class _Recording(pafs.FileSystemHandler):  # type: ignore[misc]
    """The local file system, noting every file opened for reading and every file info
    asked for."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.opened: list[str] = []
        self.infos: list[str] = []

    def get_type_name(self) -> str:
        return "recording"

    def equals(self, other: object) -> bool:
        return other is self

    def normalize_path(self, path: str) -> str:
        return str(self.local.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        self.infos.extend(paths)
        return list(self.local.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.local.get_file_info(selector))

    def open_input_file(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self.local.open_input_file(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self.local.open_input_stream(path)

    def _refused(self, *args: object) -> None:
        raise AssertionError(f"a read path changed the file system: {args}")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _refused
    delete_file = move = copy_file = open_output_stream = open_append_stream = _refused


def test_every_read_goes_through_the_roots_file_system(tmp_path: Path) -> None:
    local = tmp_path / "ledgers"
    recording = _Recording()
    root = LedgerRoot(pafs.PyFileSystem(recording), str(local))
    with MetadataStore(f"sqlite:///{tmp_path / 'metadata.db'}") as metadata:
        metadata.create_tenant("acme")
        metadata.create_namespace("acme/ops")
        metadata.create_topic(TOPIC, 0)
        store = LedgerStore(root, metadata, 100)
        store.append_columns(
            TopicName.parse(TOPIC), np.ones(3, np.int64), columns([b"x", b"y", b"z"])
        )
        [segment] = metadata.segments(TOPIC)
        path = str(local / segment.path)
        # Written with the operating system's calls; the identity comes from the file system.
        assert recording.opened == []
        assert recording.infos == [path]
        stat = os.stat(path)
        assert store.recent.get((path, stat.st_size, stat.st_mtime_ns)) is not None

        def reads(read: Callable[[], object]) -> tuple[list[str], list[str]]:
            recording.opened.clear()
            recording.infos.clear()
            assert read()
            return recording.opened, recording.infos

        opened, _ = reads(lambda: store.read_table(TOPIC).num_rows == 3)
        assert opened == [path]
        opened, _ = reads(
            lambda: store.read_entries(TOPIC, [Position(segment.ledger_id, 1)]).num_rows
        )
        assert opened == [path]
        opened, infos = reads(lambda: len(store.entry_index(TOPIC)) == 3)
        assert (opened, infos) == ([path], [path])
        opened, infos = reads(lambda: len(store.entry_index(TOPIC)) == 3)
        assert (opened, infos) == ([], [path])
        opened, _ = reads(lambda: list(batches_after(root, [segment], Position(-1, -1))))
        assert opened == [path]
        cache = SegmentCache(root)
        opened, infos = reads(lambda: list(cache.batches_after([segment], Position(-1, -1))))
        assert path in opened and infos == [path]
        opened, infos = reads(lambda: list(cache.batches_after([segment], Position(-1, -1))))
        assert (opened, infos) == ([], [path])

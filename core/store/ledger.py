"""The ledger store: topic data as immutable Parquet segments, one row per message.

Layout (docs/architecture.md, "Storage layout")::

    <root>/<tenant>/<namespace>/<topic>/partition-<n>/ledger-<ledger:020d>-<first_entry:012d>-<attempt>.parquet

``partition-none`` for a non-partitioned topic. Each file is one *segment*: the
entries one append wrote into one ledger. The metadata store allocates the entry
ids and lists every committed segment (paths relative to the root); a segment is
written under a name of its own while the partition's allocation lock is held
(``<attempt>``: 8 random hex digits, new for every write), the file and its folder
fsynced side by side, then registered in the same transaction. Readers read only
listed segments, so a file left behind by a crash before the commit (whole or cut
short) is never read. The next append reuses its entry ids but not its name: a
writer the store gave up on (a broker paused past its deadline, whose transaction
the server ended) may still be writing its file when another broker commits the same
entry ids, and never writes into the other's file. A write whose commit fails
removes its file.

Segments are read through the root's ``pyarrow.fs`` file system
(:mod:`cursorops.core.store.ledger_root`) and written with the operating system's
calls under its local base path (``fsync``).

pyarrow and OS errors are translated here to :class:`~cursorops.core.domain.errors.LedgerStoreError`
naming the file.

Size: one module on purpose. The write path (checks, atomic segment commit,
fsyncs) and the read path share the segment format and its index cache: the
format has one home.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError, LedgerStoreError
from cursorops.core.domain.ids.chunked_messages import chunk_rest
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.message_schema import MESSAGE_SCHEMA
from cursorops.core.store import arrow_columns
from cursorops.core.store.ledger_root import FileIdentity, LedgerRoot, open_ledger_root

if TYPE_CHECKING:
    # Imported where filters are built: pyarrow.compute takes longer to import than
    # a small command line takes to run, and only filtered reads need it.
    import pyarrow.compute as pc

    from cursorops.core.store.cursor_door import CursorTransaction
    from cursorops.core.store.metadata import MetadataStore
    from cursorops.core.store.values import SegmentInfo

LATER_COLUMNS = (
    "event_time",
    "ordering_key",
    "null_value",
    "encrypted",
    "encryption_keys",
    "uuid",
    "chunk_id",
    "num_chunks_from_msg",
    "total_chunk_msg_size",
    "schema_version",
    "metadata",
    "entry_payload",
    "single_metadata",
)
"""Nullable columns added after the first segments were written: a segment without
one reads it as all null, exactly as if it were there. Older ledger folders stay
readable without a rewrite, and a segment is written without those null on every one
of its rows (most of them, for most segments: a one-message segment encodes in about
half the time without them). Every other column is in every segment, ``deliver_at``
and ``key`` too (nullable, but read by every version since the first): a segment
lacking one is unreadable."""

SORT_KEYS = ("ledger_id", "entry_id", "batch_index")
"""The order rows are returned in."""

_INT64_MAX = 2**63 - 1

_INDEX_COLUMNS = [
    "ledger_id",
    "entry_id",
    "batch_index",
    "batch_size",
    "deliver_at",
    "publish_time",
    "chunk_id",
    "num_chunks_from_msg",
]


SEGMENT_ROW_GROUP = 4096
"""Rows per Parquet row group of a segment: a consumer reading from the middle of a
segment skips whole groups by their entry-id statistics."""

SEGMENT_WRITE_OPTIONS: dict[str, object] = {
    "row_group_size": SEGMENT_ROW_GROUP,
    "use_dictionary": False,
}
"""``pyarrow.parquet.write_table`` settings of every segment, measured on segments of
6,250 32-byte messages (docs/benchmarks.md, "Produce"): without dictionary pages
encoding takes half the CPU time (1.3 ms against 2.6-2.9) and reading a quarter
less (2.1 ms against 2.9), for 9% more bytes, as the values are mostly unique or
one repeated value that Snappy compresses as well. Snappy costs the same CPU as no
compression and writes 7x fewer bytes; zstd writes 4x fewer still but costs 50%
more CPU. Statistics on every column, as before: dropping them changed nothing
measurable, and readers skip row groups by their entry ids."""

_WRITERS = 8
"""Threads writing the segments of one multi-partition append."""


@dataclass(frozen=True, slots=True)
class RowDraft:
    """One message of an entry about to be appended.

    The store fills in the partition, ledger and entry ids. An entry of several
    messages is batched: its rows carry ``batch_index`` 0..n-1 and ``batch_size``
    n. A one-message entry is either not batched (-1, 0) or a batch of one (0, 1).
    """

    payload: bytes
    publish_time: int
    producer_name: str
    sequence_id: int
    batch_index: int = -1
    batch_size: int = 0
    deliver_at: int | None = None
    key: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Segment:
    """One segment of a multi-partition append, before its table is assembled."""

    path: str
    partition: int
    ledger_id: int
    first_entry: int
    sizes: np.ndarray
    columns: Mapping[str, pa.Array]


@dataclass(frozen=True)
class _Written:
    """A segment as :meth:`LedgerStore._write_one` wrote it."""

    identity: FileIdentity
    table: pa.Table


@dataclass(frozen=True)
class EntryColumns:
    """The per-entry columns of a partition: one row per committed entry, sorted by
    ``(ledger_id, entry_id)``.

    Aligned numpy arrays, the form ``cursorops.core.domain.analysis.backlog`` works on.
    """

    ledger_id: np.ndarray
    """int64."""
    entry_id: np.ndarray
    """int64."""
    batch_size: np.ndarray
    """int32; 0 = the entry is not batched."""
    deliver_at: np.ndarray
    """int64 epoch ms, the latest over the entry's messages; -1 = not delayed."""
    publish_time: np.ndarray
    """int64 epoch ms."""
    chunk_rest: np.ndarray
    """bool; a chunk before its message's last: the message is counted once, at its
    last chunk (the client gets it, whole, only once that one is there)."""

    def __len__(self) -> int:
        return len(self.ledger_id)

    @property
    def messages(self) -> np.ndarray:
        """Messages per entry: ``max(batch_size, 1)``."""
        return np.maximum(self.batch_size.astype(np.int64), 1)

    def positions(self) -> list[Position]:
        return list(map(Position, self.ledger_id.tolist(), self.entry_id.tolist()))


def _check_int(kind: str, value: object, minimum: int, maximum: int = _INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidArgumentError(
            f"Invalid {kind} {value!r}: expected an integer from {minimum} to {maximum}"
        )
    return value


def _check_utf8(kind: str, value: str, number: int) -> None:
    # A str from a command line may hold lone surrogates (undecodable bytes): not UTF-8.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"Entry {number}: {kind} is not valid UTF-8 text") from None


def _check_entry(entry: Sequence[RowDraft], number: int) -> None:
    if isinstance(entry, RowDraft) or not isinstance(entry, Sequence) or not entry:
        raise InvalidArgumentError(f"Entry {number}: expected a non-empty sequence of RowDraft")
    size = len(entry)
    for index, row in enumerate(entry):
        if not isinstance(row, RowDraft):
            raise InvalidArgumentError(
                f"Entry {number}: expected RowDraft, got {type(row).__name__}"
            )
        batch = (row.batch_index, row.batch_size)
        if size == 1 and batch not in ((-1, 0), (0, 1)):
            raise InvalidArgumentError(
                f"Entry {number}: a one-message entry must have batch_index/batch_size "
                f"-1/0 (not batched) or 0/1, got {row.batch_index}/{row.batch_size}"
            )
        if size > 1 and batch != (index, size):
            raise InvalidArgumentError(
                f"Entry {number}: message {index} of a batch of {size} must have "
                f"batch_index/batch_size {index}/{size}, got {row.batch_index}/{row.batch_size}"
            )
        if not isinstance(row.payload, bytes):
            raise InvalidArgumentError(f"Entry {number}: payload must be bytes")
        _check_int("publish_time", row.publish_time, 0)
        _check_int("sequence_id", row.sequence_id, 0)
        if row.deliver_at is not None:
            _check_int("deliver_at", row.deliver_at, 0)
        if row.key is not None and not isinstance(row.key, str):
            raise InvalidArgumentError(f"Entry {number}: key must be a string or None")
        if not isinstance(row.producer_name, str):
            raise InvalidArgumentError(f"Entry {number}: producer_name must be a string")
        if not isinstance(row.properties, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in row.properties.items()
        ):
            raise InvalidArgumentError(f"Entry {number}: properties must map strings to strings")
        texts = [("key", row.key or ""), ("producer_name", row.producer_name)]
        texts += [("a property", text) for pair in row.properties.items() for text in pair]
        for kind, text in texts:
            _check_utf8(kind, text, number)


def _topic_partition(topic_partition: TopicName | str) -> TopicName:
    if isinstance(topic_partition, TopicName):
        return topic_partition
    return TopicName.parse(topic_partition)


@contextmanager
def _io(what: str) -> Iterator[None]:
    """The one place pyarrow and OS errors become LedgerStoreError."""
    try:
        yield
    except (OSError, pa.ArrowException) as exc:
        raise LedgerStoreError(f"{what}: {exc}") from exc


class LedgerStore:
    """Parquet segments under a local folder, listed by the metadata store.

    ``root``: ``Config.ledger_root`` (a path or a ``file://`` URI), or the
    :class:`~cursorops.core.store.ledger_root.LedgerRoot` it resolves to.
    """

    def __init__(
        self, root: str | LedgerRoot, metadata: MetadataStore, max_entries_per_ledger: int
    ) -> None:
        self.location = open_ledger_root(root)
        """The file system segments are read through, and the base path."""
        self.root = self.location.path
        """The absolute local base path."""
        self.filesystem = self.location.filesystem
        self.metadata = metadata
        self.max_entries_per_ledger = _check_int(
            "max_entries_per_ledger", max_entries_per_ledger, 1
        )
        self._entry_indexes = _SegmentIndexCache(ENTRY_INDEX_CACHE_BYTES)
        self.recent = RecentSegments(RECENT_SEGMENT_BYTES)
        """Segments this store appended lately (columnar path), as written."""

    @classmethod
    def from_config(cls, config: Config, metadata: MetadataStore) -> LedgerStore:
        return cls(config.ledger_root, metadata, config.max_entries_per_ledger)

    # Paths.

    @staticmethod
    def relative_path(topic_partition: TopicName, ledger_id: int, first_entry: int) -> str:
        """A new segment's path under the root, as the metadata store records it: a name
        no other write attempt has (:mod:`cursorops.core.store.ledger`)."""
        base = topic_partition.base
        index = topic_partition.partition_index
        folder = "partition-none" if index < 0 else f"partition-{index}"
        return (
            f"{base.tenant}/{base.namespace}/{base.local_name}/{folder}/"
            f"ledger-{ledger_id:020d}-{first_entry:012d}-{uuid.uuid4().hex[:8]}.parquet"
        )

    def _absolute(self, path: str) -> str:
        return self.location.join(path)

    def segment_paths(self, topic_partition: TopicName) -> list[str]:
        """Absolute paths of the committed segments, in ``(ledger, first entry)`` order."""
        name = _topic_partition(topic_partition)
        return [self._absolute(s.path) for s in self.metadata.segments(str(name))]

    def remove_segments(self, paths: Sequence[str]) -> None:
        """Remove the files of segments no longer listed (a deleted topic's), then their
        folders where nothing else is left in them. Best effort, after the metadata's commit
        (nothing reads an unlisted segment): a file that cannot be removed is left, and a
        folder a new topic of the same name writes into again stays."""
        folders: set[str] = set()
        for path in paths:
            absolute = self._absolute(path)
            folders.add(os.path.dirname(absolute))
            with contextlib.suppress(OSError):
                os.unlink(absolute)
        for folder in sorted(folders, reverse=True):
            topic_folder = os.path.dirname(folder)
            for empty in (folder, topic_folder):
                with contextlib.suppress(OSError):
                    os.rmdir(empty)

    # Writing.

    def append(
        self, topic_partition: TopicName, entries: Sequence[Sequence[RowDraft]]
    ) -> list[Position]:
        """Append entries to the partition; returns their positions, in order.

        One segment per ledger the append touches: when the current ledger fills
        up (``max_entries_per_ledger``) the rest goes to a new ledger. Each segment
        is committed on its own, so a failure part-way leaves the earlier segments
        committed and nothing of the failing one.
        """
        name = _topic_partition(topic_partition)
        for number, entry in enumerate(entries):
            _check_entry(entry, number)
        positions: list[Position] = []
        start = 0
        while start < len(entries):
            files: list[str] = []
            with (
                _removed_unless_committed(files),
                self.metadata.append_entries(
                    str(name), len(entries) - start, self.max_entries_per_ledger
                ) as allocation,
            ):
                chunk = entries[start : start + allocation.count]
                table, written = _build_table(
                    name.partition_index, allocation.ledger_id, allocation.first_entry, chunk
                )
                path = self.relative_path(name, allocation.ledger_id, allocation.first_entry)
                files.append(self._absolute(path))
                self._write_segment(self._absolute(path), written)
                allocation.path = path
                allocation.messages = table.num_rows
            positions.extend(
                Position(allocation.ledger_id, allocation.first_entry + i)
                for i in range(allocation.count)
            )
            start += allocation.count
        return positions

    def append_columns(
        self,
        topic_partition: TopicName,
        entry_sizes: np.ndarray,
        columns: Mapping[str, pa.Array],
    ) -> list[Position]:
        """Append entries given as message columns; returns their positions, in order.

        The columnar form of :meth:`append` for a caller that built and checked
        the rows itself (the producer's fast path): ``columns`` holds every
        message column but ``partition``, ``ledger_id`` and ``entry_id``, one
        row per message, entry after entry; ``entry_sizes`` the messages per
        entry. Segments and commits as in :meth:`append`.
        """
        return self.append_columns_many([(topic_partition, entry_sizes, columns)])[0]

    def append_columns_many(
        self,
        parts: Sequence[tuple[TopicName, np.ndarray, Mapping[str, pa.Array]]],
        *,
        work: CursorTransaction | None = None,
    ) -> list[list[Position]]:
        """:meth:`append_columns` to several partitions (each once), committed together.

        One metadata transaction registers the segments of every partition (a
        second one only for what did not fit in a partition's current ledger),
        and the segment files are written and fsynced side by side, so the
        disk's flushes overlap: the cost of a call is about one segment's
        fsync and one commit, not one of each per partition.

        ``work``: register the segments in the caller's transaction instead
        (:meth:`~cursorops.core.store.cursor_door.CursorTransaction.append_entries`), every
        ledger the append fills included: they become readable when, and only
        if, that transaction commits. The files are on disk (fsynced) when this
        returns; the positions are final once the caller commits.
        """
        allocate = self.metadata.append_entries_many if work is None else work.append_entries
        names = [_topic_partition(topic_partition) for topic_partition, _, _ in parts]
        sizes = [np.asarray(entry_sizes, dtype=np.int64) for _, entry_sizes, _ in parts]
        for entry_sizes, (_, _, columns) in zip(sizes, parts, strict=True):
            total = int(entry_sizes.sum())
            if len(entry_sizes) == 0 or int(entry_sizes.min()) < 1:
                raise InvalidArgumentError("Every entry must hold at least one message")
            if any(len(column) != total for column in columns.values()):
                raise InvalidArgumentError("Every message column must have one row per message")
        ends = [np.cumsum(entry_sizes) for entry_sizes in sizes]
        positions: list[list[Position]] = [[] for _ in parts]
        done = [0] * len(parts)
        while True:
            pending = [i for i in range(len(parts)) if done[i] < len(sizes[i])]
            if not pending:
                return positions
            files: list[str] = []
            with (
                # In the caller's transaction, the caller's commit is not known here.
                _removed_unless_committed(files if work is None else []),
                allocate(
                    [(str(names[i]), len(sizes[i]) - done[i]) for i in pending],
                    self.max_entries_per_ledger,
                ) as allocations,
            ):
                segments = []
                for i, allocation in zip(pending, allocations, strict=True):
                    start, stop = done[i], done[i] + allocation.count
                    first_row = int(ends[i][start - 1]) if start else 0
                    rows = int(ends[i][stop - 1]) - first_row
                    allocation.path = self.relative_path(
                        names[i], allocation.ledger_id, allocation.first_entry
                    )
                    allocation.messages = rows
                    files.append(self._absolute(allocation.path))
                    segments.append(
                        _Segment(
                            self._absolute(allocation.path),
                            names[i].partition_index,
                            allocation.ledger_id,
                            allocation.first_entry,
                            sizes[i][start:stop],
                            {
                                key: column.slice(first_row, rows)
                                for key, column in parts[i][2].items()
                            },
                        )
                    )
                written = self._write_segments(segments)
            if work is None:
                # Committed: from now on a dispatcher may read them from memory.
                for segment in written:
                    self.recent.put(segment.identity, segment.table)
            for i, allocation in zip(pending, allocations, strict=True):
                positions[i].extend(
                    Position(allocation.ledger_id, allocation.first_entry + k)
                    for k in range(allocation.count)
                )
                done[i] += allocation.count

    def _write_segments(self, segments: Sequence[_Segment]) -> list[_Written]:
        """Write segments of different partitions, side by side when there are several."""
        if len(segments) == 1:
            return [self._write_one(segments[0])]
        with ThreadPoolExecutor(max_workers=min(len(segments), _WRITERS)) as pool:
            # Table assembly, Parquet encoding, the write and fsync release the GIL: the
            # files are encoded on every core and flushed at the same time, and the file
            # system joins the flushes.
            return [done.result() for done in [pool.submit(self._write_one, s) for s in segments]]

    def _write_one(self, segment: _Segment) -> _Written:
        table, written = segment_tables(
            segment.partition,
            segment.ledger_id,
            segment.first_entry,
            segment.sizes,
            segment.columns,
        )
        return _Written(self._write_segment(segment.path, written), table)

    def _write_segment(self, path: str, table: pa.Table) -> FileIdentity:
        """Write and fsync the segment under its final name, and fsync its folder.

        ``table``: the columns the file holds (:func:`segment_tables`).

        No temporary and rename: until the metadata commit lists it, the file is
        never read, so a crash that leaves it whole or cut short loses nothing,
        and the name is this attempt's own (:meth:`relative_path`), so nothing
        else ever writes into it. The file's bytes and the folder's entry for it are
        flushed side by side, not one after the other: the commit that lists it
        waits for both. A failed write removes the file. Returns the file's
        path, size and modification time as the root's file system gives them (what the
        read caches key it by; no inode, since no name is ever written twice).
        """
        folder = os.path.dirname(path)
        with _io(f"Cannot write ledger segment {path}"):
            os.makedirs(folder, exist_ok=True)
            # Encoded in memory, then written and fsynced through a plain descriptor:
            # a Python file object as pyarrow's sink would take the GIL for every write.
            encoded = pa.BufferOutputStream()
            pq.write_table(table, encoded, **SEGMENT_WRITE_OPTIONS)
            data = memoryview(encoded.getvalue())
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                while data:
                    data = data[os.write(descriptor, data) :]
                folder_synced = _folder_syncs().submit(_fsync_folder, folder)
                try:
                    os.fsync(descriptor)
                finally:
                    folder_synced.result()
            except BaseException:
                os.close(descriptor)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                raise
            os.close(descriptor)
            return self.location.identity(path)

    # Reading.

    def read_table(
        self,
        topic_partition: TopicName,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
    ) -> pa.Table:
        """Rows of every committed segment, sorted by ``(ledger_id, entry_id, batch_index)``.

        ``columns`` selects columns (all by default); ``filter`` is pushed down to
        the Parquet scan. Cost: one scan of the listed segments.
        """
        name = _topic_partition(topic_partition)
        return self._read(str(name), self.metadata.segments(str(name)), columns, filter)

    def entry_index(
        self, topic_partition: TopicName, segments: Sequence[SegmentInfo] | None = None
    ) -> EntryColumns:
        """One row per committed entry, sorted by ``(ledger_id, entry_id)``.

        Reads six integer columns; the per-entry values come from each entry's
        first row (every row of an entry shares ``batch_size`` and
        ``publish_time``), except ``deliver_at``, the latest over the entry.
        Each segment's share is kept (:data:`ENTRY_INDEX_CACHE_BYTES`): a
        committed segment never changes, so a later call (a skip's apply after
        its plan) reads only the segment list and segments it has not seen. ``segments``:
        the partition's segment list, when the caller read it already.
        """
        name = _topic_partition(topic_partition)
        if segments is None:
            segments = self.metadata.segments(str(name))
        parts = [self._segment_entries(segment) for segment in segments]
        if not parts:
            return _entry_columns(MESSAGE_SCHEMA.empty_table().select(_INDEX_COLUMNS))
        index = EntryColumns(
            *(np.concatenate([getattr(part, column) for part in parts]) for column in _ENTRY_FIELDS)
        )
        ledgers, entries = index.ledger_id, index.entry_id
        if ledgers.size > 1 and not bool(
            (
                (np.diff(ledgers) > 0) | ((ledgers[1:] == ledgers[:-1]) & (np.diff(entries) > 0))
            ).all()
        ):
            order = np.lexsort((entries, ledgers))
            index = EntryColumns(*(getattr(index, column)[order] for column in _ENTRY_FIELDS))
        return index

    def _segment_entries(self, segment: SegmentInfo) -> EntryColumns:
        """One segment's share of :meth:`entry_index`, from the cache when the file is unchanged."""
        path = self._absolute(segment.path)
        try:
            key = self.location.identity(path)
        except (OSError, pa.ArrowException) as exc:
            raise LedgerStoreError(f"Cannot read ledger segment {path}: {exc}") from exc
        cached = self._entry_indexes.get(key)
        if cached is not None:
            return cached
        try:
            table = _read_segments(self.filesystem, [path], _INDEX_COLUMNS)
        except (OSError, pa.ArrowException) as exc:
            raise LedgerStoreError(f"Cannot read ledger segment {path}: {exc}") from exc
        if not _is_sorted(table):
            table = table.sort_by([(k, "ascending") for k in SORT_KEYS])
        entries = _entry_columns(table)
        self._entry_indexes.put(key, entries)
        return entries

    def read_entries(self, topic_partition: TopicName, positions: Sequence[Position]) -> pa.Table:
        """Every row of the entries at ``positions``, sorted; positions with no entry are absent.

        Reads only the segments that hold one of the positions, with a filter on
        ``ledger_id``/``entry_id`` pushed down to the scan.
        """
        name = _topic_partition(topic_partition)
        wanted: dict[int, list[int]] = {}
        for position in positions:
            if not isinstance(position, tuple) or len(position) != 2:
                raise InvalidArgumentError(
                    f"Invalid position {position!r}: expected (ledger, entry)"
                )
            ledger_id, entry_id = position
            _check_int("ledger id", ledger_id, -(2**63))
            _check_int("entry id", entry_id, -(2**63))
            wanted.setdefault(ledger_id, []).append(entry_id)
        for entry_ids in wanted.values():
            entry_ids.sort()
        segments = [
            segment
            for segment in self.metadata.segments(str(name))
            if _holds_any(segment, wanted.get(segment.ledger_id, []))
        ]
        if not segments:
            return MESSAGE_SCHEMA.empty_table()
        import pyarrow.compute as pc

        condition: pc.Expression | None = None
        for ledger_id, entry_ids in wanted.items():
            term = (pc.field("ledger_id") == ledger_id) & pc.field("entry_id").isin(
                pa.array(sorted(set(entry_ids)), pa.int64())
            )
            condition = term if condition is None else condition | term
        return self._read(str(name), segments, None, condition)

    def _read(
        self,
        topic_partition: str,
        segments: Sequence[SegmentInfo],
        columns: Sequence[str] | None,
        filter: pc.Expression | None,
    ) -> pa.Table:
        selected = list(MESSAGE_SCHEMA.names if columns is None else columns)
        unknown = [c for c in selected if c not in MESSAGE_SCHEMA.names]
        if unknown or isinstance(columns, str):
            raise InvalidArgumentError(
                f"Unknown columns {unknown or columns!r}: expected some of {MESSAGE_SCHEMA.names}"
            )
        if filter is not None:
            try:
                MESSAGE_SCHEMA.empty_table().filter(filter)
            except (pa.ArrowException, TypeError) as exc:
                raise InvalidArgumentError(f"Invalid filter {filter}: {exc}") from exc
        scanned = selected + [k for k in SORT_KEYS if k not in selected]
        if not segments:
            return MESSAGE_SCHEMA.empty_table().select(selected)
        paths = [self._absolute(segment.path) for segment in segments]
        try:
            if filter is None:
                table = _read_segments(self.filesystem, paths, scanned)
            else:
                # Imported here: pyarrow.dataset imports pandas (when installed), a third
                # of a second that only filtered reads need to pay.
                import pyarrow.dataset as ds

                dataset = ds.dataset(
                    paths, schema=MESSAGE_SCHEMA, format="parquet", filesystem=self.filesystem
                )
                table = dataset.to_table(columns=scanned, filter=filter)
        except (OSError, pa.ArrowException) as exc:
            culprit = _first_unreadable(self.filesystem, paths, scanned)
            where = culprit or f"one of the {len(paths)} segments of {topic_partition}"
            raise LedgerStoreError(f"Cannot read ledger segment {where}: {exc}") from exc
        if not _is_sorted(table):
            table = table.sort_by([(key, "ascending") for key in SORT_KEYS])
        return table.select(selected)


def _read_segments(
    filesystem: pafs.FileSystem, paths: Sequence[str], columns: list[str]
) -> pa.Table:
    """``columns`` of every segment in ``paths``, in that order, typed as in MESSAGE_SCHEMA.

    One Parquet file at a time, without pyarrow.dataset (see :meth:`LedgerStore._read`).
    A segment lacking one of the columns is unreadable, unless the column is one of
    :data:`LATER_COLUMNS` (read as nulls).
    """
    target = pa.schema([MESSAGE_SCHEMA.field(name) for name in columns])
    tables = []
    for path in paths:
        with pq.ParquetFile(path, filesystem=filesystem) as segment:
            present = segment.schema_arrow.names
            missing = [name for name in columns if name not in present]
            if any(name not in LATER_COLUMNS for name in missing):
                raise pa.ArrowInvalid(f"no column {', '.join(missing)}")
            table = with_later_columns(
                segment.read(columns=[c for c in columns if c in present]), columns
            )
            # Table.cast imports pyarrow.compute: only when the file's types differ.
            tables.append(table if table.schema == target else table.cast(target))
    return pa.concat_tables(tables)


def with_later_columns(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` with ``columns`` in that order, the :data:`LATER_COLUMNS` it lacks as nulls
    (a segment written before they existed, or without those null on all its rows:
    :func:`segment_tables`), typed as in MESSAGE_SCHEMA."""
    lacking = [name for name in columns if name not in table.column_names]
    if not lacking:
        return table.select(list(columns))
    for name in lacking:
        if name not in LATER_COLUMNS:
            raise pa.ArrowInvalid(f"no column {name}")
        kind = MESSAGE_SCHEMA.field(name).type
        table = table.append_column(MESSAGE_SCHEMA.field(name), pa.nulls(table.num_rows, kind))
    target = pa.schema([MESSAGE_SCHEMA.field(name) for name in columns])
    table = table.select(list(columns))
    # Table.cast imports pyarrow.compute: only when the file's types differ.
    return table if table.schema == target else table.cast(target)


def _build_table(
    partition: int, ledger_id: int, first_entry: int, entries: Sequence[Sequence[RowDraft]]
) -> tuple[pa.Table, pa.Table]:
    rows = [row for entry in entries for row in entry]
    columns = {
        "batch_index": pa.array([r.batch_index for r in rows], pa.int32()),
        "batch_size": pa.array([r.batch_size for r in rows], pa.int32()),
        "publish_time": pa.array([r.publish_time for r in rows], pa.int64()),
        "deliver_at": pa.array([r.deliver_at for r in rows], pa.int64()),
        "key": pa.array([r.key for r in rows], pa.string()),
        "properties": pa.array(
            [list(r.properties.items()) for r in rows], MESSAGE_SCHEMA.field("properties").type
        ),
        "payload": pa.array([r.payload for r in rows], pa.binary()),
        "producer_name": pa.array([r.producer_name for r in rows], pa.string()),
        "sequence_id": pa.array([r.sequence_id for r in rows], pa.int64()),
    }
    sizes = np.fromiter((len(entry) for entry in entries), np.int64, len(entries))
    return segment_tables(partition, ledger_id, first_entry, sizes, columns)


_LATER = frozenset(LATER_COLUMNS)


def segment_tables(
    partition: int,
    ledger_id: int,
    first_entry: int,
    sizes: np.ndarray,
    columns: Mapping[str, pa.Array],
) -> tuple[pa.Table, pa.Table]:
    """A segment's rows: the message columns plus partition, ledger and entry ids.

    Two tables of the same rows: every column of MESSAGE_SCHEMA (what the segment
    holds, as readers see it), and the columns its file holds, without the
    :data:`LATER_COLUMNS` null on every row. Chosen here, from the arrays: asking a
    table for its columns costs more than the choice saves on a small segment.
    """
    n = int(sizes.sum())
    entry_ids = np.repeat(np.arange(first_entry, first_entry + len(sizes), dtype=np.int64), sizes)
    full = {
        "partition": arrow_columns.from_numpy(np.full(n, partition, np.int32)),
        "ledger_id": arrow_columns.from_numpy(np.full(n, ledger_id, np.int64)),
        "entry_id": arrow_columns.from_numpy(entry_ids),
        **columns,
    }
    written = [
        index
        for index, name in enumerate(MESSAGE_SCHEMA.names)
        if name not in _LATER or (name in full and full[name].null_count < n)
    ]
    for name in LATER_COLUMNS:
        if name not in full:
            full[name] = pa.nulls(n, MESSAGE_SCHEMA.field(name).type)
    table = pa.table({name: full[name] for name in MESSAGE_SCHEMA.names}, schema=MESSAGE_SCHEMA)
    return table, table if len(written) == len(MESSAGE_SCHEMA) else table.select(written)


_NUMPY_TYPES: dict[pa.DataType, np.dtype[np.signedinteger]] = {
    pa.int32(): np.dtype(np.int32),
    pa.int64(): np.dtype(np.int64),
}


def _numpy(table: pa.Table, column: str, dtype: type[np.generic], null: int = 0) -> np.ndarray:
    """An integer column as a numpy array of ``dtype``, nulls as ``null``.

    Read from the Arrow buffers: ``to_numpy`` and ``fill_null`` go through
    pyarrow's pandas bridge, which imports pandas (when installed) on first
    use, a third of a second a command line pays for nothing.
    """
    parts = [np.empty(0, dtype)]
    for chunk in table[column].chunks:
        if not len(chunk):
            continue
        kind = _NUMPY_TYPES[chunk.type]
        validity, data = chunk.buffers()
        values = np.frombuffer(data, kind, len(chunk), chunk.offset * kind.itemsize)
        if chunk.null_count:
            bits = np.frombuffer(validity, np.uint8)
            valid = np.unpackbits(bits, count=chunk.offset + len(chunk), bitorder="little")
            values = np.where(valid[chunk.offset :].astype(np.bool_), values, null)
        parts.append(values.astype(dtype, copy=False))
    return np.concatenate(parts)


_ENTRY_FIELDS = (
    "ledger_id",
    "entry_id",
    "batch_size",
    "deliver_at",
    "publish_time",
    "chunk_rest",
)

ENTRY_INDEX_CACHE_BYTES = 128 << 20
"""Most bytes of per-segment entry indexes a store keeps (least recently used dropped):
37 bytes an entry, so about 3,600,000 entries."""


def _entry_columns(table: pa.Table) -> EntryColumns:
    """The per-entry columns of rows sorted by ``SORT_KEYS`` (no entry spans two tables)."""
    batch_index = _numpy(table, "batch_index", np.int32)
    first = batch_index <= 0
    deliver_all = _numpy(table, "deliver_at", np.int64, null=-1)
    deliver = deliver_all[first]
    later = ~first & (deliver_all >= 0)
    if later.any():
        ordinal = np.cumsum(first) - 1
        np.maximum.at(deliver, ordinal[later], deliver_all[later])
    return EntryColumns(
        ledger_id=_numpy(table, "ledger_id", np.int64)[first],
        entry_id=_numpy(table, "entry_id", np.int64)[first],
        batch_size=_numpy(table, "batch_size", np.int32)[first],
        deliver_at=deliver,
        publish_time=_numpy(table, "publish_time", np.int64)[first],
        chunk_rest=chunk_rest(
            _numpy(table, "chunk_id", np.int32, null=-1)[first],
            _numpy(table, "num_chunks_from_msg", np.int32)[first],
        ),
    )


class _SegmentIndexCache:
    """Per-segment entry indexes by file identity (path, size, modification time:
    :data:`~cursorops.core.store.ledger_root.FileIdentity`), least recently used
    dropped past ``limit`` bytes; safe to share between threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[FileIdentity, EntryColumns] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _size(entries: EntryColumns) -> int:
        return sum(int(getattr(entries, column).nbytes) for column in _ENTRY_FIELDS)

    def get(self, key: FileIdentity) -> EntryColumns | None:
        with self._lock:
            entries = self._items.get(key)
            if entries is not None:
                self._items.move_to_end(key)
            return entries

    def put(self, key: FileIdentity, entries: EntryColumns) -> None:
        size = self._size(entries)
        if size > self.limit:
            return
        for column in _ENTRY_FIELDS:
            # Shared by every caller from now on: nobody may write into it.
            getattr(entries, column).flags.writeable = False
        with self._lock:
            if key in self._items:
                return
            self._items[key] = entries
            self._bytes += size
            while self._bytes > self.limit:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= self._size(dropped)


RECENT_SEGMENT_BYTES = 64 << 20
"""What :class:`RecentSegments` keeps of the segments a store wrote last."""


class RecentSegments:
    """The segments this process appended and committed last, as the tables it wrote.

    A consumer keeping up with its producers reads each entry just after it was
    committed: from here, by the file's identity (its path, size and modification
    time, the key every read cache uses), it gets the rows without reading the
    Parquet file back. Only committed segments are put here (a committed segment
    never changes), least recently written dropped past ``limit`` bytes; safe to
    share between threads. In memory only: a restart reads the files.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[str, tuple[FileIdentity, pa.Table]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, identity: FileIdentity, table: pa.Table) -> None:
        path = identity[0]
        size = table.nbytes
        if size > self.limit:
            return
        with self._lock:
            old = self._items.pop(path, None)
            if old is not None:
                self._bytes -= old[1].nbytes
            self._items[path] = (identity, table)
            self._bytes += size
            while self._bytes > self.limit:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def get(self, identity: FileIdentity) -> pa.Table | None:
        """The segment's rows as written (every column of MESSAGE_SCHEMA); None when
        not kept, or when the file is not the one written."""
        with self._lock:
            found = self._items.get(identity[0])
        if found is None or found[0] != identity:
            return None
        return found[1]


def _is_sorted(table: pa.Table) -> bool:
    """True when rows are already in ``SORT_KEYS`` order (the usual case: segments in order)."""
    if table.num_rows < 2:
        return True
    ledger, entry, index = (np.diff(_numpy(table, key, np.int64)) for key in SORT_KEYS)
    ascending = (ledger > 0) | ((ledger == 0) & ((entry > 0) | ((entry == 0) & (index > 0))))
    return bool(ascending.all())


def _holds_any(segment: SegmentInfo, sorted_entry_ids: list[int]) -> bool:
    i = bisect.bisect_left(sorted_entry_ids, segment.first_entry)
    return i < len(sorted_entry_ids) and sorted_entry_ids[i] <= segment.last_entry


def _first_unreadable(
    filesystem: pafs.FileSystem, paths: Sequence[str], columns: Sequence[str]
) -> str | None:
    """The first segment that cannot be read on its own (only called after a failed scan)."""
    for path in paths:
        try:
            _read_segments(filesystem, [path], list(columns))
        except (OSError, pa.ArrowException):
            return path
    return None


_FOLDER_SYNCS: list[ThreadPoolExecutor] = []
_FOLDER_SYNCS_LOCK = threading.Lock()


def _folder_syncs() -> ThreadPoolExecutor:
    """The threads that fsync segment folders while the writers fsync the files."""
    if not _FOLDER_SYNCS:
        with _FOLDER_SYNCS_LOCK:
            if not _FOLDER_SYNCS:
                _FOLDER_SYNCS.append(
                    ThreadPoolExecutor(_WRITERS, thread_name_prefix="cursorops-folder-sync")
                )
    return _FOLDER_SYNCS[0]


@contextlib.contextmanager
def _removed_unless_committed(paths: list[str]) -> Iterator[None]:
    """Remove the files named in ``paths`` (filled inside the block) when the block, the
    transaction that would list them, raises: such a file is never read."""
    try:
        yield
    except BaseException:
        for path in paths:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _fsync_folder(folder: str) -> None:
    """Make a new file's name durable (POSIX); a no-op where folders cannot be opened."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

"""Lazy reading of one partition's messages after a position, segment by segment.

The read path needs only the messages just after a cursor's mark-delete
position: it opens one committed segment at a time, skips segments that end
at or before the position, and reads record batches until the caller stops
iterating. ``consume -n 1`` on a long backlog reads one batch, not the backlog.
Inside a segment, row groups whose entry ids all lie at or before the
position are skipped by their statistics, so reading on from the middle of a
long segment costs one row group, not the segment's head.

Files are opened through the ledger root's ``pyarrow.fs`` file system
(:mod:`cursorops.core.store.ledger_root`).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cursorops.core.domain.errors import LedgerStoreError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.message_schema import MESSAGE_SCHEMA
from cursorops.core.store.ledger import SEGMENT_ROW_GROUP, with_later_columns
from cursorops.core.store.ledger_root import FileIdentity, LedgerRoot, open_ledger_root
from cursorops.core.store.metadata import SegmentInfo

BATCH_ROWS = 1024
"""Rows per record batch read from a segment."""


def batches_after(
    root: str | LedgerRoot,
    segments: Sequence[SegmentInfo],
    after: Position,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Record batches of the rows strictly after ``after``, in position order.

    ``segments`` are the partition's committed segments in ``(ledger, first
    entry)`` order, with paths relative to ``root`` (``Config.ledger_root`` or what it
    resolves to).
    """
    location = open_ledger_root(root)
    for segment in segments:
        if (segment.ledger_id, segment.last_entry) <= (after.ledger_id, after.entry_id):
            continue
        path = location.join(segment.path)
        starts_after = (segment.ledger_id, segment.first_entry) > (after.ledger_id, after.entry_id)
        try:
            reader = pq.ParquetFile(path, filesystem=location.filesystem)
            groups = list(range(reader.num_row_groups))
            if not starts_after and segment.ledger_id == after.ledger_id:
                groups = [g for g in groups if not _group_at_or_before(reader, g, after.entry_id)]
            present = set(reader.schema_arrow.names)
            batches = reader.iter_batches(
                batch_size=batch_rows,
                row_groups=groups,
                columns=[name for name in MESSAGE_SCHEMA.names if name in present],
            )
            for read in batches:
                batch = _complete(read)
                if not starts_after:
                    ledger = batch.column("ledger_id").to_numpy(zero_copy_only=False)
                    entry = batch.column("entry_id").to_numpy(zero_copy_only=False)
                    keep = (ledger > after.ledger_id) | (
                        (ledger == after.ledger_id) & (entry > after.entry_id)
                    )
                    if not keep.any():
                        continue
                    if not keep.all():
                        batch = batch.filter(pa.array(np.asarray(keep)))
                yield batch
        except (OSError, pa.ArrowException) as exc:
            raise LedgerStoreError(f"Cannot read ledger segment {path}: {exc}") from exc


def _complete(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of a segment without some of the later columns, with them as nulls."""
    if batch.num_columns == len(MESSAGE_SCHEMA):
        return batch
    table = with_later_columns(pa.Table.from_batches([batch]), MESSAGE_SCHEMA.names)
    return pa.RecordBatch.from_arrays(
        [column.combine_chunks() for column in table.columns], schema=table.schema
    )


def _group_at_or_before(reader: pq.ParquetFile, group: int, entry_id: int) -> bool:
    """Whether every row of the row group has an entry id at or before ``entry_id``."""
    column = reader.schema_arrow.get_field_index("entry_id")
    statistics = reader.metadata.row_group(group).column(column).statistics
    if statistics is None or not statistics.has_min_max:
        return False
    return int(statistics.max) <= entry_id


class SegmentCache:
    """Decoded row groups of committed segments, kept between the dispatches of a dispatcher.

    A committed segment never changes (the ledger store writes it once, before
    the commit that lists it), so a row group decoded for one dispatch serves the
    next ones: a consumer draining a backlog decodes each row group once, not once
    per dispatch. An entry is keyed by the file's path, size and modification time
    (:data:`~cursorops.core.store.ledger_root.FileIdentity`, from the root's file
    system), so a file replaced under the same name is read afresh; no inode, since a
    segment's name is unique to its write attempt. In memory only, least recently used
    first out past ``max_rows`` rows.

    ``root``: ``Config.ledger_root`` or what it resolves to.
    ``fresh``: the rows of a segment this process wrote lately, by file identity
    (:meth:`cursorops.core.store.ledger.RecentSegments.get`); such a segment is
    not read back from its file, its rows are cut in groups of
    :data:`~cursorops.core.store.ledger.SEGMENT_ROW_GROUP` as the file's row groups are.
    """

    def __init__(
        self,
        root: str | LedgerRoot,
        max_rows: int = 1_000_000,
        fresh: Callable[[FileIdentity], pa.Table | None] | None = None,
    ) -> None:
        self.location = open_ledger_root(root)
        self._filesystem = self.location.filesystem
        self.max_rows = max_rows
        self._fresh = fresh
        self._files: dict[str, _File] = {}
        self._groups: OrderedDict[tuple[FileIdentity, int], _Group] = OrderedDict()
        self._rows = 0

    def batches_after(
        self, segments: Sequence[SegmentInfo], after: Position, batch_rows: int = BATCH_ROWS
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of the rows strictly after ``after``, as :func:`batches_after` yields."""
        # Segments are in position order: the first one ending after ``after`` is found by
        # bisection, not by a walk over every segment already read.
        start = bisect.bisect_right(
            segments,
            (after.ledger_id, after.entry_id),
            key=lambda segment: (segment.ledger_id, segment.last_entry),
        )
        for segment in segments[start:]:
            path = self.location.join(segment.path)
            try:
                known = self._metadata(path)
                for group, entry_max in enumerate(known.group_max):
                    if (
                        segment.ledger_id == after.ledger_id
                        and entry_max is not None
                        and entry_max <= after.entry_id
                    ):
                        continue
                    decoded = self._group(path, known, group)
                    first = decoded.first_after(after)
                    for offset in range(first, decoded.batch.num_rows, batch_rows):
                        yield decoded.batch.slice(offset, batch_rows)
            except (OSError, pa.ArrowException) as exc:
                raise LedgerStoreError(f"Cannot read ledger segment {path}: {exc}") from exc

    def _metadata(self, path: str) -> _File:
        """The file's identity, footer and each row group's largest entry id."""
        identity = self.location.identity(path)
        known = self._files.get(path)
        if known is not None and known.identity == identity:
            return known
        table = None if self._fresh is None else self._fresh(identity)
        if table is not None:
            groups = [
                table.slice(offset, SEGMENT_ROW_GROUP)
                for offset in range(0, table.num_rows, SEGMENT_ROW_GROUP)
            ]
            # Rows are in position order: a group's largest entry id is its last row's.
            group_ends = [int(group.column("entry_id")[-1].as_py()) for group in groups]
            # Not kept in ``_files``: the ledger store's copy is what bounds the memory.
            return _File(identity, None, list(group_ends), groups)
        metadata = pq.read_metadata(path, filesystem=self._filesystem)
        column = metadata.schema.to_arrow_schema().get_field_index("entry_id")
        group_max: list[int | None] = []
        for group in range(metadata.num_row_groups):
            statistics = metadata.row_group(group).column(column).statistics
            has = statistics is not None and statistics.has_min_max
            group_max.append(int(statistics.max) if has else None)
        known = _File(identity, metadata, group_max)
        self._files[path] = known
        return known

    def _group(self, path: str, known: _File, group: int) -> _Group:
        key = (known.identity, group)
        found = self._groups.get(key)
        if found is not None:
            self._groups.move_to_end(key)
            return found
        if known.fresh is not None:
            table = known.fresh[group]
        else:
            # The footer read for the statistics serves the reader: it is not parsed again.
            reader = pq.ParquetFile(path, metadata=known.metadata, filesystem=self._filesystem)
            present = set(reader.schema_arrow.names)
            table = with_later_columns(
                reader.read_row_group(
                    group, columns=[name for name in MESSAGE_SCHEMA.names if name in present]
                ),
                MESSAGE_SCHEMA.names,
            )
        batches = table.to_batches()
        if len(batches) == 1:
            batch = batches[0]
        else:
            batch = pa.RecordBatch.from_struct_array(table.to_struct_array().combine_chunks())
        decoded = _Group(batch)
        self._groups[key] = decoded
        self._rows += decoded.batch.num_rows
        while self._rows > self.max_rows and len(self._groups) > 1:
            _, dropped = self._groups.popitem(last=False)
            self._rows -= dropped.batch.num_rows
        return decoded


class _File:
    """What a segment's footer says, for the file as it was when read."""

    __slots__ = ("fresh", "group_max", "identity", "metadata")

    def __init__(
        self,
        identity: FileIdentity,
        metadata: pq.FileMetaData | None,
        group_max: list[int | None],
        fresh: list[pa.Table] | None = None,
    ) -> None:
        self.identity = identity
        """Path, size and modification time: a file replaced under its name is read afresh."""
        self.metadata = metadata
        """The footer; None for a segment served from memory (``fresh``)."""
        self.group_max = group_max
        """Each row group's largest entry id (None: no statistics)."""
        self.fresh = fresh
        """The row groups as the ledger store wrote them, when it still had them."""


class _Group:
    """One decoded row group, rows in position order."""

    __slots__ = ("batch", "_entry", "_ledger")

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch
        self._ledger = batch.column("ledger_id").to_numpy(zero_copy_only=False)
        self._entry = batch.column("entry_id").to_numpy(zero_copy_only=False)

    def first_after(self, after: Position) -> int:
        """The first row strictly after ``after`` (the row count when there is none)."""
        keep = (self._ledger > after.ledger_id) | (
            (self._ledger == after.ledger_id) & (self._entry > after.entry_id)
        )
        rows = np.flatnonzero(keep)
        return int(rows[0]) if rows.size else self.batch.num_rows

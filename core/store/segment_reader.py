"""Lazy reading of one partition's messages after a position, segment by segment.

The read path needs only the messages just after a cursor's mark-delete
position: it opens one committed segment at a time, skips segments that end
at or before the position, and reads record batches until the caller stops
iterating. ``consume -n 1`` on a long backlog reads one batch, not the backlog.
Inside a segment, row groups whose entry ids all lie at or before the
position are skipped by their statistics, so reading on from the middle of a
long segment costs one row group, not the segment's head.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import LedgerStoreError
from core.position import Position
from core.store.ledger import MESSAGE_SCHEMA
from core.store.metadata import SegmentInfo

BATCH_ROWS = 1024
"""Rows per record batch read from a segment."""


def batches_after(
    root: str, segments: Sequence[SegmentInfo], after: Position, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Record batches of the rows strictly after ``after``, in position order.

    ``segments`` are the partition's committed segments in ``(ledger, first
    entry)`` order, with paths relative to ``root``.
    """
    for segment in segments:
        if (segment.ledger_id, segment.last_entry) <= (after.ledger_id, after.entry_id):
            continue
        path = os.path.join(root, segment.path)
        starts_after = (segment.ledger_id, segment.first_entry) > (after.ledger_id, after.entry_id)
        try:
            reader = pq.ParquetFile(path)
            groups = list(range(reader.num_row_groups))
            if not starts_after and segment.ledger_id == after.ledger_id:
                groups = [g for g in groups if not _group_at_or_before(reader, g, after.entry_id)]
            batches = reader.iter_batches(
                batch_size=batch_rows, row_groups=groups, columns=MESSAGE_SCHEMA.names
            )
            for batch in batches:
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


def _group_at_or_before(reader: pq.ParquetFile, group: int, entry_id: int) -> bool:
    """Whether every row of the row group has an entry id at or before ``entry_id``."""
    column = reader.schema_arrow.get_field_index("entry_id")
    statistics = reader.metadata.row_group(group).column(column).statistics
    if statistics is None or not statistics.has_min_max:
        return False
    return int(statistics.max) <= entry_id

"""Which message rows a cursor has acknowledged, down to the batch index: the one home of the rule.

A row is acknowledged when its entry is at or before mark-delete, or
individually deleted, or when its batch index is acknowledged in the entry's
batch ack set (an index beyond the set's word reads as acknowledged; a
non-batched row, index -1, only by its entry). It is
:meth:`CursorState.is_acked`'s rule, over arrays: the dispatcher asks it of
each record batch it reads (:func:`acked_rows`, rows in position order), the
Spark jobs and backlog checks of any subset of a partition
(:func:`unacked_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.cursor import BatchAckSets, CursorState
from cursorops.core.domain.ids.position_match import match_positions

if TYPE_CHECKING:
    from cursorops.core.domain.analysis.columns import Rows

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

_WORD_BITS = 64


def acked_rows(state: CursorState, ledger: Ints, entry: Ints, index: Ints, starts: Ints) -> Flags:
    """True for each row the cursor has acknowledged: its entry, or its batch index.

    The rows are in position order and ``starts`` holds the rows where an entry
    begins (row 0 included). Cost: numpy work per row, one vectorised lookup of
    the entries in the individually deleted set, and per entry one lookup in
    the batch ack sets (matched as arrays when the sets are fewer than the
    entries), never a sweep of those sets.
    """
    md_ledger, md_entry = state.mark_delete
    acked: Flags = (ledger < md_ledger) | ((ledger == md_ledger) & (entry <= md_entry))
    deleted, batch_acks = state.individually_deleted, state.batch_acks
    if acked.all() or (not deleted and not batch_acks):
        return acked
    lengths = np.diff(np.append(starts, len(ledger)))
    if deleted:
        acked |= np.repeat(deleted.contains_many(ledger[starts], entry[starts]), lengths)
    if not batch_acks:
        return acked
    bits = _batch_sets(batch_acks, ledger[starts], entry[starts])
    words = np.zeros(len(bits), dtype=np.uint64)
    partial = np.zeros(len(bits), dtype=np.bool_)
    wide: list[int] = []
    for k, value in enumerate(bits):
        if value is None:
            continue
        if value >> _WORD_BITS:
            wide.append(k)
        else:
            words[k] = value
            partial[k] = True
    in_partial = np.repeat(partial, lengths) & (index >= 0)
    if in_partial.any():
        shift = np.clip(index, 0, _WORD_BITS - 1).astype(np.uint64)
        bit = (np.repeat(words, lengths) >> shift) & np.uint64(1)
        # An index beyond the word reads as acknowledged, as in ack_set.is_acked.
        acked |= in_partial & ((bit == 0) | (index >= _WORD_BITS))
    for k in wide:
        value = bits[k]
        assert value is not None
        for row in range(int(starts[k]), int(starts[k] + lengths[k])):
            if index[row] >= 0 and ack_set.is_acked(value, int(index[row])):
                acked[row] = True
    return acked


def _batch_sets(batch_acks: BatchAckSets, ledger: Ints, entry: Ints) -> list[int | None]:
    """The batch ack set of each entry (None: not partly acknowledged)."""
    if len(batch_acks) < len(ledger):
        # Fewer sets than entries (a whole segment asked about): match them as arrays.
        keys = list(batch_acks)
        values = list(batch_acks.values())
        found = match_positions(
            ledger,
            entry,
            np.fromiter((k.ledger_id for k in keys), np.int64, len(keys)),
            np.fromiter((k.entry_id for k in keys), np.int64, len(keys)),
        )
        return [None if i < 0 else values[i] for i in found.tolist()]
    # Positions are tuples: the plain (ledger, entry) pairs look them up.
    lookup = cast("Callable[[tuple[int, int]], int | None]", batch_acks.get)
    return list(map(lookup, zip(ledger.tolist(), entry.tolist(), strict=True)))


def unacked_rows(state: CursorState, rows: Rows) -> Flags:
    """True for each message row the cursor has not acknowledged.

    Rows may be any subset of one partition, in any order: they are put in
    position order for :func:`acked_rows` and the answer put back. Cost:
    O(n log n).
    """
    # Arrow's compute functions load only where rows come as Arrow columns: a command that
    # only asks acked_rows (a skip's head) does not pay their import.
    from cursorops.core.domain.analysis.columns import int_column

    ledger = int_column(rows.column("ledger_id"))
    entry = int_column(rows.column("entry_id"))
    index = int_column(rows.column("batch_index"))
    count = len(ledger)
    if count == 0:
        return np.zeros(0, np.bool_)
    order = np.lexsort((index, entry, ledger))
    ledger, entry, index = ledger[order], entry[order], index[order]
    change = np.ones(count, np.bool_)
    change[1:] = (ledger[1:] != ledger[:-1]) | (entry[1:] != entry[:-1])
    live = np.empty(count, np.bool_)
    live[order] = ~acked_rows(state, ledger, entry, index, np.flatnonzero(change))
    return live

"""The messages at the head of a subscription's backlog: what ``skip -n`` and
``clear-backlog`` acknowledge.

Pulsar's ``topics skip -n N`` counts entries, so with batching it skips fewer
messages than asked (a batch of 100 is one entry). Here N counts messages: the
first N unacknowledged messages of a partition, in position order, batch
indexes included, and nothing else. A batch whose messages are all taken and
none of them acknowledged yet is named by its entry (``ledger:entry``);
otherwise each index is named (``ledger:entry:index``), so an id list never
counts a message that was acknowledged already. ``clear-backlog`` is the same
selection without a limit: every message unacknowledged now.

A chunked message is one message (:mod:`cursorops.core.domain.ids.chunked_messages`), in its
place at its last chunk, where a consumer receives it: it counts once, and N
takes all its unacknowledged chunks or none of them. A message whose last
chunk is not stored is not a message yet: neither counted nor taken.

Pure: arrays in, arrays out. The Broker reads the entries and the cursor and
turns the selection into a skip plan, which is previewed, approved and applied
as any other skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.skip import SkipLookup
from cursorops.core.domain.delivery.unacked_rows import acked_rows
from cursorops.core.domain.ids.chunked_messages import ChunkedMessages
from cursorops.core.domain.ids.position_match import match_positions

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class HeadSelection:
    """Ids of the head messages of one partition: parallel arrays, position order."""

    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    """-1 names a whole entry: a non-batched one, or a batch taken whole."""
    messages: int
    """How many messages the ids name (a whole batch counts its size)."""

    def __len__(self) -> int:
        return int(self.ledger_id.size)


def head_messages(
    state: CursorState,
    lookup: SkipLookup,
    limit: int | None,
    chunks: ChunkedMessages | None = None,
) -> HeadSelection:
    """The first ``limit`` messages ``state`` has not acknowledged (all of them: None).

    ``chunks``: the partition's chunked messages, when it has any. Entries at or
    before the mark-delete position are never looked at; the rest are expanded
    to one row per message only as arrays. Cost: O(m log m) numpy work for the
    m messages after the mark-delete position.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    ledgers, entries = lookup.ledger_ids, lookup.entry_ids
    order = np.lexsort((entries, ledgers))
    ledgers, entries = ledgers[order], entries[order]
    sizes = np.asarray(lookup.batch_sizes, dtype=np.int64)[order]
    md_ledger, md_entry = state.mark_delete
    after = (ledgers > md_ledger) | ((ledgers == md_ledger) & (entries > md_entry))
    ledgers, entries, sizes = ledgers[after], entries[after], sizes[after]
    counts = np.maximum(sizes, 1)
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    rows = int(counts.sum())
    row_ledger = np.repeat(ledgers, counts)
    row_entry = np.repeat(entries, counts)
    row_index = np.arange(rows, dtype=np.int64) - np.repeat(starts, counts)
    row_index[np.repeat(sizes <= 0, counts)] = -1
    live = ~acked_rows(state, row_ledger, row_entry, row_index, starts)
    if chunks is None or not len(chunks):
        taken = np.flatnonzero(live)
        if limit is not None:
            taken = taken[:limit]
        counted = int(taken.size)
    else:
        taken, counted = _whole_messages(live, ledgers, entries, starts, chunks, limit)
    # Per entry: how many of its rows are taken, and whether all of them are live.
    entry_of_row = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    taken_per_entry = np.bincount(entry_of_row[taken], minlength=counts.size)
    whole = (taken_per_entry == counts) & (sizes > 0)
    keep = ~whole[entry_of_row[taken]] | (row_index[taken] == 0)
    chosen = taken[keep]
    index = row_index[chosen].copy()
    index[whole[entry_of_row[chosen]]] = -1
    return HeadSelection(
        ledger_id=row_ledger[chosen],
        entry_id=row_entry[chosen],
        batch_index=index,
        messages=counted,
    )


def _whole_messages(
    live: npt.NDArray[np.bool_],
    ledgers: Ints,
    entries: Ints,
    starts: Ints,
    chunks: ChunkedMessages,
    limit: int | None,
) -> tuple[Ints, int]:
    """The rows of the first ``limit`` messages (sorted) and how many messages they are, a
    chunked message whole: each row's *anchor* is its own row, or for a chunk the row
    of its message's last chunk; the messages are taken in anchor order, and a message
    counts at its anchor. A chunk of an incomplete message is never taken; the chunks of
    a message whose last chunk is acknowledged (or at or before mark-delete) count 0."""
    if limit == 0:
        return np.zeros(0, np.int64), 0
    anchor = np.arange(live.size, dtype=np.int64)
    counting = np.ones(live.size, dtype=np.bool_)
    # Chunk entries are not batched: one row each, at the entry's start.
    chunk = chunks.index_of(ledgers, entries)
    at = np.flatnonzero(chunk >= 0)
    if at.size:
        last = chunks.last[chunks.message[chunk[at]]]
        complete = last >= 0
        ends = np.full(at.size, -1, np.int64)
        ends[complete] = match_positions(
            chunks.ledger_id[last[complete]], chunks.entry_id[last[complete]], ledgers, entries
        )
        own = starts[at]
        anchor[own] = np.where(ends >= 0, starts[np.maximum(ends, 0)], own)
        counting[own] = ends == at
        live = live.copy()
        live[own[~complete]] = False
    candidates = np.flatnonzero(live)
    order = candidates[np.lexsort((candidates, anchor[candidates]))]
    if limit is not None:
        total = np.cumsum(counting[order])
        if total.size and total[-1] >= limit:
            # The anchor of the limit-th message: everything anchored up to it is taken,
            # and nothing after it (not the uncounted chunks of a message whose last
            # chunk is acknowledged, anchored past it).
            cut = anchor[order[int(np.searchsorted(total, limit))]]
            order = order[anchor[order] <= cut]
    taken = np.sort(order)
    return taken, int(counting[taken].sum())


__all__ = ["HeadSelection", "head_messages"]

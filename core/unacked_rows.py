"""Which message rows a cursor has not acknowledged, down to the batch index."""

from __future__ import annotations

import numpy as np

from core import backlog
from core.columns import Rows, int_column
from core.cursor import CursorState
from core.position import Position, match_positions


def unacked_rows(state: CursorState, rows: Rows) -> np.ndarray:
    """True for each message row the cursor has not acknowledged.

    Entry-level acknowledgement is :func:`core.backlog.unacked_messages`; inside a
    partly acknowledged batch each index is asked of :meth:`CursorState.is_acked`.
    Rows may be any subset of one partition, in any order. Cost: O(n log n) plus
    O(rows in partly acknowledged batches).
    """
    ledger_ids = int_column(rows.column("ledger_id"))
    entry_ids = int_column(rows.column("entry_id"))
    batch_sizes = int_column(rows.column("batch_size"))
    live = backlog.unacked_messages(state, ledger_ids, entry_ids, batch_sizes) > 0
    if state.batch_acks and live.any():
        batch_index = int_column(rows.column("batch_index"))
        count = len(state.batch_acks)
        partial = match_positions(
            ledger_ids,
            entry_ids,
            np.fromiter((p.ledger_id for p in state.batch_acks), dtype=np.int64, count=count),
            np.fromiter((p.entry_id for p in state.batch_acks), dtype=np.int64, count=count),
        )
        for row in np.flatnonzero(live & (batch_index >= 0) & (partial >= 0)).tolist():
            position = Position(int(ledger_ids[row]), int(entry_ids[row]))
            live[row] = not state.is_acked(position, int(batch_index[row]))
    return live

"""Removing acknowledgements: the cursor change an undo of a skip writes.

Pulsar has no such operation on one message: its cursor only moves back as a
whole (``resetCursor``), which forgets every later acknowledgement. Here the
acknowledgement of chosen messages is taken back and nothing else changes:

- a message acknowledged individually (an entry in ``individually_deleted``, or
  an index cleared in its batch's ack set) becomes unacknowledged again;
- a message at or before the mark-delete position (a later cumulative
  acknowledgement, or auto-advance, passed it) moves the mark-delete position
  back to the last entry before the earliest such message; every entry between
  the new and the old mark-delete stays acknowledged, as individually deleted
  entries, and a batch entry loses only the indexes taken back (its ack set
  then has exactly those bits set).

No batch size is needed: an ack set's set bits are its unacknowledged indexes,
and an index not set reads as acknowledged, so taking back index ``i`` of a
wholly acknowledged batch is the ack set ``1 << i`` whatever the batch holds.

Pure and in memory: the result is a whole new state, which a durable caller
writes as one replacing delta (:func:`cursorops.core.domain.acks.cursor_codec.encode` with
``replace=True``), under the cursor's row lock.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks.cursor import BatchAckSets, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.position_match import match_positions

__all__ = ["acknowledged", "unacknowledge"]


def unacknowledge(
    state: CursorState,
    layout: LedgerLayout,
    ledger_ids: npt.ArrayLike,
    entry_ids: npt.ArrayLike,
    batch_indexes: npt.ArrayLike,
) -> CursorState:
    """``state`` with exactly the messages ``(ledger_ids[i], entry_ids[i], batch_indexes[i])``
    unacknowledged; ``state`` itself is left as it is.

    Batch index -1 is the whole entry (every index of a batch); an index >= 0 is
    that message of a batch. Messages not acknowledged now are left alone. A
    message at or before mark-delete must be an entry of ``layout`` (its ledger
    retained), else InvalidArgumentError: there is nothing to move back to.
    The result is normalised against ``layout``. Cost: O(n log n) for n
    messages in numpy, plus one Python step per batch entry touched and per
    ledger between the new and the old mark-delete.
    """
    ledgers = np.asarray(ledger_ids, dtype=np.int64)
    entries = np.asarray(entry_ids, dtype=np.int64)
    indexes = np.asarray(batch_indexes, dtype=np.int64)
    result = state.copy()
    acked = np.flatnonzero(acknowledged(state, ledgers, entries, indexes))
    if acked.size == 0:
        return result
    ledgers, entries, indexes = ledgers[acked], entries[acked], indexes[acked]
    first = int(np.lexsort((entries, ledgers))[0])
    earliest = Position(int(ledgers[first]), int(entries[first]))
    if earliest <= state.mark_delete:
        _move_mark_delete_back(result, layout, earliest)
    whole = indexes < 0
    deleted = result.individually_deleted
    batch_acks = dict(result.batch_acks)
    # One index at a time per batch entry: a wholly acknowledged entry becomes an ack set
    # of the indexes taken back, a partly acknowledged one gets them set again.
    taken_back: dict[Position, int] = {}
    for ledger_id, entry_id, index in zip(
        ledgers[~whole].tolist(), entries[~whole].tolist(), indexes[~whole].tolist(), strict=True
    ):
        position = Position(ledger_id, entry_id)
        taken_back[position] = taken_back.get(position, 0) | (1 << index)
    for position, bits in taken_back.items():
        if deleted.contains(*position):
            batch_acks[position] = bits
        else:
            batch_acks[position] = batch_acks.get(position, 0) | bits
    deleted.remove_positions(
        np.fromiter((p.ledger_id for p in taken_back), np.int64, len(taken_back)),
        np.fromiter((p.entry_id for p in taken_back), np.int64, len(taken_back)),
    )
    deleted.remove_positions(ledgers[whole], entries[whole])
    for ledger_id, entry_id in zip(ledgers[whole].tolist(), entries[whole].tolist(), strict=True):
        batch_acks.pop(Position(ledger_id, entry_id), None)
    result.batch_acks = BatchAckSets(batch_acks)
    result.normalize(layout)
    return result


def acknowledged(
    state: CursorState,
    ledger_ids: npt.ArrayLike,
    entry_ids: npt.ArrayLike,
    batch_indexes: npt.ArrayLike,
) -> npt.NDArray[np.bool_]:
    """Which messages :func:`unacknowledge` would change: a batch index acknowledged, or a
    whole entry (batch index -1) with anything acknowledged, a partly acknowledged batch
    included. :meth:`CursorState.acked_many` otherwise; O(n log n)."""
    ledgers = np.asarray(ledger_ids, dtype=np.int64)
    entries = np.asarray(entry_ids, dtype=np.int64)
    indexes = np.asarray(batch_indexes, dtype=np.int64)
    acked = state.acked_many(ledgers, entries, indexes)
    partly = np.flatnonzero(~acked & (indexes < 0))
    if partly.size and state.batch_acks:
        held = list(state.batch_acks)
        rows = match_positions(
            ledgers[partly],
            entries[partly],
            np.fromiter((p.ledger_id for p in held), np.int64, len(held)),
            np.fromiter((p.entry_id for p in held), np.int64, len(held)),
        )
        acked[partly[rows >= 0]] = True
    return acked


def _move_mark_delete_back(state: CursorState, layout: LedgerLayout, earliest: Position) -> None:
    """Mark-delete to the entry before ``earliest``; what it covered after that stays
    acknowledged as individually deleted entries."""
    if not layout.contains(earliest):
        raise InvalidArgumentError(
            f"Cannot unacknowledge {earliest}: it is at or before the mark-delete position "
            f"{state.mark_delete} and its ledger is no longer retained"
        )
    old = state.mark_delete
    new = layout.previous_position(earliest)
    for ledger_id, count in layout:
        if count == 0 or ledger_id < new.ledger_id or ledger_id > old.ledger_id:
            continue
        first = new.entry_id + 1 if ledger_id == new.ledger_id else 0
        last = min(old.entry_id if ledger_id == old.ledger_id else count - 1, count - 1)
        if first <= last:
            state.individually_deleted.add_range(ledger_id, first, last)
    state.mark_delete = new

"""Where a cursor may be moved to: the positions a reset, a seek or a new subscription's
initial position may name.

A cursor's position is an entry of the topic, its start (``EARLIEST``) or just past its
last entry (where a subscription at ``latest`` starts); a consumer's seek lands on the
first entry at or after the one it names. Pure: a position and the partition's ledger
layout in, a position or a refusal out.
"""

from __future__ import annotations

from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.errors import PositionOutOfRangeError
from cursorops.core.domain.ids.position import EARLIEST, Position


def check_reset_target(position: Position, layout: LedgerLayout) -> None:
    """A cursor may start at an entry of the topic, at its start or just past its end."""
    last = layout.last_position
    end = Position(last.ledger_id, last.entry_id + 1)
    if position not in (EARLIEST, end) and not layout.contains(position):
        raise PositionOutOfRangeError(
            f"Cannot start at {position}: no such entry (the last entry is {last})"
        )


def seek_target(position: Position, layout: LedgerLayout) -> Position:
    """Where a seek to ``position`` starts: the first entry at or after it, else the end
    (just past the last entry; the start when there is none)."""
    if layout.contains(position):
        return position
    found = layout.next_position(Position(position.ledger_id, position.entry_id - 1))
    if found is not None:
        return found
    last = layout.last_position
    return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST


__all__ = ["check_reset_target", "seek_target"]

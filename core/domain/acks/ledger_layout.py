"""The ledgers of one topic partition, as the cursor sees them.

The cursor needs to know where each ledger ends to auto-advance its mark-delete
position across ledger boundaries and to count its backlog. A layout is a
snapshot of the metadata store's ledger list: taking a newer one can only move
the cursor forward, never back.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cursorops.core.domain.ids.position import EARLIEST, Position


@dataclass(frozen=True)
class LedgerLayout:
    ledger_ids: tuple[int, ...]
    """Ledger ids in ascending order (ledgers with no entries included)."""
    entries: tuple[int, ...]
    """Number of committed entries of each ledger, aligned with ``ledger_ids``."""

    @classmethod
    def of(cls, ledgers: Iterable[tuple[int, int]]) -> LedgerLayout:
        """Build from ``(ledger_id, entries)`` pairs in any order."""
        pairs = sorted(ledgers)
        return cls(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))

    @classmethod
    def empty(cls) -> LedgerLayout:
        return cls((), ())

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(zip(self.ledger_ids, self.entries, strict=True))

    @property
    def total_entries(self) -> int:
        return sum(self.entries)

    def entries_of(self, ledger_id: int) -> int:
        """Committed entries of a ledger; 0 for a ledger this layout does not know."""
        i = bisect.bisect_left(self.ledger_ids, ledger_id)
        if i < len(self.ledger_ids) and self.ledger_ids[i] == ledger_id:
            return self.entries[i]
        return 0

    def contains(self, position: Position) -> bool:
        """True when the position names a committed entry."""
        return 0 <= position.entry_id < self.entries_of(position.ledger_id)

    @property
    def last_position(self) -> Position:
        """The last committed entry, or EARLIEST when there is none."""
        for ledger_id, count in zip(reversed(self.ledger_ids), reversed(self.entries), strict=True):
            if count:
                return Position(ledger_id, count - 1)
        return EARLIEST

    def next_position(self, position: Position) -> Position | None:
        """The first committed entry strictly after ``position``, or None at the end."""
        ledger_id, entry_id = position
        i = bisect.bisect_left(self.ledger_ids, ledger_id)
        if i < len(self.ledger_ids) and self.ledger_ids[i] == ledger_id:
            if entry_id + 1 < self.entries[i]:
                return Position(ledger_id, max(entry_id + 1, 0))
            i += 1
        for j in range(i, len(self.ledger_ids)):
            if self.entries[j]:
                return Position(self.ledger_ids[j], 0)
        return None

    def previous_position(self, position: Position) -> Position:
        """The last committed entry strictly before ``position`` (EARLIEST when none).

        Used by cumulative acks on a batch index and by reset: mark-delete
        becomes the entry before.
        """
        ledger_id, entry_id = position
        if entry_id > 0 and entry_id - 1 < self.entries_of(ledger_id):
            return Position(ledger_id, entry_id - 1)
        if entry_id > 0 and self.entries_of(ledger_id):
            return Position(ledger_id, self.entries_of(ledger_id) - 1)
        i = bisect.bisect_left(self.ledger_ids, ledger_id)
        for j in range(i - 1, -1, -1):
            if self.entries[j]:
                return Position(self.ledger_ids[j], self.entries[j] - 1)
        return EARLIEST

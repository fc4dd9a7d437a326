"""Positions: ``(ledger_id, entry_id)``, ordered lexicographically.

A position names one entry in the ledger store. With producer batching one
entry holds ``batch_size`` messages; a message inside it is named by a
:class:`cursorops.core.domain.ids.message_id.MessageId` with a batch index.
"""

from __future__ import annotations

from typing import NamedTuple


class Position(NamedTuple):
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


EARLIEST = Position(-1, -1)

"""The verdict an entry filter gives an entry (PIP-105's ``EntryFilter.FilterResult``)."""

from __future__ import annotations

from enum import IntEnum


class FilterVerdict(IntEnum):
    """Per entry; the values are what the verdict columns of the Spark jobs hold."""

    ACCEPT = 0
    REJECT = 1
    RESCHEDULE = 2

    @property
    def label(self) -> str:
        """``accept``, ``reject`` or ``reschedule``."""
        return self.name.lower()

"""Message deduplication, as Pulsar's ``MessageDeduplication`` on a topic that enables it.

Per partition and producer name the broker keeps the highest sequence id
*pushed* (queued for the ledger) and the highest *persisted* (receipted). A
send whose sequence id is at or below the pushed one is a duplicate: when it
is at or below the persisted one too, it is answered at once with a receipt
for ledger -1, entry -1 (Pulsar 4.x), and stored nothing; otherwise its
original is still being written, and it fails with a persistence error, so the
client sends it again later. A batch counts by its highest sequence id.

The state lives in this process, loaded per producer name when a producer
connects: the highest sequence id that name has in the partition's ledger (as
Pulsar replays the ledger on topic load). A producer's ``last_sequence_id``
answers from it.
"""

from __future__ import annotations

from enum import Enum

Key = tuple[str, str]
"""(partition, producer name)."""


class Verdict(Enum):
    NEW = "new"
    DUPLICATE = "duplicate"
    """Persisted already: receipt (-1, -1)."""
    IN_FLIGHT = "in-flight"
    """Its original is still being written: neither stored nor receipted."""


class Deduplication:
    """Sequence ids pushed and persisted per partition and producer name."""

    def __init__(self) -> None:
        self._pushed: dict[Key, int] = {}
        self._persisted: dict[Key, int] = {}

    def track(self, topic: str, producer_name: str, last_persisted: int) -> None:
        """Deduplicate this producer name's sends to ``topic`` from ``last_persisted`` on
        (what its ledger holds); a producer reconnecting keeps what is in flight."""
        key = (topic, producer_name)
        self._persisted[key] = max(self._persisted.get(key, -1), last_persisted)
        self._pushed[key] = max(self._pushed.get(key, -1), self._persisted[key])

    def forget(self, topic: str, producer_name: str) -> None:
        """Deduplication is off for it: its sends are stored as they come."""
        key = (topic, producer_name)
        self._pushed.pop(key, None)
        self._persisted.pop(key, None)

    def last_persisted(self, topic: str, producer_name: str) -> int:
        return self._persisted.get((topic, producer_name), -1)

    def check(self, topic: str, producer_name: str, sequence_id: int, highest: int) -> Verdict:
        """The send's verdict; a new one is recorded as pushed."""
        key = (topic, producer_name)
        pushed = self._pushed.get(key)
        if pushed is None:
            return Verdict.NEW
        if sequence_id <= pushed:
            if sequence_id <= self._persisted.get(key, -1):
                return Verdict.DUPLICATE
            return Verdict.IN_FLIGHT
        self._pushed[key] = max(sequence_id, highest)
        return Verdict.NEW

    def persisted(self, topic: str, producer_name: str, sequence_id: int, highest: int) -> None:
        key = (topic, producer_name)
        if key in self._persisted:
            self._persisted[key] = max(self._persisted[key], sequence_id, highest)

    def failed(self, topic: str, producer_name: str) -> None:
        """A send failed: what was pushed beyond the persisted may come again."""
        key = (topic, producer_name)
        if key in self._persisted:
            self._pushed[key] = self._persisted[key]

"""What a distributed scan of a topic needs, as plain picklable values.

:meth:`cursorops.core.services.broker.analysis.Analysis.scan_plan` builds a :class:`TopicScan` after
authorizing the caller: the committed segments of each partition (paths), its
ledgers, each subscription with its properties, and every cursor's state
serialized. A Spark driver builds its DataFrame from it and ships the states to
the executors, which decode them with :func:`decode_state`; nobody outside
``core`` opens a store or a cursor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.analysis.entry_filters import EntryFilters
from cursorops.core.domain.message_schema import MESSAGE_SCHEMA
from cursorops.core.domain.subscription import SubscriptionType

__all__ = [
    "MESSAGE_SCHEMA",
    "ScanPartition",
    "ScanSubscription",
    "TopicScan",
    "decode_state",
]


def decode_state(data: bytes) -> CursorState:
    """A cursor state as :attr:`TopicScan.states` carries it."""
    return cursor_codec.decode(data)[0]


@dataclass(frozen=True)
class ScanPartition:
    """One topic partition as the executors need it."""

    name: str
    """``persistent://t/ns/topic-partition-N``, or the topic itself when not partitioned."""
    index: int
    """The ``partition`` column's value: N, or -1 for a non-partitioned topic."""
    paths: tuple[str, ...]
    """Absolute paths of its committed segments, in ``(ledger, first entry)`` order."""
    ledgers: tuple[tuple[int, int], ...] = ()
    """``(ledger id, committed entries)`` of each of its ledgers, in order."""


@dataclass(frozen=True)
class ScanSubscription:
    name: str
    type: SubscriptionType
    properties: Mapping[str, str] = field(default_factory=dict)

    def filters(self) -> EntryFilters:
        """The subscription's entry filters (its ``entryFilter.*`` properties)."""
        return EntryFilters.from_properties(dict(self.properties))


@dataclass(frozen=True)
class TopicScan:
    """Everything a job needs to know about a topic before Spark reads it."""

    topic: str
    """The canonical topic name, ``persistent://tenant/namespace/topic``."""
    partition_count: int
    """As Pulsar counts them: 0 for a non-partitioned topic."""
    partitions: tuple[ScanPartition, ...]
    subscriptions: tuple[ScanSubscription, ...]
    states: Mapping[tuple[str, str], bytes] = field(default_factory=dict)
    """``(topic partition, subscription)`` -> serialized cursor state (:func:`decode_state`)."""

    @property
    def paths(self) -> list[str]:
        return [path for source in self.partitions for path in source.paths]

    @property
    def names(self) -> dict[int, str]:
        """``partition`` column value -> topic partition name."""
        return {source.index: source.name for source in self.partitions}

    @property
    def ledger_owner(self) -> dict[int, str]:
        """Ledger id -> the topic partition it belongs to."""
        return {ledger: source.name for source in self.partitions for ledger, _ in source.ledgers}

    def cursor_state(self, topic_partition: str, subscription: str) -> CursorState:
        return decode_state(self.states[(topic_partition, subscription)])

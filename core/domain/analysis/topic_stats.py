"""Topic stats as typed values: :meth:`cursorops.core.services.broker.analysis.Analysis.topic_stats`
returns them.

The fields are plain (str, int, dicts of them) so the CLI prints them and the
REST API serializes them as they are; :meth:`TopicStats.to_pulsar_json` is the
one rendering in Pulsar's field names. ``msgBacklog`` here is exact in messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SubscriptionStats:
    """One subscription's stats over the partitions asked for."""

    type: str
    """``Exclusive``, ``Shared``, ``Failover`` or ``Key_Shared``."""
    properties: Mapping[str, str] = field(default_factory=dict)
    msg_backlog: int = 0
    """Unacknowledged messages, exact (a partly acknowledged batch counts its unacked indexes)."""
    backlog_entries: int = 0
    mark_delete_position: Mapping[str, str] = field(default_factory=dict)
    """Topic partition -> ``ledger:entry``."""
    individually_deleted_ranges: int = 0
    partly_acked_batches: int = 0

    def to_pulsar_json(self) -> dict[str, object]:
        return {
            "type": self.type,
            "properties": dict(self.properties),
            "msgBacklog": self.msg_backlog,
            "backlogEntries": self.backlog_entries,
            "markDeletePosition": dict(self.mark_delete_position),
            "individuallyDeletedRanges": self.individually_deleted_ranges,
            "partlyAckedBatches": self.partly_acked_batches,
        }


@dataclass(frozen=True)
class TopicStats:
    """A topic's (or one partition's) stats, as ``pulsar-admin topics stats`` shows them."""

    topic: str
    partitions: int
    """The topic's partition count (0: non-partitioned)."""
    entries: int
    messages: int
    subscriptions: Mapping[str, SubscriptionStats] = field(default_factory=dict)
    partition_index: int | None = None
    """Set when the stats are one partition's."""

    def to_pulsar_json(self) -> dict[str, object]:
        out: dict[str, object] = {"topic": self.topic, "partitions": self.partitions}
        if self.partition_index is not None:
            out["partitionIndex"] = self.partition_index
        out["entries"] = self.entries
        out["messages"] = self.messages
        out["subscriptions"] = {
            name: sub.to_pulsar_json() for name, sub in self.subscriptions.items()
        }
        return out

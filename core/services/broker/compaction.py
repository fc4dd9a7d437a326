"""Topic compaction: a partition's compaction horizon, and what the compacted view drops.

Compacting records each partition's last position as its horizon (Pulsar's
compaction horizon); nothing is rewritten. A reader of the compacted topic
(``read_compacted``) gets, through the horizon, the latest message of each key
(:mod:`cursorops.core.domain.analysis.compaction`, one pass over the partition's key, null-value
and payload columns), then every message after it.
"""

from __future__ import annotations

from cursorops.core.domain.analysis.compaction import COLUMNS, CompactedAway, compacted_away
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.ids.position import EARLIEST
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.context import Collaborator

NOT_RUN = "NOT_RUN"
SUCCESS = "SUCCESS"


class Compaction(Collaborator):
    """Compaction horizons per partition, and the compacted view below them."""

    def compact(self, role: str, topic: str) -> dict[str, str]:
        """Compact every partition of ``topic`` (or the one named) through its last entry,
        as of now (tenant admins, as Pulsar's COMPACT); each partition's horizon."""
        name = TopicName.parse(topic)
        self.access.check(
            role,
            Operation.SET_NAMESPACE_POLICY,
            name.tenant,
            f"topic {name.base}",
            name.namespace_name,
        )
        info = self.metadata.get_topic(str(name.base))
        partitions = [str(name)] if name.is_partition else info.partition_names()
        horizons = {}
        for partition in partitions:
            horizon = self.context.layout(partition).last_position
            if horizon != EARLIEST:
                self.metadata.set_compaction_horizon(partition, horizon, self.clock())
            horizons[partition] = f"{horizon.ledger_id}:{horizon.entry_id}"
        return horizons

    def compaction_status(self, role: str, topic: str) -> str:
        """``SUCCESS`` once every partition was compacted, else ``NOT_RUN`` (Pulsar's
        long-running process status; a compaction here ends within the request)."""
        name = TopicName.parse(topic)
        info = self.access.authorized_topic(role, Operation.LOOKUP, name.base)
        partitions = [str(name)] if name.is_partition else info.partition_names()
        done = all(self.metadata.compaction_horizon(p) is not None for p in partitions)
        return SUCCESS if done else NOT_RUN

    def compacted_away(self, role: str, topic_partition: str) -> CompactedAway:
        """What a reader of the compacted partition does not receive (CONSUME)."""
        name = TopicName.parse(topic_partition)
        self.access.authorized_topic(role, Operation.CONSUME, name.base)
        found = self.metadata.compaction_horizon(str(name))
        horizon = EARLIEST if found is None else found[0]
        table = self.ledgers.read_table(name, list(COLUMNS))
        return compacted_away(table, horizon)

"""Reset a subscription's cursor to a message id or a publish time."""

from __future__ import annotations

import numpy as np

from core.acks.ledger_layout import LedgerLayout
from core.authz import Operation
from core.broker.context import Collaborator
from core.errors import InvalidArgumentError, PositionOutOfRangeError, TopicNotFoundError
from core.ids.position import EARLIEST, Position
from core.ids.topic_name import TopicName


class Resets(Collaborator):
    """Moves a cursor backwards or forwards, as pulsar-admin's ``reset-cursor``."""

    def reset_cursor(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> dict[str, str]:
        """Reset to a position (a non-partitioned topic, or one partition) or to a publish
        time (any topic, or one partition).

        A partition's name (``t-partition-2``) resets that partition only, as
        pulsar-admin's does. With a time, each partition's next entry becomes its
        first entry published at or after that time. Returns the new mark-delete
        per partition.
        """
        parsed = TopicName.parse(topic)
        info = self.access.authorized_topic(role, Operation.RESET_CURSOR, parsed.base)
        partitions = info.partition_names()
        if parsed.is_partition:
            if parsed.partition_index >= info.partitions:
                raise TopicNotFoundError(
                    f"Topic '{parsed}' not found: {info.name} has {info.partitions} partitions"
                )
            partitions = [str(parsed)]
        self.metadata.get_subscription(info.name, subscription)
        self.access.refuse_without_approval(info, "reset-cursor (it acknowledges or redelivers)")
        if (position is None) == (timestamp_ms is None):
            raise InvalidArgumentError("Give exactly one of a message id or a time")
        if position is not None and len(partitions) > 1:
            raise InvalidArgumentError(
                "Reset to a message id needs a non-partitioned topic or one partition; use a "
                f"time on partitioned topic {info.name}"
            )
        layout = self.context.layout(partitions[0]) if position is not None else None
        if position is not None and layout is not None:
            check_reset_target(position, layout)
        result = {}
        for name in partitions:
            cursor = self.context.cursor(name, subscription, layout)
            target = position if position is not None else self._first_at(name, timestamp_ms or 0)
            cursor.reset(target)
            result[name] = str(cursor.mark_delete)
        return result

    def _first_at(self, topic_partition: str, timestamp_ms: int) -> Position:
        index = self.ledgers.entry_index(TopicName.parse(topic_partition))
        publish = np.asarray(index.publish_time, dtype=np.int64)
        rows = np.flatnonzero(publish >= timestamp_ms)
        if rows.size == 0:
            layout = self.context.layout(topic_partition)
            last = layout.last_position
            return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST
        row = int(rows[0])
        return Position(int(index.ledger_id[row]), int(index.entry_id[row]))


def check_reset_target(position: Position, layout: LedgerLayout) -> None:
    """A cursor may start at an entry of the topic, at its start or just past its end."""
    last = layout.last_position
    end = Position(last.ledger_id, last.entry_id + 1)
    if position not in (EARLIEST, end) and not layout.contains(position):
        raise PositionOutOfRangeError(
            f"Cannot start at {position}: no such entry (the last entry is {last})"
        )

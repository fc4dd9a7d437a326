"""Reading: a subscription's dispatcher, consume, peek, examine, the last position."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    EntryNotFoundError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.store.metadata import TopicInfo

# The read path (cursorops.core.services.reading.dispatch, cursorops.core.store.segment_reader) is
# imported where it is used: a
# command that only counts or skips does not load it.
if TYPE_CHECKING:
    from cursorops.core.services.reading.dispatch import Dispatcher, Message, PartitionSource


class Reading(Collaborator):
    """What a consumer or an operator reads from the ledgers, from a cursor on."""

    def dispatcher(
        self, role: str, topic: str, subscription: str, *, partition: int | None = None
    ) -> Dispatcher:
        """The subscription's dispatcher; its consumers share state with every other process.

        ``partition``: serve that partition of a partitioned topic only (the
        binary protocol subscribes partition by partition).
        """
        from cursorops.core.services.reading.dispatch import Dispatcher
        from cursorops.core.store import segment_reader

        info = self.access.authorized_topic(role, Operation.CONSUME, topic)
        sub = self.metadata.get_subscription(info.name, subscription)
        # The dispatcher's own cache of decoded row groups: each dispatch reads on from
        # where the last one stopped, so a drained backlog decodes each row group once.
        # Segments this process just wrote come from the ledger store's memory, not the files.
        cache = segment_reader.SegmentCache(self.ledgers.location, fresh=self.ledgers.recent.get)

        def cached(name: str) -> Callable[[Position], Iterator[pa.RecordBatch]]:
            return lambda after: cache.batches_after(self.metadata.segments(name), after)

        sources = [
            dataclasses.replace(
                source, read_after=cached(source.topic_partition), read_segments=cache.batches_after
            )
            for source in self.sources(info)
            if partition is None or source.partition == partition
        ]
        if not sources:
            raise InvalidArgumentError(f"{info.name} has no partition {partition}")
        return Dispatcher(
            sub.type,
            self.metadata,
            info.name,
            subscription,
            sources,
            self.clock,
            lease_ms=self.config.consumer_lease_ms,
        )

    def consume(
        self, role: str, topic: str, subscription: str, count: int, *, ack: bool = False
    ) -> list[Message]:
        """Receive up to ``count`` messages available now; acknowledge them when ``ack``.

        The consumer joins the subscription's consumers (across processes) for
        the call and leaves at its end: unacknowledged messages become
        deliverable again, and an Exclusive subscription held by another live
        consumer is refused. Only the messages returned are dispatched to it: none
        is read ahead, to be handed back at its end (a close: redelivery counts unchanged).
        """
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        dispatcher = self.dispatcher(role, topic, subscription)
        consumer = dispatcher.subscribe("cursorops-cli", receiver_queue_size=min(count, 1000))
        try:
            messages = consumer.receive_many(count, prefetch=False)
            if ack and messages:
                consumer.acknowledge(messages)
        finally:
            consumer.close()
        return messages

    def last_position(self, role: str, topic: str) -> Position:
        """The last entry of a non-partitioned topic or of one partition (``t-partition-2``);
        EARLIEST when it has none. Needs ``consume``, as Pulsar's getLastMessageId."""
        name = TopicName.parse(topic)
        self.access.authorized_topic(role, Operation.CONSUME, name.base)
        return self.context.layout(str(name)).last_position

    def release_consumers_of(self, process_prefix: str) -> int:
        """Remove the consumers a process registered (their ids start with
        ``process_prefix``) from every subscription, releasing what they held; how many.

        For a process known to be gone: what it held is deliverable at once rather
        than when the leases lapse. No role check: the process's own identity is
        the authority, and only the process that proved the other's end calls it.
        """
        return self.metadata.release_consumers_with_prefix(process_prefix, self.clock())

    def peek_messages(self, role: str, topic: str, subscription: str, count: int) -> list[Message]:
        """The next ``count`` unacknowledged messages, delayed ones included, without delivering.

        Reads from the mark-delete position on and stops after ``count``. A
        partition's name (``t-partition-2``) peeks that partition only. A pending
        message carries its stored redelivery count, the one a consumer receives.
        """
        info, sources = self._partition_sources(role, Operation.PEEK_MESSAGES, topic)
        self.metadata.get_subscription(info.name, subscription)
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        states = [
            self.context.cursor_state(source.topic_partition, subscription) for source in sources
        ]
        from cursorops.core.services.reading import dispatch

        pending = self.metadata.pending_members(info.name, subscription)
        return dispatch.peek(sources, states, count, pending)

    def examine_message(
        self, role: str, topic: str, initial_position: str, message_position: int
    ) -> Message:
        """Pulsar's examine-message: the ``message_position``-th entry (1-based) counted
        from the ``earliest`` or the ``latest`` entry of a non-partitioned topic or of one
        partition, acknowledged or not; its first message (PEEK_MESSAGES).
        """
        info, sources = self._partition_sources(role, Operation.PEEK_MESSAGES, topic)
        if initial_position not in ("earliest", "latest"):
            raise InvalidArgumentError(
                f"Invalid initial position '{initial_position}': earliest or latest"
            )
        if isinstance(message_position, bool) or not isinstance(message_position, int):
            raise InvalidArgumentError(f"Invalid message position {message_position!r}")
        if message_position < 1:
            raise InvalidArgumentError("The message position must be at least 1")
        if len(sources) != 1:
            raise InvalidArgumentError(
                f"{info.name} has {info.partitions} partitions: examine one partition "
                f"('{info.name}-partition-0')"
            )
        facts = self.context.entry_arrays(sources[0].topic_partition)
        size = int(facts.ledger_ids.size)
        if message_position > size:
            raise EntryNotFoundError(
                f"No message at position {message_position} from {initial_position}: "
                f"{sources[0].topic_partition} has {size} entries"
            )
        row = message_position - 1 if initial_position == "earliest" else size - message_position
        # A cursor that acknowledged everything before the row reads that row's entry first.
        start = CursorState()
        if row > 0:
            start.mark_delete = Position(
                int(facts.ledger_ids[row - 1]), int(facts.entry_ids[row - 1])
            )
        from cursorops.core.services.reading import dispatch

        return dispatch.peek(sources, [start], 1)[0]

    def _partition_sources(
        self, role: str, operation: Operation, topic: str
    ) -> tuple[TopicInfo, list[PartitionSource]]:
        """The topic and its partitions to read; a partition's name gives that one only."""
        name = TopicName.parse(topic)
        if not name.is_partition:
            info = self.access.authorized_topic(role, operation, topic)
            return info, self.sources(info)
        info = self.access.authorized_topic(role, operation, str(name.base))
        chosen = [s for s in self.sources(info) if s.topic_partition == str(name)]
        if not chosen:
            raise TopicNotFoundError(
                f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
            )
        return info, chosen

    def sources(self, info: TopicInfo) -> list[PartitionSource]:
        """Each partition, read lazily segment by segment from a position on."""
        from cursorops.core.services.reading.dispatch import PartitionSource
        from cursorops.core.store import segment_reader

        sources = []
        for index, name in enumerate(info.partition_names()):

            def read_after(after: Position, name: str = name) -> Iterator[pa.RecordBatch]:
                return segment_reader.batches_after(
                    self.ledgers.location, self.metadata.segments(name), after
                )

            def layout(name: str = name) -> LedgerLayout:
                return self.context.layout(name)

            sources.append(
                PartitionSource(name, index if info.partitions else -1, layout, read_after)
            )
        return sources

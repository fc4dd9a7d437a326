"""What every part of the Broker shares: the configuration, the clock, the two stores, the
authorization, and the few reads of a partition they all make (its ledger layout, a cursor,
its entry index)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cursorops.core.domain.acks import skip
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.chunked_messages import CHUNK_COLUMNS, ChunkedMessages
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.access import Access
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.metadata import MetadataStore, SegmentInfo, TopicInfo


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class BrokerContext:
    """The stores and rules one Broker's collaborators share; holds no cursor state."""

    config: Config
    clock: Callable[[], int]
    metadata: MetadataStore
    ledgers: LedgerStore
    access: Access

    @staticmethod
    def partition_topics(info: TopicInfo) -> list[TopicName]:
        """The parsed names of :meth:`TopicInfo.partition_names`, parsing the topic once."""
        base = TopicName.parse(info.name)
        return (
            [base] if not info.partitions else [base.partition(i) for i in range(info.partitions)]
        )

    def layout(self, topic_partition: str) -> LedgerLayout:
        return LedgerLayout.of(
            (info.ledger_id, info.entries) for info in self.metadata.ledgers(topic_partition)
        )

    def cursor_state(
        self, topic_partition: str, subscription: str, layout: LedgerLayout | None = None
    ) -> CursorState:
        """The cursor as stored now, read-only (a consistent read, replayed); pass ``layout``
        when the caller already read the ledger list. Every change goes through a cursor
        transaction (docs/architecture.md, "Cursor durability")."""
        record = self.metadata.load_cursor(topic_partition, subscription)
        return replay(record, layout if layout is not None else self.layout(topic_partition))

    def entry_arrays(
        self,
        topic_partition: str | TopicName,
        layout: LedgerLayout | None = None,
        segments: Sequence[SegmentInfo] | None = None,
    ) -> skip.SkipLookup:
        """The partition's entry index; pass ``layout`` and ``segments`` when the caller
        already read the ledgers and the segment list."""
        index = self.ledgers.entry_index(
            topic_partition
            if isinstance(topic_partition, TopicName)
            else TopicName.parse(topic_partition),
            segments,
        )
        return skip.SkipLookup(
            layout=layout if layout is not None else self.layout(str(topic_partition)),
            ledger_ids=np.asarray(index.ledger_id, dtype=np.int64),
            entry_ids=np.asarray(index.entry_id, dtype=np.int64),
            batch_sizes=np.asarray(index.batch_size, dtype=np.int64),
            deliver_at=np.asarray(index.deliver_at, dtype=np.int64),
            chunk_rest=index.chunk_rest if index.chunk_rest.any() else None,
        )

    def chunked_messages(self, topic_partition: str) -> ChunkedMessages:
        """The partition's chunked messages: one scan of its chunk rows' columns (a caller
        asks only of a partition whose entry index has chunks)."""
        import pyarrow.compute as pc

        return ChunkedMessages.of_rows(
            self.ledgers.read_table(
                TopicName.parse(topic_partition),
                columns=list(CHUNK_COLUMNS),
                filter=pc.field("uuid").is_valid(),
            )
        )


class Collaborator:
    """A part of the Broker: the shared context, and its members by their short names."""

    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self.config = context.config
        self.clock = context.clock
        self.metadata = context.metadata
        self.ledgers = context.ledgers
        self.access = context.access

"""Ledgers and segments: the index of what a topic partition holds.

A part of :class:`~cursorops.core.store.metadata.MetadataStore`; the segment files themselves are
:mod:`cursorops.core.store.ledger`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import (
    select,
)

from cursorops.core.store.broker_registry import check_fence
from cursorops.core.store.checks import (
    canonical_topic,
)
from cursorops.core.store.entry_allocation import allocated_entries
from cursorops.core.store.read_view import ledger_info
from cursorops.core.store.statements import ConnectionStatements
from cursorops.core.store.store_base import StoreBase
from cursorops.core.store.tables import (
    LedgerRow,
    SegmentRow,
)
from cursorops.core.store.values import (
    Allocation,
    LedgerInfo,
    SegmentInfo,
)


class LedgerIndex(StoreBase):
    """The ledgers and committed segments of every topic partition."""

    # Ledgers and segments.

    @contextmanager
    def append_entries(
        self, topic_partition: str, n_entries: int, max_entries_per_ledger: int
    ) -> Iterator[Allocation]:
        """Reserve up to ``n_entries`` entry ids at the end of the partition's current ledger.

        Holds the partition's lock until the ``with`` block ends. ``count`` is the
        room left in the current ledger (a new ledger, with a store-wide unique id,
        is started when it is full or there is none). The caller writes the segment
        file inside the block and sets ``path`` and ``messages``; on normal exit the
        segment is registered and the ledger's counts bumped in the same
        transaction. On an exception nothing is registered.
        """
        with self.append_entries_many([(topic_partition, n_entries)], max_entries_per_ledger) as (
            allocation,
        ):
            yield allocation

    @contextmanager
    def append_entries_many(
        self, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
    ) -> Iterator[list[Allocation]]:
        """:meth:`append_entries` for several partitions in ONE transaction.

        ``requests`` are ``(topic partition, n_entries)``, each partition once;
        the allocations come back in the same order. The partitions' locks are
        taken in name order (no deadlock between two such writers) and held
        until the block ends; on normal exit every segment is registered in one
        commit, on an exception none is.
        """
        with self._session(write=True) as session:
            statements = ConnectionStatements.of(session)
            if self.fence is not None:
                check_fence(statements, self.fence)
            with allocated_entries(statements, requests, max_entries_per_ledger) as allocations:
                yield allocations

    def ledgers(self, topic_partition: str) -> list[LedgerInfo]:
        """The partition's ledgers, ordered by ledger id."""
        name = canonical_topic(topic_partition)
        with self._session(write=False) as session:
            self._require_partition(session, name, lock=False)
            query = (
                select(LedgerRow)
                .where(LedgerRow.topic_partition == name)
                .order_by(LedgerRow.ledger_id)
            )
            return [ledger_info(row) for row in session.scalars(query)]

    def ledgers_of(self, topic_partitions: Sequence[str]) -> dict[str, list[LedgerInfo]]:
        """Each partition's ledgers, ordered by ledger id: :meth:`ledgers` of several in ONE
        statement (a skip routes its ids over every partition of the topic)."""
        with self.reading() as view:
            return view.ledgers_of(topic_partitions)

    def segments(self, topic_partition: str) -> list[SegmentInfo]:
        """The partition's committed segments, ordered by ``(ledger_id, first_entry)``."""
        name = canonical_topic(topic_partition)
        with self._session(write=False) as session:
            self._require_partition(session, name, lock=False)
            query = (
                select(SegmentRow)
                .join(LedgerRow, LedgerRow.ledger_id == SegmentRow.ledger_id)
                .where(LedgerRow.topic_partition == name)
                .order_by(SegmentRow.ledger_id, SegmentRow.first_entry)
            )
            return [
                SegmentInfo(row.ledger_id, row.first_entry, row.last_entry, row.messages, row.path)
                for row in session.scalars(query)
            ]

    def find_ledger(self, ledger_id: int) -> LedgerInfo | None:
        """The ledger with this id, whichever partition it belongs to."""
        with self._session(write=False) as session:
            row = session.get(LedgerRow, ledger_id)
            return None if row is None else ledger_info(row)

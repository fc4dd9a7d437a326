"""Ledgers and segments: the index of what a topic partition holds.

A part of :class:`~core.store.metadata.MetadataStore`; the segment files themselves are
:mod:`core.store.ledger`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import (
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from core.errors import (
    InvalidArgumentError,
    TopicNotFoundError,
)
from core.store.checks import (
    canonical_topic,
    check_int,
)
from core.store.read_view import ledger_info
from core.store.records import (
    Allocation,
    LedgerInfo,
    SegmentInfo,
)
from core.store.store_base import StoreBase
from core.store.tables import (
    LedgerRow,
    SegmentRow,
    TopicPartitionRow,
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
        with (
            self._session(write=True) as session,
            allocated_entries(session, requests, max_entries_per_ledger) as allocations,
        ):
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


@contextmanager
def allocated_entries(
    session: Session, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
) -> Iterator[list[Allocation]]:
    """:meth:`LedgerIndex.append_entries_many` inside a transaction the caller owns: the
    allocations, registered when the block ends normally, committed
    (or not) with the rest of the caller's transaction.

    The partitions' rows stay locked until that transaction ends. Ledger rows are
    read afresh (``populate_existing``): a second allocation in one transaction (the
    rest of an append that filled a ledger) sees the counts the first one wrote.
    """
    names = [canonical_topic(topic_partition) for topic_partition, _ in requests]
    if len(set(names)) != len(names):
        raise InvalidArgumentError("append_entries_many: a partition is named twice")
    for _, n_entries in requests:
        check_int("number of entries", n_entries, 1)
    check_int("max entries per ledger", max_entries_per_ledger, 1)
    # One query locks every partition (in name order: rows are locked as the
    # sorted scan returns them) and one reads their latest ledgers.
    locked = session.scalars(
        select(TopicPartitionRow.name)
        .where(TopicPartitionRow.name.in_(names))
        .order_by(TopicPartitionRow.name)
        .with_for_update()
    ).all()
    missing = sorted(set(names) - set(locked))
    if missing:
        raise TopicNotFoundError(f"Topic partition '{missing[0]}' not found")
    latest = (
        select(func.max(LedgerRow.ledger_id))
        .where(LedgerRow.topic_partition.in_(names))
        .group_by(LedgerRow.topic_partition)
    )
    current: dict[str, LedgerRow | None] = dict.fromkeys(names)
    fresh = (
        select(LedgerRow)
        .where(LedgerRow.ledger_id.in_(latest))
        .execution_options(populate_existing=True)
    )
    for row in session.scalars(fresh):
        current[row.topic_partition] = row
    reserved: list[tuple[LedgerRow, Allocation]] = []
    # New ledgers in request order: the ids come out as from one append after another.
    for name, (_, n_entries) in zip(names, requests, strict=True):
        ledger = current[name]
        if ledger is None or ledger.entries >= max_entries_per_ledger:
            ledger = LedgerRow(topic_partition=name, entries=0, messages=0)
            session.add(ledger)
            session.flush()
        count = min(n_entries, max_entries_per_ledger - ledger.entries)
        reserved.append((ledger, Allocation(ledger.ledger_id, ledger.entries, count)))
    yield [allocation for _, allocation in reserved]
    for _, allocation in reserved:
        if not isinstance(allocation.path, str) or not allocation.path:
            raise InvalidArgumentError("append_entries: the segment path was not set")
        check_int("number of messages", allocation.messages, allocation.count)
    # Two statements for all partitions, not the ORM's flush of an object each.
    connection = session.connection()
    connection.execute(
        insert(SegmentRow),
        [
            {
                "ledger_id": ledger.ledger_id,
                "first_entry": allocation.first_entry,
                "last_entry": allocation.first_entry + allocation.count - 1,
                "messages": allocation.messages,
                "path": allocation.path,
            }
            for ledger, allocation in reserved
        ],
    )
    connection.execute(
        update(LedgerRow)
        .where(LedgerRow.ledger_id == bindparam("row_ledger_id"))
        .values(entries=bindparam("row_entries"), messages=bindparam("row_messages")),
        [
            {
                "row_ledger_id": ledger.ledger_id,
                "row_entries": ledger.entries + allocation.count,
                "row_messages": ledger.messages + allocation.messages,
            }
            for ledger, allocation in reserved
        ],
    )

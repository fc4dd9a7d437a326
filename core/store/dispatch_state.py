"""The dispatcher's shared state in the metadata store: consumer registry and pending acks.

Pulsar keeps a subscription's consumers and its pending-ack set in the broker's
memory; here several processes serve one subscription, so both live in the
metadata store and every change happens inside
:meth:`~core.store.metadata.MetadataStore.subscription_transaction`, under the
subscription's row lock.

- A consumer holds a lease (``lease_expires_ms``), renewed on every call. When
  it lapses the consumer is gone: its pending messages become deliverable again.
- A pending row is one message (entry, batch index) delivered to a consumer and
  not yet acknowledged. Releasing it (close, negative ack, redeliver, lease
  expiry) clears its consumer and bumps its redelivery count; acknowledging
  deletes it in the transaction that appends the cursor delta.
- A read position per partition (Pulsar's ``readPosition``): every message at
  or before it is acknowledged or held by a consumer, so a dispatch reads on
  from there instead of from mark-delete. Releasing a message rewinds it to
  just before that message (Pulsar replays released messages first; here they
  are met again in position order). It records the cursor version it was set
  at: a cursor reset after that (a replacing delta, or one folded into a newer
  snapshot) voids it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import and_, delete, insert, or_, select, tuple_, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from core.position import Position
from core.store.metadata import (
    ConsumerRow,
    CursorDeltaRow,
    CursorRecord,
    CursorRow,
    PendingAckRow,
)
from core.store.tables import ReadPositionRow

_WHOLE = 2**31 - 1
"""Above every batch index."""

Ints = npt.NDArray[np.int64]

PendingKey = tuple[str, int, int, int]
"""(topic partition, ledger, entry, batch index)."""


@dataclass(frozen=True)
class ConsumerInfo:
    consumer_id: str
    name: str
    priority: int
    epoch: int
    lease_expires_ms: int


@dataclass(frozen=True)
class PendingInfo:
    consumer_id: str | None
    """None: released, waiting for redelivery to any consumer."""
    redelivery_count: int
    key_hash: int | None


@dataclass(frozen=True)
class ReadPosition:
    settled_through: Position
    """Every message at or before it is acknowledged or held by a consumer."""
    cursor_version: int
    """The cursor's journal version when it was set."""


@dataclass(frozen=True)
class CursorJournal:
    """A cursor's journal read from a known version on (see :meth:`cursor_since`)."""

    cursor_id: int
    reloaded: bool
    """The snapshot was read: start from it, not from the caller's state."""
    snapshot: bytes | None
    snapshot_version: int
    deltas: list[tuple[int, bytes]]
    """(version, payload) after the caller's version (or after the snapshot), in order."""
    version: int
    read_position: ReadPosition | None
    """The subscription's read position on the partition, if one was stored."""


_ROWS_PER_STATEMENT = 2_000
"""Rows per multi-row statement: at most 16,000 parameters (SQLite allows 32,766)."""


@dataclass(frozen=True)
class PendingColumns:
    """Pending rows of a position range, as aligned arrays."""

    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    held: npt.NDArray[np.bool_]
    """True: a consumer holds it; False: released, waiting for redelivery."""
    redelivery_count: Ints


@dataclass(frozen=True)
class DispatchedColumns:
    """One dispatch's messages of one partition for one consumer, as aligned arrays."""

    consumer_id: str
    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    redelivery_count: Ints
    redelivered: npt.NDArray[np.bool_]
    """True: a released pending row taken again; False: a new pending row."""
    key_hash: Ints | None
    """Key_Shared only: the sticky key hash of each message."""


def _position_range(first: Position, last: Position) -> tuple[str, tuple[int, ...]]:
    """SQL condition and parameters: ``first <= (ledger_id, entry_id) <= last``."""
    if first.ledger_id == last.ledger_id:
        return "ledger_id = ? AND entry_id >= ? AND entry_id <= ?", (
            first.ledger_id,
            first.entry_id,
            last.entry_id,
        )
    return (
        "ledger_id >= ? AND ledger_id <= ? AND (ledger_id > ? OR entry_id >= ?)"
        " AND (ledger_id < ? OR entry_id <= ?)",
        (
            first.ledger_id,
            last.ledger_id,
            first.ledger_id,
            first.entry_id,
            last.ledger_id,
            last.entry_id,
        ),
    )


class SubscriptionTransaction:
    """The subscription's consumers, pending acks and cursors, inside one locked transaction."""

    def __init__(
        self,
        session: Session,
        subscription_id: int,
        subscription: str,
        now_ms: int,
        append_delta: Callable[[str, bytes], int],
    ) -> None:
        self._session = session
        self._id = subscription_id
        self.subscription = subscription
        self.now_ms = now_ms
        self._append_delta = append_delta

    # -- consumers ------------------------------------------------------------

    def expire_leases(self) -> list[str]:
        """Remove every consumer whose lease has lapsed and release its pending messages."""
        gone = list(
            self._session.scalars(
                select(ConsumerRow.consumer_id).where(
                    ConsumerRow.subscription_id == self._id,
                    ConsumerRow.lease_expires_ms <= self.now_ms,
                )
            )
        )
        for consumer_id in gone:
            self.remove_consumer(consumer_id)
        return gone

    def consumers(self) -> list[ConsumerInfo]:
        """The registered consumers by priority, name, id (call :meth:`expire_leases` first)."""
        rows = self._session.scalars(
            select(ConsumerRow)
            .where(ConsumerRow.subscription_id == self._id)
            .order_by(ConsumerRow.priority, ConsumerRow.name, ConsumerRow.consumer_id)
        )
        return [
            ConsumerInfo(r.consumer_id, r.name, r.priority, r.epoch, r.lease_expires_ms)
            for r in rows
        ]

    def upsert_consumer(
        self, consumer_id: str, name: str, priority: int, epoch: int, lease_ms: int
    ) -> None:
        """Register the consumer, or renew its lease and record its epoch."""
        expires = self.now_ms + lease_ms
        updated = self._session.execute(
            update(ConsumerRow)
            .where(ConsumerRow.subscription_id == self._id, ConsumerRow.consumer_id == consumer_id)
            .values(lease_expires_ms=expires, epoch=epoch)
            .execution_options(synchronize_session=False)
        )
        if updated.rowcount == 0:  # type: ignore[attr-defined]
            self._session.execute(
                insert(ConsumerRow).values(
                    subscription_id=self._id,
                    consumer_id=consumer_id,
                    name=name,
                    priority=priority,
                    epoch=epoch,
                    lease_expires_ms=expires,
                )
            )

    def renew_lease(self, consumer_id: str, lease_ms: int) -> bool:
        """Extend a registered consumer's lease; False when it is not registered (any more)."""
        updated = self._session.execute(
            update(ConsumerRow)
            .where(ConsumerRow.subscription_id == self._id, ConsumerRow.consumer_id == consumer_id)
            .values(lease_expires_ms=self.now_ms + lease_ms)
            .execution_options(synchronize_session=False)
        )
        return bool(updated.rowcount)  # type: ignore[attr-defined]

    def remove_consumer(self, consumer_id: str) -> None:
        self.release(consumer_id)
        self._session.execute(
            delete(ConsumerRow).where(
                ConsumerRow.subscription_id == self._id, ConsumerRow.consumer_id == consumer_id
            )
        )

    # -- pending acknowledgements ---------------------------------------------

    def pending(self) -> dict[PendingKey, PendingInfo]:
        rows = self._session.execute(
            select(
                PendingAckRow.topic_partition,
                PendingAckRow.ledger_id,
                PendingAckRow.entry_id,
                PendingAckRow.batch_index,
                PendingAckRow.consumer_id,
                PendingAckRow.redelivery_count,
                PendingAckRow.key_hash,
            ).where(PendingAckRow.subscription_id == self._id)
        )
        return {(r[0], r[1], r[2], r[3]): PendingInfo(r[4], r[5], r[6]) for r in rows}

    def pending_columns(
        self, topic_partition: str, first: Position, last: Position
    ) -> PendingColumns:
        """:meth:`pending_between` as columns: no Python object per pending row."""
        where, bounds = _position_range(first, last)
        rows = self._driver_rows(
            "SELECT ledger_id, entry_id, batch_index, "
            "CASE WHEN consumer_id IS NULL THEN 0 ELSE 1 END, redelivery_count "
            f"FROM pending_acks WHERE subscription_id = ? AND topic_partition = ? AND {where}",
            (self._id, topic_partition, *bounds),
        )
        # Rows iterate as plain values: no per-row key lookups while building the array.
        flat = itertools.chain.from_iterable(rows)
        table = np.fromiter(flat, dtype=np.int64, count=5 * len(rows)).reshape(-1, 5)
        return PendingColumns(table[:, 0], table[:, 1], table[:, 2], table[:, 3] == 1, table[:, 4])

    def record_dispatched(self, topic_partition: str, dispatched: DispatchedColumns) -> None:
        """Record a dispatch's messages of one partition pending on their consumer.

        Fresh messages get new rows and released ones are taken again, each
        with one multi-row statement (per :data:`_ROWS_PER_STATEMENT` rows), so
        a dispatch of 1,000 messages costs two statements, not 1,000.
        """
        sid, consumer = self._id, dispatched.consumer_id
        redelivered = dispatched.redelivered
        ledgers = dispatched.ledger_id.tolist()
        entries = dispatched.entry_id.tolist()
        indexes = dispatched.batch_index.tolist()
        counts = dispatched.redelivery_count.tolist()
        hashes: list[int | None] = (
            [None] * len(ledgers) if dispatched.key_hash is None else dispatched.key_hash.tolist()
        )
        fresh: list[object] = []
        taken: list[int] = []
        for row, again in enumerate(redelivered.tolist()):
            if again:
                taken += (ledgers[row], entries[row], indexes[row])
            else:
                fresh += (
                    sid,
                    topic_partition,
                    ledgers[row],
                    entries[row],
                    indexes[row],
                    consumer,
                    counts[row],
                    hashes[row],
                )
        insert_head = (
            "INSERT INTO pending_acks (subscription_id, topic_partition, ledger_id, "
            "entry_id, batch_index, consumer_id, redelivery_count, key_hash) VALUES "
        )
        for start in range(0, len(fresh), 8 * _ROWS_PER_STATEMENT):
            part = fresh[start : start + 8 * _ROWS_PER_STATEMENT]
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * (len(part) // 8))
            self._driver_execute(insert_head + values, tuple(part))
        for start in range(0, len(taken), 3 * _ROWS_PER_STATEMENT):
            chunk = taken[start : start + 3 * _ROWS_PER_STATEMENT]
            values = ", ".join(["(?, ?, ?)"] * (len(chunk) // 3))
            # The rows are in position order: bounding the positions lets the primary key
            # find them by a range scan, not a scan of every pending row of the partition.
            first, last = Position(chunk[0], chunk[1]), Position(chunk[-3], chunk[-2])
            where, bounds = _position_range(first, last)
            # Only released rows are taken: under the subscription lock nobody else took them.
            self._driver_execute(
                "UPDATE pending_acks SET consumer_id = ? WHERE subscription_id = ? "
                f"AND topic_partition = ? AND consumer_id IS NULL AND {where} "
                f"AND (ledger_id, entry_id, batch_index) IN (VALUES {values})",
                (consumer, sid, topic_partition, *bounds, *chunk),
            )

    def _driver_sql(self, sql: str) -> str:
        connection = self._session.connection()
        return sql if connection.dialect.paramstyle == "qmark" else sql.replace("?", "%s")

    def _driver_execute(self, sql: str, parameters: tuple[object, ...]) -> None:
        self._session.connection().exec_driver_sql(self._driver_sql(sql), parameters)

    def _driver_rows(self, sql: str, parameters: tuple[object, ...]) -> Sequence[Sequence[int]]:
        result = self._session.connection().exec_driver_sql(self._driver_sql(sql), parameters)
        return result.all()

    def held_elsewhere(self, consumer_id: str) -> dict[PendingKey, int]:
        """Key hashes of the messages other consumers hold (Key_Shared draining)."""
        rows = self._session.execute(
            select(
                PendingAckRow.topic_partition,
                PendingAckRow.ledger_id,
                PendingAckRow.entry_id,
                PendingAckRow.batch_index,
                PendingAckRow.key_hash,
            ).where(
                PendingAckRow.subscription_id == self._id,
                PendingAckRow.consumer_id.is_not(None),
                PendingAckRow.consumer_id != consumer_id,
                PendingAckRow.key_hash.is_not(None),
            )
        )
        return {(r[0], r[1], r[2], r[3]): r[4] for r in rows if r[4] is not None}

    def holders(self, topic_partition: str) -> set[str]:
        """The consumers holding messages of one partition."""
        found = self._session.scalars(
            select(PendingAckRow.consumer_id)
            .where(
                PendingAckRow.subscription_id == self._id,
                PendingAckRow.topic_partition == topic_partition,
                PendingAckRow.consumer_id.is_not(None),
            )
            .distinct()
        )
        return {c for c in found if c is not None}

    def release(
        self,
        consumer_id: str,
        keys: Iterable[PendingKey] | None = None,
        *,
        topic_partition: str | None = None,
    ) -> None:
        """Make the consumer's pending messages deliverable: all, these keys, or one partition's."""
        condition = and_(
            PendingAckRow.subscription_id == self._id, PendingAckRow.consumer_id == consumer_id
        )
        if topic_partition is not None:
            condition = and_(condition, PendingAckRow.topic_partition == topic_partition)
        if keys is not None:
            wanted = list(keys)
            if not wanted:
                return
            condition = and_(condition, self._keys(wanted))
        first: dict[str, tuple[int, int]] = {}
        for topic, ledger, entry in self._session.execute(
            select(
                PendingAckRow.topic_partition, PendingAckRow.ledger_id, PendingAckRow.entry_id
            ).where(condition)
        ):
            if topic not in first or (ledger, entry) < first[topic]:
                first[topic] = (ledger, entry)
        for topic, (ledger, entry) in first.items():
            self.rewind_read_position(topic, Position(ledger, entry - 1))
        self._session.execute(
            update(PendingAckRow)
            .where(condition)
            .values(consumer_id=None, redelivery_count=PendingAckRow.redelivery_count + 1)
            .execution_options(synchronize_session=False)
        )

    def drop_pending(self, keys: Iterable[PendingKey]) -> None:
        """Forget acknowledged messages (whoever held them)."""
        wanted = list(keys)
        for start in range(0, len(wanted), 500):
            self._session.execute(
                delete(PendingAckRow).where(
                    PendingAckRow.subscription_id == self._id,
                    self._keys(wanted[start : start + 500]),
                )
            )

    def drop_pending_through(
        self, topic_partition: str, position: Position, batch_index: int
    ) -> None:
        """Forget every pending message of the partition up to a cumulative acknowledgement."""
        ledger, entry = position.ledger_id, position.entry_id
        self._session.execute(
            delete(PendingAckRow).where(
                PendingAckRow.subscription_id == self._id,
                PendingAckRow.topic_partition == topic_partition,
                or_(
                    PendingAckRow.ledger_id < ledger,
                    and_(PendingAckRow.ledger_id == ledger, PendingAckRow.entry_id < entry),
                    and_(
                        PendingAckRow.ledger_id == ledger,
                        PendingAckRow.entry_id == entry,
                        # A whole-entry acknowledgement covers every batch index.
                        PendingAckRow.batch_index <= (batch_index if batch_index >= 0 else _WHOLE),
                    ),
                ),
            )
        )

    # -- read positions -------------------------------------------------------

    def read_position(self, topic_partition: str) -> ReadPosition | None:
        row = self._session.execute(
            select(
                ReadPositionRow.ledger_id, ReadPositionRow.entry_id, ReadPositionRow.cursor_version
            ).where(
                ReadPositionRow.subscription_id == self._id,
                ReadPositionRow.topic_partition == topic_partition,
            )
        ).one_or_none()
        return None if row is None else ReadPosition(Position(row[0], row[1]), row[2])

    def set_read_position(self, topic_partition: str, position: ReadPosition) -> None:
        values = {
            "ledger_id": position.settled_through.ledger_id,
            "entry_id": position.settled_through.entry_id,
            "cursor_version": position.cursor_version,
        }
        updated = self._session.execute(
            update(ReadPositionRow)
            .where(
                ReadPositionRow.subscription_id == self._id,
                ReadPositionRow.topic_partition == topic_partition,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if updated.rowcount == 0:  # type: ignore[attr-defined]
            self._session.execute(
                insert(ReadPositionRow).values(
                    subscription_id=self._id, topic_partition=topic_partition, **values
                )
            )

    def rewind_read_position(self, topic_partition: str, settled_through: Position) -> None:
        """Move the read position back to ``settled_through`` if it is further on."""
        current = self.read_position(topic_partition)
        if current is not None and settled_through < current.settled_through:
            self.set_read_position(
                topic_partition, ReadPosition(settled_through, current.cursor_version)
            )

    @staticmethod
    def _keys(keys: list[PendingKey]) -> ColumnElement[bool]:
        return tuple_(
            PendingAckRow.topic_partition,
            PendingAckRow.ledger_id,
            PendingAckRow.entry_id,
            PendingAckRow.batch_index,
        ).in_(keys)

    # -- cursors --------------------------------------------------------------

    def cursor_since(
        self, topic_partition: str, known: tuple[int, int, int] | None
    ) -> CursorJournal:
        """The cursor's journal after ``known`` = (cursor id, snapshot version, version) held.

        Only the deltas the caller has not seen are read while its snapshot is
        still the stored one; otherwise the snapshot and every later delta.
        """
        # The read position comes in the same round trip: a dispatch needs both.
        row = self._session.execute(
            select(
                CursorRow.id,
                CursorRow.snapshot_version,
                CursorRow.version,
                ReadPositionRow.ledger_id,
                ReadPositionRow.entry_id,
                ReadPositionRow.cursor_version,
            )
            .outerjoin(
                ReadPositionRow,
                and_(
                    ReadPositionRow.subscription_id == CursorRow.subscription_id,
                    ReadPositionRow.topic_partition == CursorRow.topic_partition,
                ),
            )
            .where(
                CursorRow.subscription_id == self._id, CursorRow.topic_partition == topic_partition
            )
        ).one()
        cursor_id, snapshot_version, version = row[0], row[1], row[2]
        read = None if row[3] is None else ReadPosition(Position(row[3], row[4]), row[5])
        fresh = (
            known is None
            or known[0] != cursor_id
            or known[1] != snapshot_version
            or known[2] > version
        )
        after = snapshot_version if fresh or known is None else known[2]
        snapshot = None
        if fresh:
            snapshot = self._session.scalars(
                select(CursorRow.snapshot).where(CursorRow.id == cursor_id)
            ).one()
        deltas = self._session.execute(
            select(CursorDeltaRow.version, CursorDeltaRow.payload)
            .where(CursorDeltaRow.cursor_id == cursor_id, CursorDeltaRow.version > after)
            .order_by(CursorDeltaRow.version)
        )
        return CursorJournal(
            cursor_id,
            fresh,
            snapshot,
            snapshot_version,
            [(int(v), bytes(p)) for v, p in deltas],
            version,
            read,
        )

    def cursor_record(self, topic_partition: str) -> CursorRecord:
        row = self._session.scalars(
            select(CursorRow).where(
                CursorRow.subscription_id == self._id, CursorRow.topic_partition == topic_partition
            )
        ).one()
        deltas = self._session.scalars(
            select(CursorDeltaRow.payload)
            .where(
                CursorDeltaRow.cursor_id == row.id,
                CursorDeltaRow.version > row.snapshot_version,
            )
            .order_by(CursorDeltaRow.version)
        )
        return CursorRecord(row.snapshot, row.snapshot_version, list(deltas), row.version)

    def append_cursor_delta(self, topic_partition: str, payload: bytes) -> int:
        """Append a delta to the cursor's journal in this transaction; returns its version."""
        return self._append_delta(topic_partition, payload)


__all__ = [
    "ConsumerInfo",
    "CursorJournal",
    "DispatchedColumns",
    "PendingColumns",
    "ReadPosition",
    "PendingInfo",
    "PendingKey",
    "SubscriptionTransaction",
]

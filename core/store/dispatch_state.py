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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

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

_WHOLE = 2**31 - 1
"""Above every batch index."""

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
class NewPending:
    key: PendingKey
    consumer_id: str
    redelivery_count: int
    key_hash: int | None


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

    def record_pending(
        self, fresh: Iterable[NewPending], redelivered: Iterable[NewPending]
    ) -> None:
        """Mark messages pending on their consumer: new rows, or released rows taken again."""
        rows = [
            {
                "subscription_id": self._id,
                "topic_partition": p.key[0],
                "ledger_id": p.key[1],
                "entry_id": p.key[2],
                "batch_index": p.key[3],
                "consumer_id": p.consumer_id,
                "redelivery_count": p.redelivery_count,
                "key_hash": p.key_hash,
            }
            for p in fresh
        ]
        if rows:
            self._session.execute(insert(PendingAckRow), rows)
        for p in redelivered:
            self._session.execute(
                update(PendingAckRow)
                .where(self._row(p.key))
                .values(consumer_id=p.consumer_id)
                .execution_options(synchronize_session=False)
            )

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

    def _row(self, key: PendingKey) -> ColumnElement[bool]:
        return and_(
            PendingAckRow.subscription_id == self._id,
            PendingAckRow.topic_partition == key[0],
            PendingAckRow.ledger_id == key[1],
            PendingAckRow.entry_id == key[2],
            PendingAckRow.batch_index == key[3],
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
    "NewPending",
    "PendingInfo",
    "PendingKey",
    "SubscriptionTransaction",
]

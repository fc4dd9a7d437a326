"""The dispatcher's shared state in the metadata store: consumer registry and pending acks.

Pulsar keeps a subscription's consumers and its pending-ack set in the broker's
memory; here several processes serve one subscription, so both live in the
metadata store and every change happens inside
:meth:`~cursorops.core.store.metadata.MetadataStore.subscription_transaction`: a transaction
of the cursor door (:class:`~cursorops.core.store.cursor_door.CursorTransaction`) that holds
the subscription's row for dispatching (:attr:`~cursorops.core.store.cursor_door.Hold.DISPATCH`).

- A consumer holds a lease (``lease_expires_ms``), renewed on every call. When
  it lapses the consumer is gone: its pending messages become deliverable again.
- A pending message is one (entry, batch index) delivered to a consumer and
  not yet acknowledged. Releasing it (close, negative ack, redeliver, lease
  expiry, ...) clears its consumer; its redelivery count is bumped only when the
  release's reason counts (:class:`~cursorops.core.domain.delivery.redelivery.Release`: a
  consumer asked for it again), as Pulsar counts. Acknowledging removes it in
  the transaction that appends the cursor delta. Pending messages are stored
  as runs (:mod:`cursorops.core.store.pending_runs`): one row per dispatch's
  stretch of a ledger, each member kept exactly.
- An acknowledgement states whose it is (a
  :class:`~cursorops.core.store.cursor_ticket.Ticket` "delivered to" its consumer). Where
  the namespace requires approval, it acknowledges only messages delivered to that
  consumer and still pending for it (:meth:`SubscriptionTransaction.acknowledge_delivered`,
  :meth:`SubscriptionTransaction.acknowledge_delivered_through`); elsewhere, as in Pulsar,
  whatever it names.
- A read position per partition (Pulsar's ``readPosition``): every message at
  or before it is acknowledged or held by a consumer, so a dispatch reads on
  from there instead of from mark-delete. Releasing a message rewinds it to
  just before that message (Pulsar replays released messages first; here they
  are met again in position order). It records the cursor version it was set
  at: a cursor reset after that (a replacing delta, or one folded into a newer
  snapshot) voids it.

Size: one module on purpose. Every statement of the locked subscription
transaction is here, so the lock order and the pending-run rewrites read in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.engine import Dialect

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import AckColumns
from cursorops.core.domain.delivery.redelivery import Release
from cursorops.core.domain.ids.position import Position
from cursorops.core.store import pending_runs
from cursorops.core.store.cursor_door import CursorTransaction, Hold, opened
from cursorops.core.store.cursor_state import JournalSince, ReadPosition
from cursorops.core.store.cursor_ticket import Ticket, TicketKind
from cursorops.core.store.pending_runs import RUN_SPAN_ENTRIES, Members
from cursorops.core.store.values import SegmentInfo

_WHOLE = 2**31 - 1
"""Above every batch index."""

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

PendingKey = tuple[str, int, int, int]
"""(topic partition, ledger, entry, batch index)."""

BatchSizes = Callable[[Ints, Ints, Ints], Ints]
"""The batch size of the entry of each message (ledger, entry, batch index), as stored;
0 for a message that is not in a batch (batch index -1)."""


def highest_message(ledger: Ints, entry: Ints, index: Ints) -> tuple[int, int, int] | None:
    """The last of the messages (ledger, entry, batch index) a consumer acknowledged: the
    consumer-ack mark it raises (:mod:`cursorops.core.domain.analysis.poison_radar`)."""
    if not len(ledger):
        return None
    last = int(np.lexsort((index, entry, ledger))[-1])
    return int(ledger[last]), int(entry[last]), int(index[last])


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


_RUN_FIELDS = "ledger_id, first_entry, first_index, bumps, members"
"""The columns a run is read with (cursorops.core.store.pending_runs)."""

_RUN_KEY = (
    "subscription_id = ? AND topic_partition = ? AND ledger_id = ? AND first_entry = ? "
    "AND first_index = ?"
)


def _run_range(first: Position, last: Position) -> tuple[str, tuple[int, ...]]:
    """SQL condition and parameters: runs that may hold a position from ``first`` to ``last``.

    A run starts at most RUN_SPAN_ENTRIES - 1 entries before any of its
    positions, in the same ledger: the condition bounds the primary key's range.
    """
    low = first.entry_id - RUN_SPAN_ENTRIES + 1
    reaches = "(ledger_id > ? OR last_entry >= ?)"
    if first.ledger_id == last.ledger_id:
        return f"ledger_id = ? AND first_entry >= ? AND first_entry <= ? AND {reaches}", (
            first.ledger_id,
            low,
            last.entry_id,
            first.ledger_id,
            first.entry_id,
        )
    return (
        "ledger_id >= ? AND ledger_id <= ? AND (ledger_id > ? OR first_entry >= ?)"
        f" AND (ledger_id < ? OR first_entry <= ?) AND {reaches}",
        (
            first.ledger_id,
            last.ledger_id,
            first.ledger_id,
            low,
            last.ledger_id,
            last.entry_id,
            first.ledger_id,
            first.entry_id,
        ),
    )


def _between(m: Members, first: Position, last: Position) -> npt.NDArray[np.bool_]:
    """True for each member at a position from ``first`` through ``last``."""
    after = (m.ledger > first.ledger_id) | (
        (m.ledger == first.ledger_id) & (m.entry >= first.entry_id)
    )
    before = (m.ledger < last.ledger_id) | (
        (m.ledger == last.ledger_id) & (m.entry <= last.entry_id)
    )
    inside: npt.NDArray[np.bool_] = after & before
    return inside


def _by_topic(keys: Iterable[PendingKey]) -> dict[str, Members]:
    """Pending keys grouped by partition, as members (no redelivery count nor key hash)."""
    grouped: dict[str, list[tuple[int, int, int]]] = {}
    for topic, ledger, entry, index in keys:
        grouped.setdefault(topic, []).append((ledger, entry, index))
    found = {}
    for topic, positions in grouped.items():
        table = np.array(positions, dtype=np.int64).reshape(-1, 3)
        none = np.full(len(table), pending_runs.NO_KEY_HASH, np.int64)
        found[topic] = Members(table[:, 0], table[:, 1], table[:, 2], none, none)
    return found


@dataclass(frozen=True)
class _StoredRun:
    """A stored run as read: its key, its bumps and its members as stored (not bumped)."""

    ledger_id: int
    first_entry: int
    first_index: int
    bumps: int
    members: Members


@dataclass(frozen=True)
class _Rewrite:
    """Runs to delete and to rewrite when members are taken out of them, and those members."""

    deleted: list[tuple[object, ...]]
    updated: list[tuple[object, ...]]
    taken: Members

    @classmethod
    def of(
        cls,
        topic_partition: str,
        subscription_id: int,
        runs: Iterable[_StoredRun],
        chosen: Callable[[Members], Flags],
    ) -> _Rewrite:
        deleted: list[tuple[object, ...]] = []
        updated: list[tuple[object, ...]] = []
        taken: list[Members] = []
        for run in runs:
            m = run.members
            out = chosen(m)
            if not out.any():
                continue
            taken.append(m.take(out).bumped(run.bumps))
            key = (
                subscription_id,
                topic_partition,
                run.ledger_id,
                run.first_entry,
                run.first_index,
            )
            if out.all():
                deleted.append(key)
                continue
            rest = m.take(~out)
            updated.append(
                (
                    int(rest.entry[0]),
                    int(rest.index[0]),
                    int(rest.entry[-1]),
                    int(rest.index[-1]),
                    len(rest),
                    pending_runs.encode(rest),
                    *key,
                )
            )
        return cls(deleted, updated, Members.concat(taken))


class SubscriptionTransaction(CursorTransaction):
    """A cursor transaction that holds a subscription for dispatching: its consumers,
    pending acks and read positions, and its cursors (acknowledgements)."""

    def __init__(
        self, raw: Any, dialect: Dialect, subscription_id: int, subscription: str, now_ms: int
    ) -> None:
        super().__init__(raw, dialect)
        self._consumers: list[ConsumerInfo] | None = None
        self._released: dict[str, dict[tuple[int, int, int], _StoredRun]] = {}
        """Released runs :meth:`pending_columns` read, by partition and key; emptied by any
        write. A dispatch takes released messages again from the runs it just read."""
        self._id = subscription_id
        self.subscription = subscription
        self.now_ms = now_ms

    def _lock(self, topic: str, *, flushed: bool = True) -> None:
        """Begin, and hold the subscription's row for dispatching until the transaction
        ends (:attr:`~cursorops.core.store.cursor_door.Hold.DISPATCH`)."""
        self._begin(flushed=flushed)
        self._id = self.lock(topic, self.subscription, Hold.DISPATCH)

    # -- consumers ------------------------------------------------------------

    def expire_leases(self) -> list[str]:
        """Remove every consumer whose lease has lapsed and release its pending messages."""
        registered = self._registry()
        gone = [c.consumer_id for c in registered if c.lease_expires_ms <= self.now_ms]
        for consumer_id in gone:
            self.remove_consumer(consumer_id, Release.LEASE_EXPIRY)
        return gone

    def consumers(self) -> list[ConsumerInfo]:
        """The registered consumers by priority, name, id (call :meth:`expire_leases` first)."""
        return list(self._registry())

    def _registry(self) -> list[ConsumerInfo]:
        """The registered consumers, read once per transaction and kept up to date by it."""
        if self._consumers is None:
            rows = self._driver_rows(
                "SELECT consumer_id, name, priority, epoch, lease_expires_ms FROM consumers "
                "WHERE subscription_id = ? ORDER BY priority, name, consumer_id",
                (self._id,),
            )
            self._consumers = [ConsumerInfo(*row) for row in rows]
        return self._consumers

    def _registered(self, consumer_id: str, expires: int, epoch: int | None = None) -> None:
        """Apply a written lease (and epoch) to the registry as read."""
        if self._consumers is not None:
            self._consumers = [
                dataclasses.replace(
                    c, lease_expires_ms=expires, epoch=c.epoch if epoch is None else epoch
                )
                if c.consumer_id == consumer_id
                else c
                for c in self._consumers
            ]

    def upsert_consumer(
        self, consumer_id: str, name: str, priority: int, epoch: int, lease_ms: int
    ) -> None:
        """Register the consumer, or renew its lease and record its epoch."""
        expires = self.now_ms + lease_ms
        updated = self._driver_execute(
            "UPDATE consumers SET lease_expires_ms = ?, epoch = ? "
            "WHERE subscription_id = ? AND consumer_id = ?",
            (expires, epoch, self._id, consumer_id),
        )
        if updated:
            self._registered(consumer_id, expires, epoch)
            return
        self._driver_execute(
            "INSERT INTO consumers (subscription_id, consumer_id, name, priority, epoch, "
            "lease_expires_ms) VALUES (?, ?, ?, ?, ?, ?)",
            (self._id, consumer_id, name, priority, epoch, expires),
        )
        # Its place in the order is the store's to say: read the registry again when asked.
        self._consumers = None

    def renew_lease(self, consumer_id: str, lease_ms: int) -> bool:
        """Extend a registered consumer's lease; False when it is not registered (any more)."""
        expires = self.now_ms + lease_ms
        updated = self._driver_execute(
            "UPDATE consumers SET lease_expires_ms = ? WHERE subscription_id = ? "
            "AND consumer_id = ?",
            (expires, self._id, consumer_id),
        )
        self._registered(consumer_id, expires)
        return bool(updated)

    def remove_consumer(self, consumer_id: str, reason: Release) -> None:
        """Unregister the consumer; what it held is released for ``reason``."""
        self.release(consumer_id, reason=reason)
        self._driver_execute(
            "DELETE FROM consumers WHERE subscription_id = ? AND consumer_id = ?",
            (self._id, consumer_id),
        )
        if self._consumers is not None:
            self._consumers = [c for c in self._consumers if c.consumer_id != consumer_id]

    # -- pending acknowledgements ---------------------------------------------

    def pending(self) -> dict[PendingKey, PendingInfo]:
        """Every pending message of the subscription (decoded from its runs)."""
        rows = self._driver_rows(
            f"SELECT topic_partition, consumer_id, {_RUN_FIELDS} FROM pending_runs "
            "WHERE subscription_id = ?",
            (self._id,),
        )
        found: dict[PendingKey, PendingInfo] = {}
        for topic, consumer, ledger, _, _, bumps, blob in rows:
            m = pending_runs.decode(ledger, blob, bumps)
            for entry, index, count, key_hash in zip(
                m.entry.tolist(),
                m.index.tolist(),
                m.redelivery.tolist(),
                m.key_hash.tolist(),
                strict=True,
            ):
                found[(topic, ledger, entry, index)] = PendingInfo(
                    consumer, count, None if key_hash == pending_runs.NO_KEY_HASH else key_hash
                )
        return found

    def pending_columns(
        self, topic_partition: str, first: Position, last: Position
    ) -> PendingColumns:
        """The pending messages of one partition at positions ``first`` through ``last``."""
        where, bounds = _run_range(first, last)
        rows = self._driver_rows(
            "SELECT CASE WHEN consumer_id IS NULL THEN 0 ELSE 1 END, "
            f"{_RUN_FIELDS} FROM pending_runs "
            f"WHERE subscription_id = ? AND topic_partition = ? AND {where}",
            (self._id, topic_partition, *bounds),
        )
        parts: list[Members] = []
        held: list[npt.NDArray[np.bool_]] = []
        released = self._released.setdefault(topic_partition, {})
        for holding, ledger, first_entry, first_index, bumps, blob in rows:
            stored = pending_runs.decode(ledger, blob)
            if not holding:
                key = (ledger, first_entry, first_index)
                released[key] = _StoredRun(ledger, first_entry, first_index, bumps, stored)
            m = stored.bumped(bumps)
            inside = _between(m, first, last)
            if inside.any():
                parts.append(m if inside.all() else m.take(inside))
                held.append(np.full(int(inside.sum()), bool(holding)))
        m = Members.concat(parts)
        flags = np.concatenate(held) if held else np.zeros(0, np.bool_)
        return PendingColumns(m.ledger, m.entry, m.index, flags, m.redelivery)

    def record_dispatched(self, topic_partition: str, dispatched: DispatchedColumns) -> None:
        """Record a dispatch's messages of one partition pending on their consumer.

        Released messages taken again leave their released runs; all of them
        go into new runs of the consumer: a dispatch of 1,000 messages of one
        ledger costs a statement or two, not one per message.
        """
        count = len(dispatched.ledger_id)
        if not count:
            return
        members = Members(
            dispatched.ledger_id,
            dispatched.entry_id,
            dispatched.batch_index,
            dispatched.redelivery_count,
            np.full(count, pending_runs.NO_KEY_HASH, np.int64)
            if dispatched.key_hash is None
            else dispatched.key_hash,
        )
        again = dispatched.redelivered
        if again.any():
            # Only released messages are taken: under the subscription lock nobody else took them.
            self._remove(topic_partition, members.take(again), holder=None)
        self._insert_runs(topic_partition, dispatched.consumer_id, members)

    def held_elsewhere(self, consumer_id: str) -> dict[PendingKey, int]:
        """Key hashes of the messages other consumers hold (Key_Shared draining)."""
        rows = self._driver_rows(
            f"SELECT topic_partition, {_RUN_FIELDS} FROM pending_runs "
            "WHERE subscription_id = ? AND consumer_id IS NOT NULL AND consumer_id <> ?",
            (self._id, consumer_id),
        )
        found: dict[PendingKey, int] = {}
        for topic, ledger, _, _, _, blob in rows:
            m = pending_runs.decode(ledger, blob)
            keyed = m.key_hash != pending_runs.NO_KEY_HASH
            for entry, index, key_hash in zip(
                m.entry[keyed].tolist(),
                m.index[keyed].tolist(),
                m.key_hash[keyed].tolist(),
                strict=True,
            ):
                found[(topic, ledger, entry, index)] = key_hash
        return found

    def holders(self, topic_partition: str) -> set[str]:
        """The consumers holding messages of one partition."""
        rows = self._driver_rows(
            "SELECT DISTINCT consumer_id FROM pending_runs WHERE subscription_id = ? "
            "AND topic_partition = ? AND consumer_id IS NOT NULL",
            (self._id, topic_partition),
        )
        return {str(row[0]) for row in rows}

    def release(
        self,
        consumer_id: str,
        keys: Iterable[PendingKey] | None = None,
        *,
        reason: Release,
        topic_partition: str | None = None,
    ) -> None:
        """Make the consumer's pending messages deliverable: all, these keys, or one partition's.

        Their redelivery counts are bumped by one when ``reason`` counts
        (:attr:`Release.counts`), and stay as they are otherwise.
        """
        bump = 1 if reason.counts else 0
        if keys is not None:
            for topic, wanted in _by_topic(keys).items():
                if topic_partition is not None and topic != topic_partition:
                    continue
                taken = self._remove(topic, wanted, holder=consumer_id)
                if len(taken):
                    self._insert_runs(topic, None, taken.bumped(bump))
                    earliest = taken.in_order()
                    self.rewind_read_position(
                        topic, Position(int(earliest.ledger[0]), int(earliest.entry[0]) - 1)
                    )
            return
        where = "subscription_id = ? AND consumer_id = ?"
        params: tuple[object, ...] = (self._id, consumer_id)
        if topic_partition is not None:
            where += " AND topic_partition = ?"
            params += (topic_partition,)
        # A run's first member is its earliest: the read position rewinds to before it.
        first: dict[str, tuple[int, int]] = {}
        for topic, ledger, entry in self._driver_rows(
            f"SELECT topic_partition, ledger_id, first_entry FROM pending_runs WHERE {where}",
            params,
        ):
            if topic not in first or (ledger, entry) < first[topic]:
                first[topic] = (ledger, entry)
        if not first:
            return
        for topic, (ledger, entry) in first.items():
            self.rewind_read_position(topic, Position(ledger, entry - 1))
        # One statement, whatever the number of messages: the bump applies to every member.
        self._driver_execute(
            f"UPDATE pending_runs SET consumer_id = NULL, bumps = bumps + ? WHERE {where}",
            (bump, *params),
        )

    def drop_pending(self, keys: Iterable[PendingKey]) -> None:
        """Forget acknowledged messages (whoever held them)."""
        for topic, wanted in _by_topic(keys).items():
            self._remove(topic, wanted, any_holder=True)

    def drop_pending_columns(
        self, topic_partition: str, ledger_id: Ints, entry_id: Ints, batch_index: Ints
    ) -> None:
        """:meth:`drop_pending` of one partition's messages given as aligned arrays."""
        none = np.full(len(ledger_id), pending_runs.NO_KEY_HASH, np.int64)
        self._remove(
            topic_partition, Members(ledger_id, entry_id, batch_index, none, none), any_holder=True
        )

    def drop_pending_through(
        self, topic_partition: str, position: Position, batch_index: int
    ) -> None:
        """Forget every pending message of the partition up to a cumulative acknowledgement."""
        ledger, entry = position.ledger_id, position.entry_id
        # A whole-entry acknowledgement covers every batch index.
        index = batch_index if batch_index >= 0 else _WHOLE
        self._driver_execute(
            "DELETE FROM pending_runs WHERE subscription_id = ? AND topic_partition = ? AND "
            "(ledger_id < ? OR (ledger_id = ? AND (last_entry < ? OR "
            "(last_entry = ? AND last_index <= ?))))",
            (self._id, topic_partition, ledger, ledger, entry, entry, index),
        )
        # What is left before the bound are runs reaching past it: cut them there.
        rows = self._driver_rows(
            f"SELECT consumer_id, {_RUN_FIELDS} FROM pending_runs "
            "WHERE subscription_id = ? AND topic_partition = ? AND ledger_id = ? AND "
            "(first_entry < ? OR (first_entry = ? AND first_index <= ?))",
            (self._id, topic_partition, ledger, entry, entry, index),
        )
        self._rewrite(
            topic_partition,
            rows,
            lambda m: (m.entry < entry) | ((m.entry == entry) & (m.index <= index)),
        )

    def _remove(
        self,
        topic_partition: str,
        wanted: Members,
        *,
        holder: str | None = None,
        any_holder: bool = False,
    ) -> Members:
        """Take ``wanted``'s messages out of their runs held by ``holder`` (None: released).

        ``any_holder``: whoever holds them, released ones included.
        Returns the members taken out (redelivery counts as they stood). Runs
        are looked up by the positions' range, which the span bound keeps to a
        range scan of the primary key; released messages are first looked for
        in the released runs :meth:`pending_columns` read in this transaction
        (nothing written since), where a dispatch found the ones it takes again.
        """
        if not len(wanted):
            return Members.empty()
        ordered = wanted.in_order()

        def chosen(m: Members) -> Flags:
            return m.among(ordered)

        cached = self._released.get(topic_partition) if holder is None and not any_holder else None
        if cached:
            plan = _Rewrite.of(topic_partition, self._id, cached.values(), chosen)
            # Every message found in runs read in this transaction: none can be elsewhere.
            if len(plan.taken) == len(ordered):
                return self._apply(plan)
        first = Position(int(ordered.ledger[0]), int(ordered.entry[0]))
        last = Position(int(ordered.ledger[-1]), int(ordered.entry[-1]))
        where, bounds = _run_range(first, last)
        params: tuple[object, ...] = (self._id, topic_partition, *bounds)
        if any_holder:
            pass
        elif holder is None:
            where += " AND consumer_id IS NULL"
        else:
            where += " AND consumer_id = ?"
            params += (holder,)
        rows = self._driver_rows(
            f"SELECT consumer_id, {_RUN_FIELDS} FROM pending_runs "
            f"WHERE subscription_id = ? AND topic_partition = ? AND {where}",
            params,
        )
        return self._rewrite(topic_partition, rows, chosen)

    def _rewrite(
        self,
        topic_partition: str,
        rows: Sequence[Sequence[Any]],
        chosen: Callable[[Members], Flags],
    ) -> Members:
        """Take the ``chosen`` members out of these runs; the members taken out."""
        runs = (
            _StoredRun(ledger, first_entry, first_index, bumps, pending_runs.decode(ledger, blob))
            for _, ledger, first_entry, first_index, bumps, blob in rows
        )
        return self._apply(_Rewrite.of(topic_partition, self._id, runs, chosen))

    def _apply(self, plan: _Rewrite) -> Members:
        if plan.deleted:
            self._driver_execute_many(f"DELETE FROM pending_runs WHERE {_RUN_KEY}", plan.deleted)
        if plan.updated:
            # A run's new first member is one of its own: no other run has it as its key.
            self._driver_execute_many(
                "UPDATE pending_runs SET first_entry = ?, first_index = ?, last_entry = ?, "
                f"last_index = ?, messages = ?, members = ? WHERE {_RUN_KEY}",
                plan.updated,
            )
        return plan.taken

    def _insert_runs(self, topic_partition: str, consumer_id: str | None, members: Members) -> None:
        rows = [
            (
                self._id,
                topic_partition,
                run.ledger_id,
                *run.first,
                *run.last,
                consumer_id,
                0,
                len(run.members),
                pending_runs.encode(run.members),
            )
            for run in pending_runs.runs_of(members)
        ]
        if rows:
            self._driver_execute_many(
                "INSERT INTO pending_runs (subscription_id, topic_partition, ledger_id, "
                "first_entry, first_index, last_entry, last_index, consumer_id, bumps, "
                "messages, members) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def _run(self, sql: str, parameters: Any, *, many: bool = False) -> Any:
        if self._released and not sql.startswith("SELECT"):
            self._released = {}
        return super()._run(sql, parameters, many=many)

    # -- ledgers and segments -------------------------------------------------

    def ledgers(self, topic_partition: str) -> list[tuple[int, int]]:
        """The partition's ``(ledger id, committed entries)``, as this transaction sees them."""
        rows = self._driver_rows(
            "SELECT ledger_id, entries FROM ledgers WHERE topic_partition = ?",
            (topic_partition,),
        )
        return [(int(ledger), int(entries)) for ledger, entries in rows]

    def segments_after(
        self, topic_partition: str, after: tuple[int, int] | None
    ) -> list[SegmentInfo]:
        """The partition's committed segments after ``(ledger id, first entry)``, in order.

        Segments are only ever added, each after the last of its ledger: a
        caller that kept the list reads only the new ones.
        """
        ledger, entry = (-1, -1) if after is None else after
        rows = self._driver_rows(
            "SELECT s.ledger_id, s.first_entry, s.last_entry, s.messages, s.path "
            "FROM segments s JOIN ledgers l ON l.ledger_id = s.ledger_id "
            "WHERE l.topic_partition = ? AND (s.ledger_id > ? OR "
            "(s.ledger_id = ? AND s.first_entry > ?)) ORDER BY s.ledger_id, s.first_entry",
            (topic_partition, ledger, ledger, entry),
        )
        return [SegmentInfo(*row) for row in rows]

    # -- read positions -------------------------------------------------------

    def read_position(self, topic_partition: str) -> ReadPosition | None:
        rows = self._driver_rows(
            "SELECT ledger_id, entry_id, cursor_version FROM read_positions "
            "WHERE subscription_id = ? AND topic_partition = ?",
            (self._id, topic_partition),
        )
        return ReadPosition(Position(rows[0][0], rows[0][1]), rows[0][2]) if rows else None

    def set_read_position(self, topic_partition: str, position: ReadPosition) -> None:
        where = (self._id, topic_partition)
        values = (
            position.settled_through.ledger_id,
            position.settled_through.entry_id,
            position.cursor_version,
        )
        updated = self._driver_execute(
            "UPDATE read_positions SET ledger_id = ?, entry_id = ?, cursor_version = ? "
            "WHERE subscription_id = ? AND topic_partition = ?",
            (*values, *where),
        )
        if not updated:
            self._driver_execute(
                "INSERT INTO read_positions (subscription_id, topic_partition, ledger_id, "
                "entry_id, cursor_version) VALUES (?, ?, ?, ?, ?)",
                (*where, *values),
            )

    def rewind_read_position(self, topic_partition: str, settled_through: Position) -> None:
        """Move the read position back to ``settled_through`` if it is further on."""
        current = self.read_position(topic_partition)
        if current is not None and settled_through < current.settled_through:
            self.set_read_position(
                topic_partition, ReadPosition(settled_through, current.cursor_version)
            )

    # -- acknowledgements (through the door) -----------------------------------

    def acknowledge_delivered(
        self,
        topic_partition: str,
        ledger_id: Ints,
        entry_id: Ints,
        batch_index: Ints,
        batch_sizes: Callable[[], Ints],
        payload: bytes,
        *,
        ticket: Ticket,
    ) -> None:
        """A consumer's individual acknowledgement of these messages of one partition (its
        ``payload``, the cursor delta they make; ``batch_sizes()``, their entries' batch
        sizes, aligned with them, asked only where the namespace requires approval).

        On an ordinary namespace, as in Pulsar: the delta is appended and the messages
        leave the pending set, whoever holds them. Where the namespace requires approval,
        only messages pending for the ticket's consumer are acknowledged: every entry the
        acknowledgement names must hold one, or it is refused (ApprovalRequiredError,
        audited, nothing changed); the delta is made of exactly those messages (a batch
        acknowledged whole acknowledges the messages of it the consumer holds).
        """
        if ticket.kind is not TicketKind.DELIVERED or not self.approval_required(topic_partition):
            self.append_cursor_delta(
                topic_partition,
                payload,
                highest_message(ledger_id, entry_id, batch_index),
                ticket=ticket,
            )
            self.drop_pending_columns(topic_partition, ledger_id, entry_id, batch_index)
            return
        none = np.full(len(ledger_id), pending_runs.NO_KEY_HASH, np.int64)
        wanted = Members(ledger_id, entry_id, batch_index, none, none)
        taken = self._remove(topic_partition, wanted, holder=ticket.names)
        named = set(zip(ledger_id.tolist(), entry_id.tolist(), strict=True))
        missing = named - set(zip(taken.ledger.tolist(), taken.entry.tolist(), strict=True))
        if missing:
            shown = [f"{ledger}:{entry}" for ledger, entry in sorted(missing)[:10]]
            self.refuse(
                topic_partition,
                self.subscription,
                ticket,
                f"an acknowledgement of {len(missing)} entr{'y' if len(missing) == 1 else 'ies'}"
                " not delivered to the consumer",
                {"notPending": shown},
            )
        size_of = dict(
            zip(
                zip(ledger_id.tolist(), entry_id.tolist(), strict=True),
                batch_sizes().tolist(),
                strict=True,
            )
        )
        sizes = np.array(
            [size_of[key] for key in zip(taken.ledger.tolist(), taken.entry.tolist(), strict=True)],
            np.int64,
        )
        self._append_checked(topic_partition, ticket, taken, sizes)

    def acknowledge_delivered_through(
        self,
        topic_partition: str,
        position: Position,
        batch_index: int,
        payload: bytes,
        batch_sizes: BatchSizes,
        *,
        ticket: Ticket,
    ) -> None:
        """A consumer's cumulative acknowledgement through ``position`` (``batch_index``: of
        its batch, -1 the whole entry); ``payload``, the cursor delta it makes.

        On an ordinary namespace, as in Pulsar: mark-delete moves to it and every pending
        message up to it is forgotten. Where the namespace requires approval, it
        acknowledges the messages at or before it that are pending for the ticket's
        consumer, individually (sizes from ``batch_sizes``): mark-delete then advances
        through what is contiguous, never over a message the consumer was not handed.
        With none pending for it there, it is refused (ApprovalRequiredError, audited).
        """
        ledger, entry = position.ledger_id, position.entry_id
        index = batch_index if batch_index >= 0 else _WHOLE
        if ticket.kind is not TicketKind.DELIVERED or not self.approval_required(topic_partition):
            given = (np.array([v], np.int64) for v in (ledger, entry, batch_index))
            self.append_cursor_delta(
                topic_partition, payload, highest_message(*given), ticket=ticket
            )
            self.drop_pending_through(topic_partition, position, batch_index)
            return
        rows = self._driver_rows(
            f"SELECT consumer_id, {_RUN_FIELDS} FROM pending_runs "
            "WHERE subscription_id = ? AND topic_partition = ? AND consumer_id = ? AND "
            "(ledger_id < ? OR (ledger_id = ? AND (first_entry < ? OR "
            "(first_entry = ? AND first_index <= ?))))",
            (self._id, topic_partition, ticket.names, ledger, ledger, entry, entry, index),
        )
        taken = self._rewrite(
            topic_partition,
            rows,
            lambda m: (
                (m.ledger < ledger)
                | (
                    (m.ledger == ledger)
                    & ((m.entry < entry) | ((m.entry == entry) & (m.index <= index)))
                )
            ),
        )
        if not len(taken):
            self.refuse(
                topic_partition,
                self.subscription,
                ticket,
                f"a cumulative acknowledgement through {ledger}:{entry}, with no message "
                "delivered to the consumer at or before it",
            )
        sizes = batch_sizes(taken.ledger, taken.entry, taken.index)
        self._append_checked(topic_partition, ticket, taken, sizes)

    def _append_checked(
        self, topic_partition: str, ticket: Ticket, taken: Members, sizes: Ints
    ) -> None:
        """Append the acknowledgement of ``taken``, messages checked pending for the
        ticket's consumer and taken out of the pending set in this transaction."""
        delta = AckColumns.of(taken.ledger, taken.entry, taken.index, sizes)
        self._checked.add(ticket)
        try:
            self.append_cursor_delta(
                topic_partition,
                cursor_codec.encode_columns(delta),
                highest_message(taken.ledger, taken.entry, taken.index),
                ticket=ticket,
            )
        finally:
            self._checked.discard(ticket)

    # -- cursors (through the door) ---------------------------------------

    def cursor_since(
        self, topic_partition: str, known: tuple[int, int, int] | None
    ) -> JournalSince:
        """The cursor's journal after ``known`` = (cursor id, snapshot version, version) held,
        with the read position (:meth:`CursorTransaction.since`)."""
        return self.since(self._id, topic_partition, known)

    def append_cursor_delta(
        self,
        topic_partition: str,
        payload: bytes,
        consumer_ack: tuple[int, int, int] | None = None,
        *,
        ticket: Ticket,
    ) -> int:
        """Append a delta to the cursor's journal in this transaction; returns its version.

        The cursor row's version is bumped under its row lock (after the
        subscription's: the lock order of every writer). ``consumer_ack``: the delta is a
        consumer's acknowledgement, and this its highest message (ledger, entry, batch
        index), which raises the cursor's consumer-ack mark in the same statement.
        """
        return self.append_by_subscription(
            self._id, self.subscription, topic_partition, payload, consumer_ack, ticket=ticket
        )


@contextmanager
def locked_transaction(
    raw: Any,
    dialect: Dialect,
    topic: str,
    subscription: str,
    now_ms: int,
    *,
    flushed: bool = True,
) -> Iterator[SubscriptionTransaction]:
    """One transaction on ``raw`` (a pooled DBAPI connection) holding the subscription's row
    for dispatching; committed when the block ends, rolled back when it raises.
    ``flushed`` False (a dispatch's bookkeeping): the commit does not wait for the disk
    (:func:`~cursorops.core.store.cursor_door.opened`)."""
    txn = SubscriptionTransaction(raw, dialect, 0, subscription, now_ms)
    with opened(
        txn,
        flushed=flushed,
        begin=lambda: txn._lock(topic, flushed=flushed),
        clock=lambda: now_ms,
    ):
        yield txn


__all__ = [
    "BatchSizes",
    "ConsumerInfo",
    "JournalSince",
    "DispatchedColumns",
    "PendingColumns",
    "ReadPosition",
    "PendingInfo",
    "PendingKey",
    "SubscriptionTransaction",
    "highest_message",
    "locked_transaction",
]

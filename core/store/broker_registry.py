"""The cluster's brokers in the metadata store: who serves, in which life, who is dead.

A part of :class:`~cursorops.core.store.metadata.MetadataStore`. Several brokers share
one store, as Pulsar's share ZooKeeper and BookKeeper; each keeps one row here:

- **Registering** takes the row of the broker's id (its slot on its home) with a
  new ``epoch``: one more than the row's last, so every life of a broker has its
  own. A life is named by its :class:`Fence` (id and epoch); the consumers it
  registers have ids starting with :attr:`Fence.consumer_prefix`.
- **Beating**: a live broker writes its heartbeat time every beat. The write
  names its life; when it changes nothing, the life was declared dead (or a later
  life took the row) and the broker must stop serving as that life.
- **Declaring dead**: any broker that sees another's heartbeat older than the
  deadline, or on PostgreSQL another's session lock free (its process is gone:
  :meth:`BrokerRegistry.hold_life_lock`), sets that row ``dead`` (naming the life it
  saw, so a life that came back in between is untouched), then releases that life's
  consumers: what they held goes to live consumers at once. Releasing is idempotent and recorded
  (``released``), so a broker that dies in between leaves it to the next.
- **Bounded locks**: on PostgreSQL a broker's transaction idle for longer than the
  deadline is ended by the server (:meth:`BrokerRegistry.end_idle_transactions_after`),
  and the broker declaring a silent one dead ends what the server's timeout cannot (a
  process paused in the middle of a pipeline) and never waits longer than the deadline
  itself, so a broker paused while holding a row lock holds it no longer than it takes
  to be declared dead.
- **Fencing**: every write a broker makes as a life (an append's entry allocation,
  every subscription transaction: dispatch, acknowledgement, consumer change) reads
  its row in the same transaction and is refused unless the life is still live
  (:func:`check_fence`, ``FOR KEY SHARE`` on PostgreSQL; a declaration takes the row
  ``FOR UPDATE``, so it waits for a write in flight and a write after it sees it,
  while the heartbeat's plain update never waits for the writes). A paused broker that resumes
  after it was declared dead therefore appends and delivers nothing, in the
  spirit of BookKeeper's ledger fencing.

Times are each broker's wall clock in milliseconds: brokers on several machines
need clocks in step (NTP) to well within the deadline.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event, select, text, update

from cursorops.core.domain.errors import BrokerFencedError, MetadataStoreError
from cursorops.core.store.checks import check_label
from cursorops.core.store.engine import is_lock_timeout
from cursorops.core.store.statements import Statements
from cursorops.core.store.store_base import StoreBase
from cursorops.core.store.tables import BrokerRow
from cursorops.core.store.values import Fence

LIVE = "live"
DEAD = "dead"


@dataclass(frozen=True)
class Advertised:
    """What a lookup that lands on a broker answers: its URLs, by listener too."""

    broker_url: str
    broker_url_tls: str = ""
    web_url: str = ""
    listeners: dict[str, tuple[str, str]] | None = None
    """Listener name to (``pulsar://`` URL, ``pulsar+ssl://`` URL), in order."""


@dataclass(frozen=True)
class BrokerRecord:
    broker_id: str
    epoch: int
    state: str
    released: bool
    advertised: Advertised
    started_ms: int
    heartbeat_ms: int

    @property
    def fence(self) -> Fence:
        return Fence(self.broker_id, self.epoch)

    def live_at(self, now_ms: int, dead_after_ms: int) -> bool:
        """Live and beating: its last heartbeat is within ``dead_after_ms`` of ``now_ms``."""
        return self.state == LIVE and self.heartbeat_ms >= now_ms - dead_after_ms


def check_fence(statements: Statements, fence: Fence) -> None:
    """Refuse the caller's transaction unless ``fence``'s life is live (in that transaction)."""
    # KEY SHARE: a heartbeat (an UPDATE of other columns) never waits for it, while a
    # declaration, which takes the row FOR UPDATE first, waits for the writes in flight,
    # and a write after it reads the row it left.
    share = " FOR KEY SHARE" if statements.postgres else ""
    rows = statements.rows(
        f"SELECT state FROM brokers WHERE broker_id = ? AND epoch = ?{share}",
        (fence.broker_id, fence.epoch),
    )
    if not rows or rows[0][0] != LIVE:
        raise BrokerFencedError(
            f"Broker {fence.broker_id} (life {fence.epoch}) was declared dead by the cluster: "
            "it writes nothing more"
        )


def _life(fence: Fence, state: str | None = None) -> list[Any]:
    """The conditions that select ``fence``'s row while it is that life (in ``state``)."""
    condition = [BrokerRow.broker_id == fence.broker_id, BrokerRow.epoch == fence.epoch]
    if state is not None:
        condition.append(BrokerRow.state == state)
    return condition


def _lock_key(broker_id: str) -> int:
    """The advisory lock of ``broker_id``'s session: 64 bits of a hash of its id."""
    digest = hashlib.sha256(f"cursorops broker {broker_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _session_gone(session: Any, row: BrokerRow) -> bool:
    """Whether the session lock of ``row``'s broker is free: taken for this transaction
    only (released when it ends), so a free lock is seen and left free."""
    return bool(
        session.execute(
            text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": _lock_key(row.broker_id)}
        ).scalar()
    )


def _record(row: BrokerRow) -> BrokerRecord:
    listeners: dict[str, tuple[str, str]] | None = None
    if row.listeners:
        listeners = {name: (urls[0], urls[1]) for name, urls in row.listeners.items()}
    return BrokerRecord(
        row.broker_id,
        row.epoch,
        row.state,
        row.released,
        Advertised(row.broker_url, row.broker_url_tls, row.web_url, listeners),
        row.started_ms,
        row.heartbeat_ms,
    )


class BrokerRegistry(StoreBase):
    """The ``brokers`` table: registering, beating, declaring dead, releasing."""

    _life_lock: Any = None
    """The connection that holds this process's session lock (PostgreSQL), or None."""
    _idle_bound = False

    def end_idle_transactions_after(self, ms: int) -> None:
        """On PostgreSQL, have the server end a transaction of this store that stays idle
        longer than ``ms`` (``idle_in_transaction_session_timeout``): a broker paused
        inside a transaction would otherwise hold its row locks, and so stall the other
        brokers' dispatches and its own declaration as dead, for as long as it sleeps."""
        if not self._postgres or self._idle_bound:
            return
        self._idle_bound = True

        def on_connect(connection: Any, _record: object) -> None:
            with connection.cursor() as cursor:
                cursor.execute(f"SET idle_in_transaction_session_timeout = {int(ms)}")
            connection.commit()

        event.listen(self._engine, "connect", on_connect)
        self._engine.dispose()  # the pooled connections are replaced by set ones

    def register_broker(self, broker_id: str, advertised: Advertised, now_ms: int) -> Fence:
        """Start a new life of ``broker_id``: live, beating now; its :class:`Fence`. Any
        earlier life of it is fenced from here on."""
        check_label("broker id", broker_id)
        values: dict[str, Any] = {
            "state": LIVE,
            "released": False,
            "broker_url": advertised.broker_url,
            "broker_url_tls": advertised.broker_url_tls,
            "web_url": advertised.web_url,
            "listeners": {k: list(v) for k, v in (advertised.listeners or {}).items()},
            "started_ms": now_ms,
            "heartbeat_ms": now_ms,
        }
        with self._session(write=True, conflict=f"Broker {broker_id} registered meanwhile") as s:
            row = s.get(BrokerRow, broker_id, with_for_update=self._postgres)
            if row is None:
                s.add(BrokerRow(broker_id=broker_id, epoch=1, **values))
                return Fence(broker_id, 1)
            epoch = row.epoch + 1
            s.execute(
                update(BrokerRow)
                .where(BrokerRow.broker_id == broker_id)
                .values(epoch=epoch, **values)
            )
            return Fence(broker_id, epoch)

    def beat(self, fence: Fence, now_ms: int) -> bool:
        """Write the life's heartbeat; False when it is not live any more (fenced)."""
        with self._session(write=True) as session:
            result = session.execute(
                update(BrokerRow).where(*_life(fence, LIVE)).values(heartbeat_ms=now_ms)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def leave(self, fence: Fence) -> None:
        """End the life cleanly: dead, nothing left to release (its consumers closed)."""
        with self._session(write=True) as session:
            session.execute(
                update(BrokerRow).where(*_life(fence)).values(state=DEAD, released=True)
            )

    def brokers(self) -> list[BrokerRecord]:
        """Every broker that ever registered, by id."""
        with self._session(write=False) as session:
            rows = session.scalars(select(BrokerRow).order_by(BrokerRow.broker_id))
            return [_record(row) for row in rows]

    def hold_life_lock(self, broker_id: str) -> None:
        """On PostgreSQL, hold ``broker_id``'s session lock for as long as this process
        lives: a dedicated connection takes an advisory lock on it, which the server
        drops the moment that connection goes (the process killed, its machine gone
        from the network once TCP notices). The others read a free lock as a dead
        broker at once (:meth:`declare_dead`), without waiting for its heartbeat to
        age: PostgreSQL's sessions are what ZooKeeper's ephemeral nodes are to Pulsar.
        Taken before the broker registers, so a new life is never seen without it."""
        if not self._postgres or self._life_lock is not None:
            return
        check_label("broker id", broker_id)
        connection = self._engine.raw_connection()
        try:
            connection.driver_connection.autocommit = True  # type: ignore[union-attr]
            with connection.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
                cursor.execute("SELECT pg_advisory_lock(%s)", (_lock_key(broker_id),))
        except BaseException:
            connection.invalidate()
            raise
        self._life_lock = connection

    def release_life_lock(self) -> None:
        """Let the session lock go (the store closing: its broker is gone)."""
        connection = self._life_lock
        if connection is not None:
            self._life_lock = None
            connection.invalidate()  # closed, never back in the pool

    def declare_dead(self, now_ms: int, dead_after_ms: int, me: str = "") -> list[Fence]:
        """Set ``dead`` every live broker whose heartbeat is older than ``dead_after_ms``,
        and on PostgreSQL every live broker but ``me`` whose session lock is free (its
        process is gone: :meth:`hold_life_lock`); the lives this call declared (another
        broker may have declared some first)."""
        cutoff = now_ms - dead_after_ms
        found: list[tuple[Fence, bool]] = []
        with self._session(write=False) as session:
            for row in session.scalars(select(BrokerRow).where(BrokerRow.state == LIVE)):
                fence = Fence(row.broker_id, row.epoch)
                if row.heartbeat_ms < cutoff:
                    found.append((fence, True))
                elif self._postgres and row.broker_id != me and _session_gone(session, row):
                    found.append((fence, False))
        declared = []
        for fence, silent in found:
            condition = _life(fence, LIVE)
            if silent:
                condition.append(BrokerRow.heartbeat_ms < cutoff)
                if self._postgres:
                    self._end_stuck_transactions(fence.broker_id, dead_after_ms)
            try:
                with self._session(write=True) as session:
                    if self._postgres:
                        # A beat never waits longer than a life may stay silent.
                        session.execute(text(f"SET LOCAL lock_timeout = {int(dead_after_ms)}"))
                    # FOR UPDATE: waits for this life's writes in flight (their KEY SHARE).
                    locked = session.scalars(
                        select(BrokerRow.broker_id).where(*condition).with_for_update()
                    ).first()
                    if locked is None:
                        continue
                    result = session.execute(
                        update(BrokerRow).where(*condition).values(state=DEAD, released=False)
                    )
                    if result.rowcount:  # type: ignore[attr-defined]
                        declared.append(fence)
            except MetadataStoreError as exc:
                if exc.__cause__ is None or not is_lock_timeout(exc.__cause__):
                    raise
                # Still held: the next beat ends what holds it and declares again.
        return declared

    def _end_stuck_transactions(self, broker_id: str, dead_after_ms: int) -> None:
        """On PostgreSQL, end the transactions of a silent broker's process that have not
        moved for ``dead_after_ms``: found by its session lock's holder, whose
        ``application_name`` every session of that process's store shares
        (:func:`~cursorops.core.store.engine.session_tag`).

        ``idle_in_transaction_session_timeout`` ends most of them, but not one paused in
        the middle of a pipeline (the driver's ``executemany``): the server waits for the
        rest of it with no timer, holding its row locks, and the declaration, which waits
        for this life's writes in flight, would wait as long as the process sleeps. What a
        declared life wrote after this is refused by its fence anyway. A role not allowed to
        end another's sessions leaves them to the server's own timeouts."""
        key = _lock_key(broker_id) & 0xFFFF_FFFF_FFFF_FFFF
        try:
            with self._session(write=True) as session:
                session.execute(
                    text(
                        "SELECT pg_terminate_backend(stuck.pid) FROM pg_locks held "
                        "JOIN pg_stat_activity holder ON holder.pid = held.pid "
                        "JOIN pg_stat_activity stuck "
                        "ON stuck.application_name = holder.application_name "
                        "WHERE held.locktype = 'advisory' AND held.granted "
                        "AND held.classid = CAST(:high AS oid) "
                        "AND held.objid = CAST(:low AS oid) AND held.objsubid = 1 "
                        "AND holder.application_name LIKE 'cursorops %' "
                        "AND stuck.pid <> holder.pid AND stuck.pid <> pg_backend_pid() "
                        "AND stuck.xact_start IS NOT NULL "
                        "AND stuck.state_change < now() - make_interval(secs => :seconds)"
                    ),
                    {"high": key >> 32, "low": key & 0xFFFF_FFFF, "seconds": dead_after_ms / 1000},
                )
        except MetadataStoreError:
            pass

    def unreleased(self) -> list[Fence]:
        """Dead lives whose consumers are not released yet."""
        with self._session(write=False) as session:
            rows = session.scalars(
                select(BrokerRow).where(BrokerRow.state == DEAD, BrokerRow.released.is_(False))
            )
            return [Fence(row.broker_id, row.epoch) for row in rows]

    def mark_released(self, fence: Fence) -> None:
        with self._session(write=True) as session:
            session.execute(update(BrokerRow).where(*_life(fence, DEAD)).values(released=True))


__all__ = [
    "Advertised",
    "BrokerRecord",
    "BrokerRegistry",
    "DEAD",
    "Fence",
    "LIVE",
    "check_fence",
]

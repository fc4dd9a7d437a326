"""Cursor state: the one module that reads and writes the tables ``cursors`` and ``cursor_deltas``.

A cursor is stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"). Everything that touches that form is here: creating a
cursor, reading it (the snapshot and the deltas after it, or only the deltas a
reader has not seen), replaying what was read into a
:class:`~core.acks.cursor.CursorState`, appending deltas under new versions,
compacting the journal into a snapshot, and the row locks that serialize the
writers. Every other module (the dispatcher's locked transaction, the metadata
store's unit of work that skip, reset, undo, redrive, clear-backlog and unsubscribe
write in) calls :class:`CursorStates` inside a transaction its caller owns.
``tests/core/store/test_journal_writers.py`` fails if another
module writes these tables.

One SQL style: plain statements with ``?`` placeholders, run on the caller's
transaction through :class:`Statements`: a DBAPI cursor for the dispatcher (its
dozen statements per dispatch cost less without SQLAlchemy's execution layer),
a SQLAlchemy connection or session for everyone else. The same text serves
SQLite and PostgreSQL; only the lock clauses and the one-statement group
append differ, and are chosen here.

Locking. A writer bumps the cursor row's ``version`` (``UPDATE ... RETURNING``)
before inserting its deltas under the versions it took: the row lock serializes
writers, so no version is taken twice and no delta is lost. A reader that will
decide a write from what it read (a skip under its locks) reads with
``lock="update"``; a consistent read with ``lock="share"``. Writers of several
cursors take them in the order (topic partition, subscription). SQLite has one
writer at a time (``BEGIN IMMEDIATE``), so the clauses are PostgreSQL's only.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core.acks import cursor_codec
from core.acks.cursor import CursorState
from core.errors import InvalidArgumentError, SubscriptionNotFoundError
from core.ids.position import Position
from core.store.records import CursorRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    from core.acks.ledger_layout import LedgerLayout

Lock = Literal["share", "update"]

COMPACT_AFTER_DELTAS = 512
"""Journal length after which the dispatcher folds a cursor's journal into a new snapshot,
when it has read the cursor anyway."""

Cursor = tuple[str, str]
"""``(topic partition, subscription)``, canonical."""

_BY_KEYS = (
    "cursors.topic_partition = ? AND cursors.subscription_id = ("
    "SELECT s.id FROM subscriptions s JOIN topic_partitions p ON p.topic = s.topic "
    "WHERE p.name = ? AND s.name = ?)"
)
"""The cursor of a partition and a subscription name, by unique keys only."""

_READ = (
    "SELECT cursors.id, cursors.snapshot, cursors.snapshot_version, cursors.version "
    f"FROM cursors WHERE {_BY_KEYS}"
)
_LOCK_CLAUSE: Mapping[Lock, str] = {"share": " FOR SHARE", "update": " FOR UPDATE"}
_DELTAS_AFTER = (
    "SELECT version, payload FROM cursor_deltas WHERE cursor_id = ? AND version > ? "
    "ORDER BY version"
)
_BUMP = "UPDATE cursors SET version = version + ? WHERE id = ? RETURNING version"
_BUMP_BY_KEYS = f"UPDATE cursors SET version = version + ? WHERE {_BY_KEYS} RETURNING id, version"
_BUMP_BY_SUBSCRIPTION = (
    "UPDATE cursors SET version = version + ? WHERE subscription_id = ? AND topic_partition = ? "
    "RETURNING id, version"
)
_BUMP_AND_INSERT = (
    f"WITH bumped AS (UPDATE cursors SET version = version + ? WHERE {_BY_KEYS} "
    "RETURNING id, version) "
    "INSERT INTO cursor_deltas (cursor_id, version, payload) "
    "SELECT bumped.id, bumped.version - ? + d.number, d.payload "
    "FROM bumped, unnest(?::bytea[]) WITH ORDINALITY AS d(payload, number) "
    "RETURNING version"
)
"""PostgreSQL: bump and insert in one statement (a data-modifying CTE)."""
_BUMP_AND_INSERT_EACH = (
    "WITH d AS (SELECT * FROM unnest(?::bigint[], ?::bytea[]) WITH ORDINALITY "
    "AS d(id, payload, ord)), "
    "n AS (SELECT id, count(*) AS k FROM d GROUP BY id), "
    "bumped AS (UPDATE cursors SET version = cursors.version + n.k FROM n "
    "WHERE cursors.id = n.id RETURNING cursors.id, cursors.version, n.k) "
    "INSERT INTO cursor_deltas (cursor_id, version, payload) "
    "SELECT bumped.id, bumped.version - bumped.k "
    "+ row_number() OVER (PARTITION BY d.id ORDER BY d.ord), d.payload "
    "FROM bumped JOIN d ON d.id = bumped.id"
)
"""PostgreSQL: deltas to each of several cursors, bumped and inserted in one statement (a
cursor's deltas in the order given)."""
_INSERT_DELTA = "INSERT INTO cursor_deltas (cursor_id, version, payload) VALUES (?, ?, ?)"
_CREATE = (
    "INSERT INTO cursors (subscription_id, topic_partition, snapshot, snapshot_version, version) "
    "VALUES (?, ?, ?, 0, 0)"
)
_SET_SNAPSHOT = "UPDATE cursors SET snapshot = ?, snapshot_version = ? WHERE id = ?"
_FOLD_AND_BUMP = (
    "UPDATE cursors SET snapshot = ?, snapshot_version = ?, version = version + ? "
    "WHERE id = ? RETURNING version"
)
_DROP_THROUGH = "DELETE FROM cursor_deltas WHERE cursor_id = ? AND version <= ?"
_SIZES = (
    "SELECT cursors.id, length(cursors.snapshot), (SELECT coalesce(sum(length(d.payload)), 0) "
    f"FROM cursor_deltas d WHERE d.cursor_id = cursors.id) FROM cursors WHERE {_BY_KEYS}"
)
_SINCE = (
    "SELECT c.id, c.snapshot_version, c.version, r.ledger_id, r.entry_id, r.cursor_version "
    "FROM cursors c LEFT OUTER JOIN read_positions r "
    "ON r.subscription_id = c.subscription_id AND r.topic_partition = c.topic_partition "
    "WHERE c.subscription_id = ? AND c.topic_partition = ?"
)
_SNAPSHOT = "SELECT snapshot FROM cursors WHERE id = ?"


class Statements(Protocol):
    """Runs ``?``-placeholder statements in the caller's transaction."""

    def rows(self, sql: str, parameters: tuple[object, ...]) -> Sequence[Sequence[Any]]: ...

    def execute(self, sql: str, parameters: tuple[object, ...]) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    def execute_many(self, sql: str, parameters: Sequence[tuple[object, ...]]) -> None:
        """Run a statement once per parameter tuple (the driver's ``executemany``)."""
        ...


@functools.cache
def format_style(sql: str) -> str:
    """A statement written with ``?`` placeholders, in the ``%s`` style of psycopg."""
    return sql.replace("?", "%s")


class ConnectionStatements:
    """:class:`Statements` on a SQLAlchemy connection (or a session's), in its transaction."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._qmark = connection.dialect.paramstyle == "qmark"

    @classmethod
    def of(cls, session: Session) -> ConnectionStatements:
        return cls(session.connection())

    def _sql(self, sql: str) -> str:
        return sql if self._qmark else format_style(sql)

    def rows(self, sql: str, parameters: tuple[object, ...]) -> Sequence[Sequence[Any]]:
        return self._connection.exec_driver_sql(self._sql(sql), parameters).all()

    def execute(self, sql: str, parameters: tuple[object, ...]) -> int:
        result = self._connection.exec_driver_sql(self._sql(sql), parameters)
        return int(result.rowcount)

    def execute_many(self, sql: str, parameters: Sequence[tuple[object, ...]]) -> None:
        self._connection.exec_driver_sql(self._sql(sql), list(parameters))


@dataclass(frozen=True)
class ReadPosition:
    """The dispatcher's read position on a partition (:mod:`core.store.dispatch_state`)."""

    settled_through: Position
    """Every message at or before it is acknowledged or held by a consumer."""
    cursor_version: int
    """The cursor's journal version when it was set."""


@dataclass(frozen=True)
class JournalSince:
    """A cursor's journal read from a known version on (see :meth:`CursorStates.since`)."""

    cursor_id: int
    reloaded: bool
    """The snapshot was read: start from it, not from the caller's state."""
    snapshot: bytes | None
    snapshot_version: int
    deltas: list[tuple[int, bytes]]
    """(version, payload) after the caller's version (or after the snapshot), in order."""
    version: int
    read_position: ReadPosition | None
    """The subscription's read position on the partition, if one was stored. Read with the
    cursor because it is valid only against the cursor version it records."""


def missing(topic_partition: str, subscription: str) -> SubscriptionNotFoundError:
    return SubscriptionNotFoundError.of(topic_partition, subscription)


class CursorStates:
    """Cursors' snapshots and journals, inside one transaction of the caller."""

    def __init__(self, statements: Statements, *, postgres: bool) -> None:
        self._run = statements
        self._postgres = postgres

    # -- creating -------------------------------------------------------------

    def create(self, subscription_id: int, snapshots: Mapping[str, bytes]) -> None:
        """A new subscription's cursor on each partition, at version 0 with its snapshot."""
        for partition, snapshot in snapshots.items():
            self._run.execute(_CREATE, (subscription_id, partition, snapshot))

    # -- reading --------------------------------------------------------------

    def read(
        self, topic_partition: str, subscription: str, *, lock: Lock
    ) -> tuple[int, CursorRecord]:
        """The cursor's id and its snapshot with every later delta (raises when it is missing).

        ``lock="update"`` holds the row until the transaction ends: read it before
        appending what was decided from it.
        """
        clause = _LOCK_CLAUSE[lock] if self._postgres else ""
        rows = self._run.rows(_READ + clause, (topic_partition, topic_partition, subscription))
        if not rows:
            raise missing(topic_partition, subscription)
        cursor_id, snapshot, snapshot_version, version = rows[0]
        deltas = self._run.rows(_DELTAS_AFTER, (cursor_id, snapshot_version))
        record = CursorRecord(
            None if snapshot is None else bytes(snapshot),
            int(snapshot_version),
            [bytes(payload) for _, payload in deltas],
            int(version),
        )
        return int(cursor_id), record

    def read_many(
        self, topic: str, subscription: str, partitions: Sequence[str], *, lock: Lock
    ) -> list[tuple[int, CursorRecord]]:
        """:meth:`read` of several partitions of canonical ``topic``, in ``partitions``' order
        (raises when one is missing), in two statements whatever their number.

        The rows are locked by one statement, in the order of the partitions' names (the
        writers' order; ``COLLATE "C"`` compares as Python does), then every delta after
        each snapshot is read by a second one: a statement that starts after the locks
        sees every delta committed before them.
        """
        if not partitions:
            return []
        marks = ", ".join("?" * len(partitions))
        order = ' COLLATE "C"' if self._postgres else ""
        clause = _LOCK_CLAUSE[lock] if self._postgres else ""
        sql = (
            "SELECT cursors.id, cursors.topic_partition, cursors.snapshot, "
            "cursors.snapshot_version, cursors.version FROM cursors "
            "WHERE cursors.subscription_id = (SELECT s.id FROM subscriptions s "
            f"WHERE s.topic = ? AND s.name = ?) AND cursors.topic_partition IN ({marks}) "
            f"ORDER BY cursors.topic_partition{order}{clause}"
        )
        rows = {str(row[1]): row for row in self._run.rows(sql, (topic, subscription, *partitions))}
        for name in partitions:
            if name not in rows:
                raise missing(name, subscription)
        after = " OR ".join("(cursor_id = ? AND version > ?)" for _ in partitions)
        bounds = [v for name in partitions for v in (rows[name][0], rows[name][3])]
        deltas: dict[int, list[bytes]] = {}
        for cursor_id, _, payload in self._run.rows(
            "SELECT cursor_id, version, payload FROM cursor_deltas "
            f"WHERE {after} ORDER BY cursor_id, version",
            tuple(bounds),
        ):
            deltas.setdefault(int(cursor_id), []).append(bytes(payload))
        found = []
        for name in partitions:
            cursor_id, _, snapshot, snapshot_version, version = rows[name]
            record = CursorRecord(
                None if snapshot is None else bytes(snapshot),
                int(snapshot_version),
                deltas.get(int(cursor_id), []),
                int(version),
            )
            found.append((int(cursor_id), record))
        return found

    def since(
        self, subscription_id: int, topic_partition: str, known: tuple[int, int, int] | None
    ) -> JournalSince:
        """The journal after ``known`` = (cursor id, snapshot version, version) a reader holds.

        Only the deltas the reader has not seen are read while its snapshot is
        still the stored one; otherwise the snapshot and every later delta. The
        caller holds the subscription's lock (the dispatcher's transaction).
        """
        # PostgreSQL: the cursor row stays key-share locked to the end of the caller's
        # transaction. A compaction (FOR UPDATE) cannot then commit between this statement
        # and the reads of the snapshot and deltas below: the snapshot read would be the old
        # one and the deltas it folded would be gone, and the state missing them would be
        # compacted over the journal. Appends (a version bump, no key change) do not wait.
        sql = _SINCE + (" FOR KEY SHARE OF c" if self._postgres else "")
        row = self._run.rows(sql, (subscription_id, topic_partition))
        if not row:
            raise SubscriptionNotFoundError(f"No cursor on topic '{topic_partition}'")
        cursor_id, snapshot_version, version = int(row[0][0]), int(row[0][1]), int(row[0][2])
        first = row[0]
        read = None if first[3] is None else ReadPosition(Position(first[3], first[4]), first[5])
        fresh = (
            known is None
            or known[0] != cursor_id
            or known[1] != snapshot_version
            or known[2] > version
        )
        after = snapshot_version if fresh or known is None else known[2]
        snapshot = None
        if fresh:
            stored = self._run.rows(_SNAPSHOT, (cursor_id,))[0][0]
            snapshot = None if stored is None else bytes(stored)
        deltas: Sequence[Sequence[Any]] = []
        if version > after:
            deltas = self._run.rows(_DELTAS_AFTER, (cursor_id, after))
        return JournalSince(
            cursor_id,
            fresh,
            snapshot,
            snapshot_version,
            [(int(v), bytes(p)) for v, p in deltas],
            version,
            read,
        )

    def sizes(self, topic_partition: str, subscription: str) -> tuple[int, int]:
        """``(snapshot bytes, total bytes of the journal's deltas)``."""
        rows = self._run.rows(_SIZES, (topic_partition, topic_partition, subscription))
        if not rows:
            raise missing(topic_partition, subscription)
        return int(rows[0][1] or 0), int(rows[0][2] or 0)

    # -- writing --------------------------------------------------------------

    def append(self, cursor_id: int, payloads: Sequence[bytes]) -> int:
        """Append ``payloads`` to a cursor found by :meth:`read`; the last new version."""
        version = int(self._run.rows(_BUMP, (len(payloads), cursor_id))[0][0])
        self._insert(cursor_id, version, payloads)
        return version

    def append_each(self, appends: Sequence[tuple[int, Sequence[bytes]]]) -> None:
        """Deltas to each of several cursors found by :meth:`read_many` (their rows locked),
        in the order given; PostgreSQL: one statement for all of them."""
        appends = [(cursor_id, payloads) for cursor_id, payloads in appends if payloads]
        if not appends:
            return
        ids = [cursor_id for cursor_id, _ in appends]
        if len(set(ids)) != len(ids):
            raise InvalidArgumentError("One entry per cursor: a cursor is listed twice")
        if not self._postgres or len(appends) == 1:
            for cursor_id, payloads in appends:
                self.append(cursor_id, payloads)
            return
        flat = [(cursor_id, p) for cursor_id, payloads in appends for p in payloads]
        self._run.execute(_BUMP_AND_INSERT_EACH, ([i for i, _ in flat], [p for _, p in flat]))

    def append_to(
        self, topic_partition: str, subscription: str, payloads: Sequence[bytes]
    ) -> int | None:
        """Append ``payloads`` to a cursor named by its keys; the last new version, or None
        when there is no such cursor. PostgreSQL: one statement."""
        n = len(payloads)
        if self._postgres:
            versions = self._run.rows(
                _BUMP_AND_INSERT,
                (n, topic_partition, topic_partition, subscription, n, list(payloads)),
            )
            return max((int(v) for (v,) in versions), default=None)
        bumped = self._run.rows(_BUMP_BY_KEYS, (n, topic_partition, topic_partition, subscription))
        if not bumped:
            return None
        cursor_id, version = int(bumped[0][0]), int(bumped[0][1])
        self._insert(cursor_id, version, payloads)
        return version

    def append_for_subscription(
        self, subscription_id: int, subscription: str, topic_partition: str, payload: bytes
    ) -> int:
        """Append one delta to the cursor of a subscription whose row the caller has locked
        (the dispatcher's transaction); its version."""
        bumped = self._run.rows(_BUMP_BY_SUBSCRIPTION, (1, subscription_id, topic_partition))
        if not bumped:
            raise missing(topic_partition, subscription)
        cursor_id, version = int(bumped[0][0]), int(bumped[0][1])
        self._insert(cursor_id, version, [payload])
        return version

    def _insert(self, cursor_id: int, last_version: int, payloads: Sequence[bytes]) -> None:
        first = last_version - len(payloads) + 1
        if len(payloads) == 1:
            self._run.execute(_INSERT_DELTA, (cursor_id, first, payloads[0]))
            return
        rows = [(cursor_id, first + offset, p) for offset, p in enumerate(payloads)]
        self._run.execute_many(_INSERT_DELTA, rows)

    def compact(
        self, topic_partition: str, subscription: str, snapshot: bytes, through_version: int
    ) -> None:
        """Store ``snapshot`` as the state as of ``through_version``; drop the deltas it covers.

        Under the cursor's row lock; deltas after ``through_version`` stay. A
        snapshot older than the stored one is ignored: the stored one already
        includes everything it has.
        """
        cursor_id, record = self._locked_versions(topic_partition, subscription)
        if through_version > record[1]:
            raise InvalidArgumentError(
                f"Cannot compact cursor '{subscription}' on '{topic_partition}' through version "
                f"{through_version}: its journal ends at version {record[1]}"
            )
        if through_version < record[0]:
            return
        self._run.execute(_SET_SNAPSHOT, (snapshot, through_version, cursor_id))
        self._run.execute(_DROP_THROUGH, (cursor_id, through_version))

    def fold_and_append(
        self, cursor_id: int, snapshot: bytes, through_version: int, payloads: Sequence[bytes]
    ) -> None:
        """:meth:`compact`, then :meth:`append`, for a cursor this transaction read with
        ``lock="update"``: its row is locked already, ``through_version`` is the version read.

        One UPDATE of the row for both. PostgreSQL checks the foreign keys of a row updated
        a second time in one transaction: that check takes a key-share lock on the
        subscription's row, which a dispatcher holds for update while it waits for this
        cursor (a deadlock).
        """
        if payloads:
            bumped = self._run.rows(
                _FOLD_AND_BUMP, (snapshot, through_version, len(payloads), cursor_id)
            )
            self._run.execute(_DROP_THROUGH, (cursor_id, through_version))
            self._insert(cursor_id, int(bumped[0][0]), payloads)
            return
        self._run.execute(_SET_SNAPSHOT, (snapshot, through_version, cursor_id))
        self._run.execute(_DROP_THROUGH, (cursor_id, through_version))

    def _locked_versions(
        self, topic_partition: str, subscription: str
    ) -> tuple[int, tuple[int, int]]:
        sql = (
            f"SELECT cursors.id, cursors.snapshot_version, cursors.version FROM cursors "
            f"WHERE {_BY_KEYS}" + (" FOR UPDATE" if self._postgres else "")
        )
        rows = self._run.rows(sql, (topic_partition, topic_partition, subscription))
        if not rows:
            raise missing(topic_partition, subscription)
        return int(rows[0][0]), (int(rows[0][1]), int(rows[0][2]))


# -- replaying ----------------------------------------------------------------


class Replays:
    """The cursor states this process replayed last: a snapshot's bytes, the deltas
    applied after it, and the state they make (merged, not yet normalized).

    Every skip replays the cursors it touches from their stored snapshot and
    journal, and a cursor that random skips left with many partly acknowledged
    batches decodes slowly (a Python object per batch): over the REST benchmark,
    most of a skip's CPU. That state is a function of the bytes alone, so a replay
    whose snapshot is a kept one and whose deltas start with the kept deltas goes
    on from the kept state and decodes only the deltas after them. No writer can
    make a kept state stale: a new snapshot is new bytes, and a journal only grows
    until it is folded into one. Callers get a copy; the kept state is never
    handed out. Bounded by the bytes kept, least recently used out first;
    thread-safe.
    """

    def __init__(self, max_bytes: int) -> None:
        self._kept: OrderedDict[bytes, tuple[tuple[bytes, ...], CursorState, int]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def replay(self, snapshot: bytes | None, deltas: Sequence[bytes]) -> tuple[CursorState, int]:
        """``snapshot`` (None: an empty cursor) with every delta merged in order, a
        replacing delta starting over from itself, not normalized, as a copy the caller
        owns; and how many of ``deltas`` run through the last replacing one (0 when none
        replaces): the caller names the reset it started over from."""
        key = b"" if snapshot is None else snapshot
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        state, start, replaced = None, 0, 0
        if kept is not None and tuple(deltas[: len(kept[0])]) == kept[0]:
            state, start, replaced = kept[1].copy(), len(kept[0]), kept[2]
        if state is None:
            state = CursorState() if snapshot is None else cursor_codec.decode(snapshot)[0]
        for index in range(start, len(deltas)):
            delta, replace = cursor_codec.decode(deltas[index])
            if replace:
                state, replaced = delta, index + 1
            else:
                state.merge(delta, None)
        if kept is None or (start < len(deltas) and len(deltas) >= len(kept[0])):
            self._keep(key, tuple(deltas), state.copy(), replaced)
        return state, replaced

    def _keep(
        self, key: bytes, deltas: tuple[bytes, ...], state: CursorState, replaced: int
    ) -> None:
        size = len(key) + sum(len(delta) for delta in deltas)
        if size > self._max_bytes:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= len(key) + sum(len(delta) for delta in old[0])
            self._kept[key] = (deltas, state, replaced)
            self._bytes += size
            while self._bytes > self._max_bytes:
                dropped, (dropped_deltas, _, _) = self._kept.popitem(last=False)
                self._bytes -= len(dropped) + sum(len(delta) for delta in dropped_deltas)


REPLAYS = Replays(max_bytes=16 * 1024 * 1024)
"""This process's replayed cursors (16 MiB of snapshot and delta bytes; the states take a
few times that in memory)."""


def replay(record: CursorRecord, layout: LedgerLayout) -> CursorState:
    """The state a stored record describes: snapshot, then every later delta."""
    state, _ = replay_since(None, None, record.snapshot, enumerate(record.deltas, 1), layout)
    return state


def replay_since(
    state: CursorState | None,
    last_reset: int | None,
    snapshot: bytes | None,
    deltas: Iterable[tuple[int, bytes]],
    layout: LedgerLayout,
) -> tuple[CursorState, int]:
    """A state carried forward over ``(version, payload)`` deltas: ``(state, last reset)``.

    ``state`` None starts from ``snapshot`` (or an empty cursor); a known state is
    carried on from where its reader left it. A replacing delta (a reset) starts
    over from itself; ``last reset`` is the version of the newest one seen (0
    when none), for readers whose cached positions a reset voids.
    """
    if state is None:
        # From the snapshot: the whole journal after it, through what this process kept.
        listed = list(deltas)
        state, replaced = REPLAYS.replay(snapshot, [payload for _, payload in listed])
        state.normalize(layout)
        return state, listed[replaced - 1][0] if replaced else 0
    last_reset = last_reset or 0
    for version, payload in deltas:
        delta, replace = cursor_codec.decode(payload)
        if replace:
            state, last_reset = delta, version
            state.normalize(layout)
        else:
            state.merge(delta, layout)
    return state, last_reset


__all__ = [
    "COMPACT_AFTER_DELTAS",
    "REPLAYS",
    "ConnectionStatements",
    "CursorStates",
    "JournalSince",
    "Lock",
    "ReadPosition",
    "Replays",
    "Statements",
    "format_style",
    "missing",
    "replay",
    "replay_since",
]

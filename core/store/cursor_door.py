"""The one door for cursor changes: :class:`CursorTransaction`.

In Pulsar a subscription owns one ``ManagedCursor``, and every acknowledgement,
skip and reset goes through it. Here every change of a cursor is one
:class:`CursorTransaction`: a consumer's acknowledgement (individual or
cumulative) and a dispatch's bookkeeping (a
:class:`~cursorops.core.store.dispatch_state.SubscriptionTransaction` is this transaction
with the dispatcher's tables), a skip (by ids, matching,
``skip -n``, clear-backlog), a reset or seek, an undo, a redrive, creating and
deleting a subscription, and folding a journal into a snapshot. The transaction
takes the subscription's row lock, reads the cursors it decides from under their
row locks, appends its deltas, and records its audit record and an approved
plan record's claim, all committed once, or none of it.

A cursor is stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"). This module is the only one that writes ``cursors`` and
``cursor_deltas`` or reads the journal (``tests/core/store/test_journal_writers.py``);
:mod:`cursorops.core.store.cursor_state` replays what it reads.

One SQL idiom: plain statements with ``?`` placeholders on the transaction's own
pooled DBAPI connection, begun and committed by the driver. A dispatch is a
dozen small statements; SQLAlchemy's connection, begin and commit around them
cost about three times a small transaction's own time (docs/decisions/). The
same text serves SQLite and PostgreSQL; only the lock clauses and the
one-statement group appends differ, and are chosen here.

Locking, one rule (docs/decisions/, "One door for cursor changes"): a
transaction locks each subscription it changes before any of its cursors, and the
cursors in the order of their partitions' names (``COLLATE "C"``, Python's
order); subscriptions in the order (topic, name). The subscription's row is held
as :class:`Hold` says: shared by cursor moves, exclusive among dispatches,
exclusive against everything for a deletion. SQLite has one writer at a time
(``BEGIN IMMEDIATE``), so the clauses are PostgreSQL's only.

The approval rule (:mod:`cursorops.core.store.cursor_ticket`): every writing method takes
the :class:`~cursorops.core.store.cursor_ticket.Ticket` that entitles it, and on a namespace
that requires approval the door admits a move only with an approved plan record claimed in
the same transaction, or as a consumer's acknowledgement of messages pending for it (which
the dispatcher's transaction checks). A refused write raises
:class:`~cursorops.core.domain.errors.CursorMoveRefusedError`; the transaction is rolled back, and
the refusal is logged and recorded in the audit log (kind ``refused-cursor-move``) in a
transaction of its own. The namespace's policy is read with the subscription's lock, in the
same statement, so a dispatch pays no statement for it.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from cursorops.core.domain.errors import (
    AlreadyExistsError,
    CursorMoveRefusedError,
    InvalidArgumentError,
    MetadataStoreError,
    SubscriptionBusyError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store import audit_log, plan_records
from cursorops.core.store.cursor_state import JournalSince, ReadPosition, missing
from cursorops.core.store.cursor_ticket import Ticket, TicketKind
from cursorops.core.store.engine import is_unique_violation
from cursorops.core.store.entry_allocation import allocated_entries
from cursorops.core.store.statements import Statements, format_style
from cursorops.core.store.values import Allocation, AuditEntry, AuditRecord, CursorRecord, TopicInfo

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect

log = logging.getLogger(__name__)

REFUSED = "refused-cursor-move"
"""The audit kind of a write the door refused on a namespace that requires approval."""

COMPACT_AFTER_DELTAS = 512
"""Journal length after which a dispatch folds a cursor's journal into a new snapshot,
when it has read the cursor anyway."""


class Hold(enum.Enum):
    """How a cursor transaction holds a subscription's row (PostgreSQL's row lock modes)."""

    MOVE = " FOR KEY SHARE"
    """Cursor moves (skip, reset, undo, redrive, a fold): side by side with each other and
    with a dispatch; they meet at the cursor rows they share."""
    DISPATCH = " FOR NO KEY UPDATE"
    """A dispatch, an acknowledgement, a consumer's change: one at a time per subscription
    (they change its consumers, pending messages and read positions), beside cursor moves."""
    REMOVE = " FOR UPDATE"
    """Deleting the subscription: waits for every transaction holding it, and every later
    one waits for it (and then finds no subscription)."""


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
_NEWER = (
    "(consumer_ack_ledger_id IS NULL OR (consumer_ack_ledger_id, consumer_ack_entry_id, "
    "consumer_ack_batch_index) < (?, ?, ?))"
)
_BUMP_AND_MARK_BY_SUBSCRIPTION = (
    "UPDATE cursors SET version = version + ?, "
    f"consumer_ack_ledger_id = CASE WHEN {_NEWER} THEN ? ELSE consumer_ack_ledger_id END, "
    f"consumer_ack_entry_id = CASE WHEN {_NEWER} THEN ? ELSE consumer_ack_entry_id END, "
    f"consumer_ack_batch_index = CASE WHEN {_NEWER} THEN ? ELSE consumer_ack_batch_index END "
    "WHERE subscription_id = ? AND topic_partition = ? RETURNING id, version"
)
"""A consumer's acknowledgement: the bump, and the consumer-ack mark raised to the message
given when it is further on (every SET reads the row as it was)."""
_FORGET_CONSUMER_ACK = (
    "UPDATE cursors SET consumer_ack_ledger_id = NULL, consumer_ack_entry_id = NULL, "
    "consumer_ack_batch_index = NULL WHERE id = ?"
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
_SUBSCRIPTION = "SELECT id FROM subscriptions WHERE topic = ? AND name = ?"
_POLICY = "SELECT skip_requires_approval FROM namespace_policies WHERE namespace = ?"
_SUBSCRIPTION_AND_POLICY = f"SELECT id, ({_POLICY}) FROM subscriptions WHERE topic = ? AND name = ?"
"""The subscription's id and its namespace's approval flag, in the statement that locks it
(a scalar sub-select locks nothing)."""


@functools.lru_cache(maxsize=4096)
def _namespace(topic: str) -> str:
    """The namespace of a canonical topic or partition name (parsed once per name: every
    acknowledgement asks)."""
    return TopicName.parse(topic).namespace_name


class _Journal:
    """Cursors' snapshots and journals: the statements, on a transaction's :class:`Statements`.

    The door's own part: :class:`CursorTransaction` calls the writing methods under the
    lock rule; read-only callers use :func:`load_record` and :func:`journal_sizes` in a
    read transaction. Locking: a writer bumps the
    cursor row's ``version`` (``UPDATE ... RETURNING``) before inserting its deltas under
    the versions it took, so no version is taken twice and no delta is lost.
    """

    def __init__(self, statements: Statements) -> None:
        self._run = statements
        self._postgres = statements.postgres

    # -- reading --------------------------------------------------------------

    def read(
        self, topic_partition: str, subscription: str, *, lock: Literal["share", "update"]
    ) -> tuple[int, CursorRecord]:
        """The cursor's id and its snapshot with every later delta (raises when it is missing)."""
        clause = {"share": " FOR SHARE", "update": " FOR UPDATE"}[lock] if self._postgres else ""
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

    def read_locked(
        self, topic: str, subscription: str, partitions: Sequence[str]
    ) -> tuple[list[tuple[int, CursorRecord]], bool | None]:
        """The subscription's row (shared) then its cursors of ``partitions`` locked, and each
        one's snapshot with every later delta, in ``partitions``' order (raises when one is
        missing); with whether the topic's namespace requires approval, read in the same
        statement (None when no partition is asked); two statements whatever their number.

        One statement locks the subscription (its sub-select) and then the cursor rows, in
        the order of the partitions' names (``COLLATE "C"`` compares as Python does); a
        second reads every delta after each snapshot: a statement that starts after the
        locks sees every delta committed before them.
        """
        if not partitions:
            return [], None
        marks = ", ".join("?" * len(partitions))
        order = ' COLLATE "C"' if self._postgres else ""
        hold = Hold.MOVE.value if self._postgres else ""
        clause = " FOR UPDATE" if self._postgres else ""
        sql = (
            "SELECT cursors.id, cursors.topic_partition, cursors.snapshot, "
            f"cursors.snapshot_version, cursors.version, ({_POLICY}) FROM cursors "
            "WHERE cursors.subscription_id = (SELECT s.id FROM subscriptions s "
            f"WHERE s.topic = ? AND s.name = ?{hold}) AND cursors.topic_partition IN ({marks}) "
            f"ORDER BY cursors.topic_partition{order}{clause}"
        )
        parameters = (_namespace(topic), topic, subscription, *partitions)
        rows = {str(row[1]): row for row in self._run.rows(sql, parameters)}
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
            cursor_id, _, snapshot, snapshot_version, version, _ = rows[name]
            record = CursorRecord(
                None if snapshot is None else bytes(snapshot),
                int(snapshot_version),
                deltas.get(int(cursor_id), []),
                int(version),
            )
            found.append((int(cursor_id), record))
        return found, bool(rows[partitions[0]][5])

    def since(
        self, subscription_id: int, topic_partition: str, known: tuple[int, int, int] | None
    ) -> JournalSince:
        """The journal after ``known`` = (cursor id, snapshot version, version) a reader holds.

        Only the deltas the reader has not seen are read while its snapshot is
        still the stored one; otherwise the snapshot and every later delta.
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

    def create(self, subscription_id: int, snapshots: Mapping[str, bytes]) -> None:
        """A new subscription's cursor on each partition, at version 0 with its snapshot."""
        for partition, snapshot in snapshots.items():
            self._run.execute(_CREATE, (subscription_id, partition, snapshot))

    def append(self, cursor_id: int, payloads: Sequence[bytes]) -> int:
        """Append ``payloads`` to a cursor read under its lock; the last new version."""
        version = int(self._run.rows(_BUMP, (len(payloads), cursor_id))[0][0])
        self._insert(cursor_id, version, payloads)
        return version

    def append_each(self, appends: Sequence[tuple[int, Sequence[bytes]]]) -> None:
        """Deltas to each of several cursors read under their locks, in the order given;
        PostgreSQL: one statement for all of them."""
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

    def append_by_subscription(
        self,
        subscription_id: int,
        subscription: str,
        topic_partition: str,
        payload: bytes,
        consumer_ack: tuple[int, int, int] | None = None,
    ) -> int:
        """Append one delta to the cursor of a subscription found by its id; its version.
        ``consumer_ack``: the delta is a consumer's acknowledgement, whose highest message
        (ledger, entry, batch index) raises the cursor's consumer-ack mark, in the same
        statement."""
        sql = _BUMP_BY_SUBSCRIPTION
        parameters: tuple[object, ...] = (1, subscription_id, topic_partition)
        if consumer_ack is not None:
            mark = tuple(int(v) for v in consumer_ack)
            # Each of the three columns: the comparison's three values, then its own.
            raised = tuple(value for v in mark for value in (*mark, v))
            sql = _BUMP_AND_MARK_BY_SUBSCRIPTION
            parameters = (1, *raised, subscription_id, topic_partition)
        bumped = self._run.rows(sql, parameters)
        if not bumped:
            raise missing(topic_partition, subscription)
        cursor_id, version = int(bumped[0][0]), int(bumped[0][1])
        self._insert(cursor_id, version, [payload])
        return version

    def forget_consumer_ack(self, cursor_id: int) -> None:
        """Clear the cursor's consumer-ack mark (a reset moved the cursor: what consumers
        acknowledged beyond its new place may be unacknowledged again)."""
        self._run.execute(_FORGET_CONSUMER_ACK, (cursor_id,))

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

    def fold(
        self, cursor_id: int, snapshot: bytes, through_version: int, payloads: Sequence[bytes]
    ) -> None:
        """:meth:`compact`, then :meth:`append`, for a cursor read under its lock through
        ``through_version``: one UPDATE of the row for both."""
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


class CursorTransaction:
    """One transaction through the cursor door, on a pooled DBAPI connection.

    Opened by :meth:`MetadataStore.cursor_transaction
    <cursorops.core.store.metadata.MetadataStore.cursor_transaction>` (or, for a dispatcher, as a
    :class:`~cursorops.core.store.dispatch_state.SubscriptionTransaction`) and committed when its
    block ends. Its writes follow the lock rule: a cursor is written only after this
    transaction locked its subscription (:meth:`lock`, or :meth:`read`, which locks it),
    and a cursor given by its id only after :meth:`read` locked it. Each write states its
    :class:`~cursorops.core.store.cursor_ticket.Ticket`, checked against the namespace's
    approval policy (:meth:`_admit`).
    """

    def __init__(self, raw: Any, dialect: Dialect) -> None:
        self._raw = raw
        self._qmark = dialect.paramstyle == "qmark"
        self._postgres = dialect.name == "postgresql"
        self._dbapi_error: type[Exception] = dialect.loaded_dbapi.Error
        self._held: dict[tuple[str, str], Hold] = {}
        """The subscriptions this transaction locked: (topic, name) -> how."""
        self._held_ids: set[int] = set()
        """The ids of those :meth:`lock` locked."""
        self._locked_cursors: dict[int, tuple[str, str]] = {}
        """The cursors this transaction read under their row locks: (partition, subscription)."""
        self._approval: dict[str, bool] = {}
        """Whether each namespace this transaction wrote in requires approval, as read."""
        self._plans: set[str] = set()
        """The approved plan records this transaction's writes applied: each must be claimed."""
        self._claimed: set[str] = set()
        self._checked: set[Ticket] = set()
        """Acknowledgement tickets whose messages the dispatcher's transaction checked."""
        self._refusal: AuditEntry | None = None
        """A write refused: recorded once the transaction is rolled back (:func:`opened`)."""
        self._statements = _Statements(self)
        self._journal = _Journal(self._statements)

    # -- the transaction ------------------------------------------------------

    def _begin(self, *, flushed: bool = True) -> None:
        """Begin. SQLite: ``BEGIN IMMEDIATE`` takes the database's write lock (waiting up
        to the busy timeout), as the store's write engine begins. PostgreSQL: the driver
        begins at the first statement. ``flushed`` False: the commit does not wait for its
        log flush (PostgreSQL's ``synchronous_commit`` off for this transaction; on SQLite
        :func:`opened` set ``synchronous`` to ``NORMAL``)."""
        if self._postgres:
            if self._raw.autocommit:
                raise MetadataStoreError("Metadata store connection is in autocommit mode")
            if not flushed:
                self._run("SET LOCAL synchronous_commit = off", ())
        else:
            self._run("BEGIN IMMEDIATE", ())

    def _commit(self) -> None:
        unclaimed = sorted(self._plans - self._claimed)
        if unclaimed:
            topic, subscription = min(self._held)
            self.refuse(
                topic,
                subscription,
                Ticket.approved_plan(*unclaimed),
                "a cursor move applying a plan without claiming its approved record",
            )
        try:
            self._raw.commit()
        except self._dbapi_error as exc:
            raise MetadataStoreError(f"Metadata store failed: {exc}") from exc

    def _rollback(self) -> None:
        """Roll back; a connection that cannot is not handed out again (never raises)."""
        try:
            self._raw.rollback()
        except self._dbapi_error:
            self._raw.invalidate()

    def _run(self, sql: str, parameters: Any, *, many: bool = False) -> Any:
        cursor = self._raw.cursor()
        if not self._qmark:
            sql = format_style(sql)
        try:
            if many:
                cursor.executemany(sql, parameters)
            else:
                cursor.execute(sql, parameters)
        except self._dbapi_error as exc:
            raise MetadataStoreError(f"Metadata store failed: {exc}") from exc
        return cursor

    def _driver_execute(self, sql: str, parameters: tuple[object, ...]) -> int:
        return int(self._run(sql, parameters).rowcount)

    def _driver_execute_many(self, sql: str, parameters: Sequence[tuple[object, ...]]) -> None:
        self._run(sql, parameters, many=True)

    def _driver_rows(self, sql: str, parameters: tuple[object, ...]) -> Sequence[Sequence[Any]]:
        cursor = self._run(sql, parameters)
        try:
            rows: Sequence[Sequence[Any]] = cursor.fetchall()
        except self._dbapi_error as exc:
            raise MetadataStoreError(f"Metadata store failed: {exc}") from exc
        return rows

    # -- the subscription's lock ----------------------------------------------

    def lock(self, topic: str, subscription: str, hold: Hold) -> int:
        """Lock the subscription's row as ``hold`` says (the first lock of a transaction that
        changes its cursors); its id. Raises SubscriptionNotFoundError."""
        clause = hold.value if self._postgres else ""
        namespace = _namespace(topic)
        rows = self._driver_rows(
            _SUBSCRIPTION_AND_POLICY + clause, (namespace, topic, subscription)
        )
        if not rows:
            raise SubscriptionNotFoundError.of(topic, subscription)
        subscription_id = int(rows[0][0])
        self._approval[namespace] = bool(rows[0][1])
        self._held[(topic, subscription)] = hold
        self._held_ids.add(subscription_id)
        return subscription_id

    def lock_subscriptions(self, topics: Sequence[str]) -> dict[str, list[str]]:
        """Hold every subscription of ``topics`` for a cursor move (:attr:`Hold.MOVE`), in
        the order (topic, name) (PostgreSQL locks the rows of a sorted locking select in its
        order): a move of several subscriptions' cursors (a redrive). Their names by topic,
        in that order (every topic given is a key)."""
        marks = ", ".join("?" * len(topics))
        order = ' COLLATE "C"' if self._postgres else ""
        clause = Hold.MOVE.value if self._postgres else ""
        rows = self._driver_rows(
            f"SELECT id, topic, name FROM subscriptions WHERE topic IN ({marks}) "
            f"ORDER BY topic{order}, name{order}{clause}",
            tuple(topics),
        )
        found: dict[str, list[str]] = {topic: [] for topic in topics}
        for subscription_id, topic, name in rows:
            self._held[(str(topic), str(name))] = Hold.MOVE
            self._held_ids.add(int(subscription_id))
            found[str(topic)].append(str(name))
        return found

    # -- the approval rule -----------------------------------------------------

    def approval_required(self, topic: str) -> bool:
        """Whether the namespace of ``topic`` (a topic or a partition) requires approval:
        read once per transaction (with the subscription's lock, where :meth:`lock` took it)."""
        namespace = _namespace(topic)
        known = self._approval.get(namespace)
        if known is None:
            rows = self._driver_rows(_POLICY, (namespace,))
            known = self._approval[namespace] = bool(rows and rows[0][0])
        return known

    def _admit(self, topic: str, subscription: str | None, ticket: Ticket, what: str) -> None:
        """Let a write of ``topic``'s cursors through, or refuse it: on a namespace that
        requires approval only an approved plan (claimed before the commit), a checked
        acknowledgement, or what moves no cursor."""
        if not isinstance(ticket, Ticket):
            raise TypeError(f"A cursor write states its ticket, not {ticket!r}")
        if ticket.kind is TicketKind.APPROVED_PLAN:
            self._plans.update(ticket.plans)
            return
        if ticket.kind is TicketKind.NOT_A_MOVE or not self.approval_required(topic):
            return
        if ticket.kind is TicketKind.DELIVERED and ticket in self._checked:
            return
        self.refuse(topic, subscription, ticket, what)

    def refuse(
        self,
        topic: str,
        subscription: str | None,
        ticket: Ticket,
        what: str,
        detail: Mapping[str, object] | None = None,
    ) -> None:
        """Refuse a write on a namespace that requires approval: raise
        ApprovalRequiredError, and log and audit the refusal once the transaction is rolled
        back (:func:`opened`)."""
        base = str(TopicName.parse(topic).base)
        namespace = _namespace(topic)
        role = f"consumer {ticket.names}" if ticket.kind is TicketKind.DELIVERED else "cursorops"
        self._refusal = AuditEntry(
            REFUSED,
            base,
            subscription,
            role,
            {"what": what, "ticket": str(ticket), "topicPartition": topic, **(detail or {})},
            0,
        )
        raise CursorMoveRefusedError(
            f"Namespace {namespace} requires a second person's approval for every cursor "
            f"move: {what} refused ({ticket}), nothing changed"
        )

    def _record_refusal(self, at_ms: int) -> None:
        """After the rollback: log the refused write and record it in a transaction of its own
        (a failure to record it is logged; the refusal stands)."""
        entry = self._refusal
        if entry is None:
            return
        self._refusal = None
        entry = AuditEntry(
            entry.kind, entry.topic, entry.subscription, entry.role, entry.detail, at_ms
        )
        log.warning(
            "cursor door: refused %s on %s (subscription %r, %s)",
            entry.detail.get("what"),
            entry.detail.get("topicPartition"),
            entry.subscription,
            entry.detail.get("ticket"),
        )
        try:
            self._begin()
            audit_log.add_many(self._statements, [entry])
            self._raw.commit()
        except Exception:
            log.exception("cursor door: the refusal could not be recorded")
            self._rollback()

    def _holding_id(self, subscription_id: int) -> None:
        if subscription_id not in self._held_ids:
            raise RuntimeError(
                f"A cursor of subscription {subscription_id} was used before it was locked"
            )

    def _holding(self, topic_partition: str, subscription: str) -> None:
        topic = str(TopicName.parse(topic_partition).base)
        if (topic, subscription) not in self._held:
            raise RuntimeError(
                f"A cursor of '{subscription}' on {topic} was written before its subscription "
                "was locked"
            )

    # -- cursors --------------------------------------------------------------

    def read(
        self, topic: str, subscription: str, partitions: Sequence[str]
    ) -> list[tuple[int, CursorRecord]]:
        """Lock the subscription (shared, unless held already) and its cursors of
        ``partitions``, in the one order, and read each: ``(cursor id, record)`` in
        ``partitions``' order. What the transaction decides from these is what it writes."""
        found, approval = self._journal.read_locked(topic, subscription, partitions)
        if approval is not None:
            self._approval[_namespace(topic)] = approval
        self._held.setdefault((topic, subscription), Hold.MOVE)
        for (cursor_id, _), partition in zip(found, partitions, strict=True):
            self._locked_cursors[cursor_id] = (partition, subscription)
        return found

    def _require_read(self, cursor_ids: Sequence[int], ticket: Ticket, what: str) -> None:
        unread = set(cursor_ids) - set(self._locked_cursors)
        if unread:
            raise RuntimeError(f"Cursors {sorted(unread)} were written before they were read")
        for cursor_id in dict.fromkeys(cursor_ids):
            self._admit(*self._locked_cursors[cursor_id], ticket, what)

    def append(self, cursor_id: int, payloads: Sequence[bytes], *, ticket: Ticket) -> int:
        """Append deltas to a cursor :meth:`read` locked; the last new version."""
        self._require_read([cursor_id], ticket, "a cursor delta")
        return self._journal.append(cursor_id, payloads)

    def append_each(
        self, appends: Sequence[tuple[int, Sequence[bytes]]], *, ticket: Ticket
    ) -> None:
        """Deltas to each of several cursors :meth:`read` locked, in the order given;
        PostgreSQL: one statement for all of them."""
        self._require_read([cursor_id for cursor_id, _ in appends], ticket, "cursor deltas")
        self._journal.append_each(appends)

    def fold(
        self,
        cursor_id: int,
        snapshot: bytes,
        through_version: int,
        payloads: Sequence[bytes],
        *,
        ticket: Ticket,
    ) -> None:
        """Fold the journal of a cursor :meth:`read` locked into ``snapshot`` (its state as
        of ``through_version``, the version read) and append ``payloads``, in one UPDATE of
        its row."""
        self._require_read([cursor_id], ticket, "a cursor's new snapshot")
        self._journal.fold(cursor_id, snapshot, through_version, payloads)

    def append_to(
        self, topic_partition: str, subscription: str, payloads: Sequence[bytes], *, ticket: Ticket
    ) -> int | None:
        """Append deltas to a cursor of a subscription this transaction locked, by its keys
        (decided without reading it: acknowledgements merge by union); the last new version,
        or None when there is no such cursor."""
        self._holding(topic_partition, subscription)
        self._admit(topic_partition, subscription, ticket, "a cursor delta")
        return self._journal.append_to(topic_partition, subscription, payloads)

    def since(
        self, subscription_id: int, topic_partition: str, known: tuple[int, int, int] | None
    ) -> JournalSince:
        """The journal of a locked subscription's cursor after ``known`` = (cursor id,
        snapshot version, version) a reader holds, with the subscription's read position on
        the partition (:meth:`_Journal.since`)."""
        self._holding_id(subscription_id)
        return self._journal.since(subscription_id, topic_partition, known)

    def append_by_subscription(
        self,
        subscription_id: int,
        subscription: str,
        topic_partition: str,
        payload: bytes,
        consumer_ack: tuple[int, int, int] | None = None,
        *,
        ticket: Ticket,
    ) -> int:
        """Append one delta to the cursor of a subscription :meth:`lock` locked, decided
        without reading it (acknowledgements merge by union); its version. ``consumer_ack``:
        the delta is a consumer's acknowledgement and this its highest message (ledger,
        entry, batch index), which raises the cursor's consumer-ack mark."""
        self._holding_id(subscription_id)
        self._admit(topic_partition, subscription, ticket, "an acknowledgement")
        return self._journal.append_by_subscription(
            subscription_id, subscription, topic_partition, payload, consumer_ack
        )

    def forget_consumer_ack(self, cursor_id: int, *, ticket: Ticket) -> None:
        """Clear the consumer-ack mark of a cursor :meth:`read` locked (a reset moved it)."""
        self._require_read([cursor_id], ticket, "a consumer-ack mark cleared")
        self._journal.forget_consumer_ack(cursor_id)

    def compact(
        self,
        topic_partition: str,
        subscription: str,
        snapshot: bytes,
        through_version: int,
        *,
        ticket: Ticket,
    ) -> None:
        """Store ``snapshot`` as the cursor's state as of ``through_version`` and drop the
        deltas it covers, under the cursor's row lock (its subscription locked first)."""
        self._holding(topic_partition, subscription)
        self._admit(topic_partition, subscription, ticket, "a cursor's new snapshot")
        self._journal.compact(topic_partition, subscription, snapshot, through_version)

    # -- subscriptions --------------------------------------------------------

    def partitions_of(self, topic: str) -> list[str]:
        """The names a new subscription of canonical ``topic`` has cursors under (the topic
        itself, or each partition); TopicNotFoundError when there is no such topic."""
        rows = self._driver_rows("SELECT partitions FROM topics WHERE name = ?", (topic,))
        if not rows:
            raise TopicNotFoundError(f"Topic '{topic}' not found")
        return TopicInfo(topic, int(rows[0][0])).partition_names()

    def create_subscription(
        self,
        topic: str,
        name: str,
        type_name: str,
        properties: Mapping[str, str],
        snapshots: Mapping[str, bytes],
        *,
        ticket: Ticket,
    ) -> None:
        """A new subscription of canonical ``topic`` with its cursor on each partition of
        ``snapshots`` (every name :meth:`partitions_of` gives), each at version 0 with its
        snapshot. AlreadyExistsError when the name is taken, by then or meanwhile."""
        taken = f"Subscription '{name}' already exists on topic '{topic}'"
        if self._driver_rows(_SUBSCRIPTION, (topic, name)):
            raise AlreadyExistsError(taken)
        try:
            rows = self._driver_rows(
                "INSERT INTO subscriptions (topic, name, type, properties) VALUES (?, ?, ?, ?) "
                "RETURNING id",
                (topic, name, type_name, json.dumps(dict(properties))),
            )
        except MetadataStoreError as exc:
            if exc.__cause__ is not None and is_unique_violation(exc.__cause__):
                raise AlreadyExistsError(taken) from exc
            raise
        subscription_id = int(rows[0][0])
        # A row this transaction inserted: no other sees it before the commit.
        self._held[(topic, name)] = Hold.REMOVE
        self._held_ids.add(subscription_id)
        self._admit(topic, name, ticket, "a new subscription")
        self._journal.create(subscription_id, snapshots)

    def remove_subscription(self, topic: str, name: str, *, ticket: Ticket) -> None:
        """Delete subscription ``name`` of canonical ``topic`` with its cursors, their
        journals and its dispatcher's rows, once every transaction holding it has ended
        (:attr:`Hold.REMOVE`); SubscriptionNotFoundError when there is none."""
        subscription_id = self.lock(topic, name, Hold.REMOVE)
        self._admit(topic, name, ticket, "an unsubscribe")
        self._driver_execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))

    def remove_topic(
        self, topic: str, schema_id: str, now_ms: int, *, force: bool, ticket: Ticket
    ) -> tuple[list[str], list[str]]:
        """Delete canonical ``topic`` with every subscription (each held as
        :meth:`remove_subscription` holds it), its partitions, ledgers and segments, its
        schema versions (named ``schema_id``), its compaction horizons and the policies set
        on it; the names of the subscriptions removed, sorted, and the paths of the segments
        whose files are no longer listed (the caller removes them once this transaction has
        committed). TopicNotFoundError when there
        is none; SubscriptionBusyError while a consumer's lease lasts, unless ``force``
        (Pulsar's "Topic has active producers/subscriptions")."""
        partitions = self.partitions_of(topic)
        rows = self._driver_rows(
            "SELECT id, name FROM subscriptions WHERE topic = ? ORDER BY name", (topic,)
        )
        names = [str(name) for _, name in rows]
        for name in names:
            self.lock(topic, name, Hold.REMOVE)
            self._admit(topic, name, ticket, "deleting the topic with its subscriptions")
        if not force:
            busy = self._driver_rows(
                "SELECT s.name FROM consumers c JOIN subscriptions s ON c.subscription_id = s.id "
                "WHERE s.topic = ? AND c.lease_expires_ms > ? ORDER BY s.name",
                (topic, now_ms),
            )
            if busy:
                shown = ", ".join(sorted({repr(str(row[0])) for row in busy}))
                raise SubscriptionBusyError(
                    f"Topic {topic} has active producers/subscriptions: consumers are connected "
                    f"to {shown}; use force to delete it anyway"
                )
        marks = ", ".join("?" * len(partitions))
        paths = self._driver_rows(
            "SELECT s.path FROM segments s JOIN ledgers l ON l.ledger_id = s.ledger_id "
            f"WHERE l.topic_partition IN ({marks}) ORDER BY s.path",
            tuple(partitions),
        )
        self._driver_execute("DELETE FROM subscriptions WHERE topic = ?", (topic,))
        self._driver_execute("DELETE FROM topics WHERE name = ?", (topic,))
        self._driver_execute("DELETE FROM schema_versions WHERE schema_id = ?", (schema_id,))
        self._driver_execute("DELETE FROM broker_policies WHERE scope = ?", (topic,))
        self._driver_execute_many(
            "DELETE FROM compaction_horizons WHERE topic_partition = ?",
            [(partition,) for partition in partitions],
        )
        return names, [str(row[0]) for row in paths]

    # -- entries (a redrive's publish) ------------------------------------------

    @property
    def statements(self) -> Statements:
        """This transaction's plain ``?`` statements (:mod:`cursorops.core.store.statements`)."""
        return self._statements

    @contextmanager
    def append_entries(
        self, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
    ) -> Iterator[list[Allocation]]:
        """Entry ids for new segments of ``requests`` = ``(topic partition, n_entries)``, in
        this transaction (:func:`~cursorops.core.store.entry_allocation.allocated_entries`).

        The segments are registered when the block ends normally, but visible to
        other transactions only once this one commits; the partitions stay locked
        until then. A segment file written for a transaction that never commits is
        never listed, so never read (the next append reuses its entry ids and name).
        """
        with allocated_entries(self._statements, requests, max_entries_per_ledger) as found:
            yield found

    # -- audit and claim ------------------------------------------------------

    def record_audit(self, entry: AuditEntry) -> int:
        """Append an audit record of what this transaction changes; its id."""
        return audit_log.add_many(self._statements, [entry])[0]

    def record_audits(self, entries: Sequence[AuditEntry]) -> list[int]:
        """:meth:`record_audit` of each of ``entries``, in order, in one statement; their ids."""
        return audit_log.add_many(self._statements, entries)

    def audit_records(self, topic: str, kinds: Sequence[str]) -> list[AuditRecord]:
        """The topic's audit records of ``kinds``, newest first, as this transaction sees
        them: after a row lock, what a concurrent writer committed before it too."""
        return audit_log.records_of(self._statements, topic, kinds)

    def claim_plan(self, digest: str, at_ms: int, applied: Mapping[str, Any]) -> None:
        """Mark an approved plan record applied with the change this transaction writes;
        raises PlanAlreadyAppliedError if it already was (applied at most once)."""
        plan_records.claim(self._statements, digest, at_ms, applied)
        self._claimed.add(digest)


class _Statements:
    """:class:`~cursorops.core.store.statements.Statements` on a cursor transaction's connection."""

    def __init__(self, txn: CursorTransaction) -> None:
        self._txn = txn
        self.postgres = txn._postgres

    def rows(self, sql: str, parameters: tuple[object, ...]) -> Sequence[Sequence[Any]]:
        return self._txn._driver_rows(sql, parameters)

    def execute(self, sql: str, parameters: tuple[object, ...]) -> int:
        return self._txn._driver_execute(sql, parameters)

    def execute_many(self, sql: str, parameters: Sequence[tuple[object, ...]]) -> None:
        self._txn._driver_execute_many(sql, parameters)


def load_record(statements: Statements, topic_partition: str, subscription: str) -> CursorRecord:
    """A cursor's snapshot and every later delta, read consistently in the caller's read
    transaction (a share lock of the cursor's row on PostgreSQL): what a reader replays."""
    return _Journal(statements).read(topic_partition, subscription, lock="share")[1]


def journal_sizes(
    statements: Statements, topic_partition: str, subscription: str
) -> tuple[int, int]:
    """``(snapshot bytes, total bytes of the journal's deltas)`` of a cursor."""
    return _Journal(statements).sizes(topic_partition, subscription)


T = TypeVar("T", bound=CursorTransaction)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@contextmanager
def opened(
    txn: T,
    *,
    flushed: bool = True,
    begin: Callable[[], None] | None = None,
    clock: Callable[[], int] | None = None,
) -> Iterator[T]:
    """Begin ``txn`` (``begin``, by default :meth:`CursorTransaction._begin`); commit it when
    the block ends, roll it back when it raises.

    The connection's own DBAPI calls, not SQLAlchemy's: connection checkout, begin
    and commit through the engine cost more than a dispatch's statements.

    ``flushed`` False (a dispatch's bookkeeping): the commit returns without
    waiting for the disk. It is still atomic and ordered, and survives the
    process being killed; a power loss may take it back, but only together with
    every commit after it (both engines' logs are flushed in order, and the next
    flushed commit flushes it too). SQLite's ``synchronous`` is ``NORMAL`` for
    this transaction and set back afterwards; a connection that cannot be set
    back is not handed out again.

    A write the door refused (:meth:`CursorTransaction.refuse`) is recorded after the
    rollback, at ``clock()`` (epoch ms; by default the wall clock).
    """
    relaxed = not flushed and not txn._postgres
    before = int(txn._driver_rows("PRAGMA synchronous", ())[0][0]) if relaxed else 0
    try:
        if relaxed:
            txn._run("PRAGMA synchronous = NORMAL", ())
        if begin is None:
            txn._begin(flushed=flushed)
        else:
            begin()
        yield txn
        txn._commit()
    except BaseException:
        txn._rollback()
        if txn._refusal is not None:
            txn._record_refusal((clock or _wall_ms)())
        raise
    finally:
        if relaxed:
            try:
                txn._run(f"PRAGMA synchronous = {before}", ())
            except MetadataStoreError:
                txn._raw.invalidate()


__all__ = [
    "COMPACT_AFTER_DELTAS",
    "CursorTransaction",
    "Hold",
    "REFUSED",
    "Ticket",
    "journal_sizes",
    "load_record",
    "opened",
]

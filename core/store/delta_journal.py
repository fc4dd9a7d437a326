"""Writing a group commit's cursor deltas: one transaction per batch, in few round trips.

The hot path of durable acknowledgements: :meth:`MetadataStore.append_cursor_delta`
queues a delta, :mod:`core.store.group_commit` hands a batch of them to
:meth:`DeltaJournal.append`. Per cursor of the batch, one statement bumps the
cursor row's version by the number of its deltas (the row lock that serializes
every writer of the cursor) and returns the new version, and its deltas go in
one multi-row insert under the versions just taken. Cursors are written in the
lock order of every multi-cursor writer (topic partition, then subscription).
No ORM session and no SELECT of the cursor id: the statements
(:class:`~core.store.cursor_state.CursorStates`) find the cursor through its unique keys.

PostgreSQL: the bump and the insert are one statement (a data-modifying CTE),
run on a connection this journal holds in autocommit mode. A batch of one
cursor, the usual case, is that one statement, its own transaction and durable
when the server answers: one round trip, where a session costs five (the pool's
ping, BEGIN, the statements, COMMIT), each a point where the committing thread
waits to get the GIL back from the callers it just woke. Several cursors:
BEGIN, one statement each, COMMIT.

SQLite: in-process, so statements cost no round trip: a write transaction
(``BEGIN IMMEDIATE``) with an ``UPDATE ... RETURNING`` and an insert per cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection, Engine

from core.store.cursor_state import ConnectionStatements, CursorStates
from core.store.engine import translated_errors

Cursor = tuple[str, str]
"""``(topic partition, subscription)``, canonical."""

Missing = Callable[[str, str], BaseException]


class DeltaJournal:
    """Appends batches of deltas to cursor journals of one metadata database.

    ``append`` is called by one thread at a time (the group commit's leader);
    the journal's connection is never shared.
    """

    def __init__(self, write_engine: Engine, missing: Missing) -> None:
        self._engine = write_engine
        self._missing = missing
        self._postgres = write_engine.dialect.name == "postgresql"
        self._held: Connection | None = None

    def close(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def append(self, items: list[tuple[str, str, bytes]]) -> list[int | BaseException]:
        """Append every item's payload to its cursor's journal, in ONE transaction.

        Returns per item its new version, or the error of a cursor that does not
        exist (only its own items fail); any other failure raises, and nothing
        of the batch is committed.
        """
        by_cursor: dict[Cursor, list[int]] = {}
        for number, (name, subscription, _) in enumerate(items):
            by_cursor.setdefault((name, subscription), []).append(number)
        order = sorted(by_cursor)  # the lock order of every writer
        payloads = {cursor: [items[number][2] for number in by_cursor[cursor]] for cursor in order}
        with translated_errors():
            if self._postgres:
                last = self._append_postgres(order, payloads)
            else:
                last = self._append_sqlite(order, payloads)
        outcomes: list[int | BaseException] = [0] * len(items)
        for cursor in order:
            numbers = by_cursor[cursor]
            version = last.get(cursor)
            for offset, number in enumerate(numbers, start=1 - len(numbers)):
                outcomes[number] = self._missing(*cursor) if version is None else version + offset
        return outcomes

    def _append_sqlite(
        self, order: Sequence[Cursor], payloads: dict[Cursor, list[bytes]]
    ) -> dict[Cursor, int]:
        last: dict[Cursor, int] = {}
        with self._engine.begin() as connection:
            cursors = CursorStates(ConnectionStatements(connection), postgres=False)
            for cursor in order:
                version = cursors.append_to(*cursor, payloads[cursor])
                if version is not None:
                    last[cursor] = version
        return last

    def _append_postgres(
        self, order: Sequence[Cursor], payloads: dict[Cursor, list[bytes]]
    ) -> dict[Cursor, int]:
        connection = self._connection()
        cursors = CursorStates(ConnectionStatements(connection), postgres=True)
        last: dict[Cursor, int] = {}
        try:
            if len(order) > 1:
                connection.exec_driver_sql("BEGIN")
            for cursor in order:
                version = cursors.append_to(*cursor, payloads[cursor])
                if version is not None:
                    last[cursor] = version
            if len(order) > 1:
                connection.exec_driver_sql("COMMIT")
        except BaseException:
            # The connection's state is unknown (a transaction may be open): start afresh.
            self._held = None
            connection.invalidate()
            connection.close()
            raise
        return last

    def _connection(self) -> Connection:
        if self._held is None:
            self._held = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._held


__all__ = ["DeltaJournal"]

"""Plain statements with ``?`` placeholders, run on a transaction the caller owns.

The cursor door (:mod:`cursorops.core.store.cursor_door`) runs every statement of its
transaction this way on its own DBAPI connection; the same text runs on a
SQLAlchemy connection through :class:`ConnectionStatements`, so a rule written
once (an audit record's insert, a plan's claim, an entry allocation) serves both.
The text is the same on SQLite and PostgreSQL; :func:`format_style` turns it into
psycopg's ``%s`` style.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session


class Statements(Protocol):
    """Runs ``?``-placeholder statements in the caller's transaction."""

    @property
    def postgres(self) -> bool:
        """The statements run on PostgreSQL (else SQLite)."""
        ...

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
        self.postgres = connection.dialect.name == "postgresql"

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


__all__ = ["ConnectionStatements", "Statements", "format_style"]

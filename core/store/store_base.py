"""What every part of the metadata store shares: its engines and its transactions.

:class:`~cursorops.core.store.metadata.MetadataStore` is made of parts by aggregate
(:mod:`cursorops.core.store.tenancy`, :mod:`cursorops.core.store.ledger_index`, and its own cursors
and
audit); each part opens its transactions here, the one place SQLAlchemy errors become
cursorops errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session

from cursorops.core.domain.errors import TopicNotFoundError
from cursorops.core.store.cursor_door import CursorTransaction, opened
from cursorops.core.store.engine import translated_errors
from cursorops.core.store.read_view import ReadView
from cursorops.core.store.tables import TopicPartitionRow
from cursorops.core.store.values import Fence


class StoreBase:
    """The engines of one metadata database and the transactions on them."""

    url: URL
    _engine: Engine
    """Reads."""
    _write_engine: Engine
    """Writes (SQLite: ``BEGIN IMMEDIATE``)."""
    _postgres: bool
    fence: Fence | None = None
    """The broker life this store writes as (:mod:`cursorops.core.store.broker_registry`):
    its appends and subscription transactions are refused once that life is declared
    dead. None: not a broker (the CLI, Airflow's tasks, the REST app): never fenced."""

    @property
    def engine(self) -> Engine:
        """The engine reads run on: to inspect the schema or listen to statements."""
        return self._engine

    @property
    def write_engine(self) -> Engine:
        """The engine write transactions run on (SQLite: ``BEGIN IMMEDIATE``)."""
        return self._write_engine

    @contextmanager
    def _session(self, *, write: bool, conflict: str | None = None) -> Iterator[Session]:
        """One transaction; the one place SQLAlchemy errors become cursorops errors.

        ``conflict`` is the AlreadyExistsError message for a unique-key clash (a
        concurrent creator won the race). Errors raised by the caller pass through.
        """
        engine = self._write_engine if write else self._engine
        with (
            translated_errors(conflict),
            Session(engine, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session

    @contextmanager
    def cursor_transaction(self) -> Iterator[CursorTransaction]:
        """One transaction through the cursor door (:mod:`cursorops.core.store.cursor_door`), on a
        pooled DBAPI connection of the write engine: every change of a cursor. Committed
        (flushed) when the block ends, rolled back when it raises."""
        with translated_errors():
            raw = self._write_engine.raw_connection()
        try:
            with opened(CursorTransaction(raw, self._engine.dialect)) as work:
                yield work
        finally:
            raw.close()

    @contextmanager
    def reading(self) -> Iterator[ReadView]:
        """One read transaction the caller composes
        (:class:`~cursorops.core.store.read_view.ReadView`),
        on a pooled connection without an ORM session around it."""
        with translated_errors(None), self._engine.begin() as connection:
            yield ReadView(connection)

    @staticmethod
    def _require_partition(session: Session, name: str, *, lock: bool) -> None:
        query = select(TopicPartitionRow.name).where(TopicPartitionRow.name == name)
        if lock:
            query = query.with_for_update()
        if session.execute(query).first() is None:
            raise TopicNotFoundError(f"Topic partition '{name}' not found")


__all__ = ["StoreBase"]

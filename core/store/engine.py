"""Engines for the metadata store: SQLite (WAL, one writer) or PostgreSQL, and error translation.

On SQLite every write transaction starts with ``BEGIN IMMEDIATE`` (an engine with
:data:`WRITE_OPTION` set) and waits up to :data:`SQLITE_BUSY_TIMEOUT_S` for the write lock.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import AlreadyExistsError, MetadataStoreError

SQLITE_BUSY_TIMEOUT_S = 60.0
"""How long a SQLite writer waits for the database write lock before failing."""

WRITE_OPTION = "cursorops_write"
"""Execution option marking a write engine (SQLite: ``BEGIN IMMEDIATE``)."""

PG_POOL_SIZE = 20
"""PostgreSQL connections an engine keeps open once used. SQLAlchemy's default (5) made a
process serving concurrent requests (an api-server worker runs up to 40 in its thread pool)
open and close a connection for most of its transactions past the fifth: a new backend, a
login and a pre-ping each time. A connection is opened only when needed: a CLI run that
needs one keeps one."""
PG_POOL_OVERFLOW = 20
"""Connections opened past :data:`PG_POOL_SIZE` while that many are in use, closed when
returned: 40 in all, the api-server's thread pool."""

PG_SCHEMA_LOCK_KEY = 0x637572736F72
"""Advisory lock held while migrating the schema, so concurrent migrations do not race."""


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite: _sqlite_on_begin emits BEGIN itself.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        _enter_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _enter_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode = WAL``, waiting like any writer when it is busy.

    Switching a new database to WAL needs it to itself, and SQLite answers "database is
    locked" at once, without its busy handler, while another connection opening the same
    new file holds it (several processes' first open of one home): retried until
    :data:`SQLITE_BUSY_TIMEOUT_S`.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _sqlite_on_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def sqlite_file(url: URL) -> Path | None:
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database)


def prepare_location(config: Config) -> None:
    """Create the home folder, and the SQLite file's folder if the store is a SQLite file."""
    try:
        Path(config.home).mkdir(parents=True, exist_ok=True)
        database_file = sqlite_file(make_url(config.metadata_url))
        if database_file is not None:
            database_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MetadataStoreError(f"Cannot create {config.home}: {exc}") from exc
    except SQLAlchemyError as exc:
        raise MetadataStoreError(f"Invalid metadata URL {config.metadata_url!r}") from exc


def create_store_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
        kwargs: dict[str, Any] = {}
        if sqlite_file(url) is None:
            # One shared connection, so that every session sees the same in-memory
            # database; such a store is meant for one thread.
            connect_args["check_same_thread"] = False
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=PG_POOL_SIZE,
        max_overflow=PG_POOL_OVERFLOW,
        connect_args={"application_name": session_tag()},
    )


def session_tag() -> str:
    """The ``application_name`` of every PostgreSQL session of one store: ``cursorops``, the
    process id and a random part, so that the sessions of one process are found together
    in ``pg_stat_activity`` (by an operator, and by a broker ending a dead broker's
    transactions: :meth:`~cursorops.core.store.broker_registry.BrokerRegistry.declare_dead`).
    """
    return f"cursorops {os.getpid()} {secrets.token_hex(6)}"


def is_unique_violation(exc: BaseException) -> bool:
    """A unique key's clash: SQLAlchemy's IntegrityError, or the driver's own error."""
    orig = exc.orig if isinstance(exc, IntegrityError) else exc
    if getattr(orig, "sqlstate", None) == "23505":
        return True
    return "UNIQUE constraint failed" in str(orig)


def is_lock_timeout(exc: BaseException) -> bool:
    """PostgreSQL's ``lock_timeout`` ran out (SQLSTATE 55P03): SQLAlchemy's error, or the
    driver's own."""
    orig = getattr(exc, "orig", None) or exc
    return getattr(orig, "sqlstate", None) == "55P03"


@contextmanager
def translated_errors(conflict: str | None = None) -> Iterator[None]:
    """The one place SQLAlchemy errors become cursorops errors.

    ``conflict`` is the AlreadyExistsError message for a unique-key clash (a
    concurrent creator won the race). Other errors pass through.
    """
    try:
        yield
    except IntegrityError as exc:
        if conflict is not None and is_unique_violation(exc):
            raise AlreadyExistsError(conflict) from exc
        raise MetadataStoreError(f"Metadata store integrity error: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        raise MetadataStoreError(f"Metadata store failed: {exc}") from exc

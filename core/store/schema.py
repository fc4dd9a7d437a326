"""Opening a metadata store whose schema is current without running any migration machinery.

The schema's history is Alembic's (:mod:`cursorops.core.store.migrations`), and a store
records its revision in Alembic's own ``alembic_version`` table. An open reads
that one row with a plain ``SELECT``; when it names :data:`HEAD_REVISION`, the
open is done: no Alembic import, no write transaction (SQLite's ``BEGIN
IMMEDIATE`` would wait behind any writer), no advisory lock, no DDL.

Otherwise the schema lock is taken (SQLite's write lock, PostgreSQL's advisory
lock). A database that holds no table of the store yet gets the current tables
and the head revision at once, still without Alembic: creating the tables of
:mod:`cursorops.core.store.tables` is what running every revision from nothing gives (a test
holds the two schemas equal), in one statement per table instead of one
migration each, and a new home's first command does not pay Alembic's import.
A store that holds tables at another revision is handed to
:func:`cursorops.core.store.migrate.bring_up_to_date`: an embedded SQLite store is
migrated to the head; a shared store holding an older schema is refused with
:class:`~cursorops.core.domain.errors.SchemaOutOfDateError` until ``cursorops db migrate`` runs.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from cursorops.core.store.engine import PG_SCHEMA_LOCK_KEY
from cursorops.core.store.tables import Base

HEAD_REVISION = "0009_request_records"
"""The newest revision in :mod:`cursorops.core.store.migrations` (a test holds it equal to
Alembic's head)."""

VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
"""Alembic's record of a store's revision (one row), as Alembic creates it; used here without
Alembic."""


def recorded_revision(engine: Engine) -> str | None:
    """The revision the database records, or None (no row, no table yet)."""
    try:
        with engine.connect() as connection:
            return connection.execute(select(VERSION_TABLE.c.version_num)).scalar_one_or_none()
    except DBAPIError:
        # No such table (a new database, or one from before migrations): migrate decides.
        return None


def ensure_schema(engine: Engine, write_engine: Engine) -> None:
    """Return at once if the store is at :data:`HEAD_REVISION`; else create, migrate or refuse.

    Raises :class:`~cursorops.core.domain.errors.SchemaOutOfDateError` for a shared store that is
    behind, :class:`~cursorops.core.domain.errors.MetadataStoreError` for one that is ahead of this
    code.
    """
    if recorded_revision(engine) == HEAD_REVISION:
        return
    with write_engine.begin() as connection:
        lock_schema(connection)
        if not holds_store_tables(connection):
            Base.metadata.create_all(connection)
            VERSION_TABLE.create(connection)
            connection.execute(insert(VERSION_TABLE).values(version_num=HEAD_REVISION))
            return
    from cursorops.core.store.migrate import bring_up_to_date

    bring_up_to_date(write_engine)


def lock_schema(connection: Connection) -> None:
    """Serialize schema changes: PostgreSQL's advisory lock (SQLite: its write transaction)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_SCHEMA_LOCK_KEY})


def holds_store_tables(connection: Connection) -> bool:
    """Whether any table of a store exists in the database (else it is new)."""
    names = set(inspect(connection).get_table_names())
    return bool(names & {*Base.metadata.tables, VERSION_TABLE.name, "cursorops_schema"})


__all__ = [
    "HEAD_REVISION",
    "VERSION_TABLE",
    "ensure_schema",
    "holds_store_tables",
    "lock_schema",
    "recorded_revision",
]

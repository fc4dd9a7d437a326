"""Creating the metadata store's tables once, not at every open.

``MetaData.create_all`` creates the tables that are missing and never alters
one that exists, so what it does depends only on which tables exist. The
store records, in one row of :data:`SCHEMA_TABLE`, the digest of the table
names it created; an open that reads the digest of the current tables there
has nothing to create and skips the DDL: no write transaction (SQLite's
``BEGIN IMMEDIATE`` would wait behind any writer), no advisory lock and no
per-table existence check. Any other answer (no row, no such table, an
older or newer table set) runs ``create_all`` as before, under the write
lock, and records the digest in the same transaction.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from core.store.engine import PG_SCHEMA_LOCK_KEY

SCHEMA_TABLE = Table(
    "cursorops_schema",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("tables_digest", String, nullable=False),
)
"""One row (id 1): the digest of the tables the store's schema holds."""


def tables_digest(metadata: MetaData) -> str:
    """The digest of the table names ``metadata`` creates, :data:`SCHEMA_TABLE` included."""
    names = sorted({*metadata.tables, SCHEMA_TABLE.name})
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def recorded_digest(engine: Engine) -> str | None:
    """The digest the database records, or None (no row, no table yet)."""
    try:
        with engine.connect() as connection:
            return connection.execute(
                select(SCHEMA_TABLE.c.tables_digest).where(SCHEMA_TABLE.c.id == 1)
            ).scalar_one_or_none()
    except DBAPIError:
        # No such table (a new database or one from before the digest): create_all decides.
        return None


def ensure_tables(engine: Engine, write_engine: Engine, metadata: MetaData) -> None:
    """Create the missing tables of ``metadata`` unless the database records they all exist."""
    digest = tables_digest(metadata)
    if recorded_digest(engine) == digest:
        return
    with write_engine.begin() as connection:
        _create(connection, metadata, digest)


def _create(connection: Connection, metadata: MetaData, digest: str) -> None:
    if connection.dialect.name == "postgresql":
        # Concurrent first starts: one creates, the others find the tables.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_SCHEMA_LOCK_KEY})
    metadata.create_all(connection)
    SCHEMA_TABLE.create(connection, checkfirst=True)
    connection.execute(delete(SCHEMA_TABLE))
    connection.execute(insert(SCHEMA_TABLE).values(id=1, tables_digest=digest))


__all__ = ["SCHEMA_TABLE", "ensure_tables", "recorded_digest", "tables_digest"]

"""Opening a metadata store whose schema is current without running any migration machinery.

The schema's history is Alembic's (:mod:`core.store.migrations`), and a store
records its revision in Alembic's own ``alembic_version`` table. An open reads
that one row with a plain ``SELECT``; when it names :data:`HEAD_REVISION`, the
open is done: no Alembic import, no write transaction (SQLite's ``BEGIN
IMMEDIATE`` would wait behind any writer), no advisory lock, no DDL. Any other
answer (no row, no table, an older or unknown revision) is handed to
:func:`core.store.migrate.bring_up_to_date`, which decides under the schema lock:
an embedded SQLite store, or an empty database, is migrated to the head; a shared
store holding an older schema is refused with :class:`~core.errors.SchemaOutOfDateError`
until ``cursorops db migrate`` runs.
"""

from __future__ import annotations

from sqlalchemy import Column, MetaData, String, Table, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

HEAD_REVISION = "0003_drop_tables_digest"
"""The newest revision in :mod:`core.store.migrations` (a test holds it equal to Alembic's head)."""

VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), primary_key=True),
)
"""Alembic's record of a store's revision (one row), read here without Alembic."""


def recorded_revision(engine: Engine) -> str | None:
    """The revision the database records, or None (no row, no table yet)."""
    try:
        with engine.connect() as connection:
            return connection.execute(select(VERSION_TABLE.c.version_num)).scalar_one_or_none()
    except DBAPIError:
        # No such table (a new database, or one from before migrations): migrate decides.
        return None


def ensure_schema(engine: Engine, write_engine: Engine) -> None:
    """Return at once if the store is at :data:`HEAD_REVISION`; else bring it up to date or refuse.

    Raises :class:`~core.errors.SchemaOutOfDateError` for a shared store that is
    behind, :class:`~core.errors.MetadataStoreError` for one that is ahead of this code.
    """
    if recorded_revision(engine) == HEAD_REVISION:
        return
    from core.store.migrate import bring_up_to_date

    bring_up_to_date(write_engine)


__all__ = ["HEAD_REVISION", "VERSION_TABLE", "ensure_schema", "recorded_revision"]

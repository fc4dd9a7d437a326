"""Migrating the metadata store with Alembic, programmatically (no ``alembic.ini``).

Two callers:

- ``cursorops db migrate`` (:func:`migrate`): upgrade any store, SQLite or
  PostgreSQL, to the head revision. Idempotent: a store at the head is left as is.
- an open of a store that holds tables at another revision than the head
  (:func:`cursorops.core.store.schema.ensure_schema` creates a new one itself,
  :func:`bring_up_to_date` the rest): an embedded SQLite store is migrated at
  once; a shared store with an older schema is refused, so that no process of a
  new release alters a schema that processes of the old one are still using
  behind the operator's back.

Both run every revision in one transaction under the schema lock: on SQLite the
write lock (``BEGIN IMMEDIATE``), on PostgreSQL the advisory lock
:data:`~cursorops.core.store.engine.PG_SCHEMA_LOCK_KEY`, then read the revision again. So two
processes migrating at once migrate once: the second waits, finds the head, and
does nothing. PostgreSQL's DDL is transactional, so a failed migration leaves the
store as it was; so is SQLite's.

A store the code before migrations created (its tables, no ``alembic_version``)
starts from no revision: the baseline revision creates only missing tables, so
it is adopted, not recreated.

This module imports Alembic; only an open that must migrate or refuse reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import MetadataStoreError, SchemaOutOfDateError
from cursorops.core.store.engine import WRITE_OPTION, create_store_engine, prepare_location
from cursorops.core.store.schema import lock_schema

MIGRATIONS = Path(__file__).with_name("migrations")
"""The Alembic script directory, shipped inside the package."""


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate` did: the revision found (None: none) and the revision left."""

    url: str
    """The store's URL, password hidden."""
    before: str | None
    after: str

    @property
    def migrated(self) -> bool:
        return self.before != self.after


def head_revision() -> str:
    """The newest revision of :mod:`cursorops.core.store.migrations` (read from the revision
    files)."""
    head = _script().get_current_head()
    if head is None:
        raise MetadataStoreError(f"No migration found in {MIGRATIONS}")
    return head


def migrate(config: Config) -> Migration:
    """Upgrade the store ``config.metadata_url`` names to the head revision (create it if new)."""
    prepare_location(config)
    try:
        url = make_url(config.metadata_url)
        engine = create_store_engine(url)
    except SQLAlchemyError as exc:
        raise MetadataStoreError(f"Invalid metadata URL {config.metadata_url!r}") from exc
    shown = url.render_as_string(hide_password=True)
    try:
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
            before = _locked_revision(connection)
            _upgrade(connection, before)
            after = MigrationContext.configure(connection).get_current_revision()
        return Migration(shown, before, after or "")
    except SQLAlchemyError as exc:
        raise MetadataStoreError(f"Cannot migrate the metadata store {shown}: {exc}") from exc
    finally:
        engine.dispose()


def bring_up_to_date(write_engine: Engine) -> None:
    """At open of a store not at the head: migrate an embedded store, refuse a shared one."""
    with write_engine.begin() as connection:
        current = _locked_revision(connection)
        head = head_revision()
        if current == head:
            return  # another process migrated it meanwhile
        _refuse_unknown(current)
        if connection.dialect.name != "sqlite":
            at = f"revision {current}" if current else "the schema from before migrations"
            raise SchemaOutOfDateError(
                f"The metadata store's schema is behind this cursorops ({at}, needs {head}): "
                "run `cursorops db migrate` with the same --metadata-url, then retry"
            )
        _upgrade(connection, current)


def _locked_revision(connection: Connection) -> str | None:
    """Take the schema lock, then read the revision."""
    lock_schema(connection)
    return MigrationContext.configure(connection).get_current_revision()


def _refuse_unknown(current: str | None) -> None:
    """Raise if the store records a revision this code does not have (a newer release's)."""
    if current is None:
        return
    try:
        _script().get_revision(current)
    except CommandError as exc:
        raise MetadataStoreError(
            f"The metadata store's schema (revision {current}) is newer than this "
            f"cursorops knows (head {head_revision()}): upgrade cursorops"
        ) from exc


def _upgrade(connection: Connection, current: str | None) -> None:
    _refuse_unknown(current)
    try:
        command.upgrade(_alembic_config(connection), "head")
    except CommandError as exc:
        raise MetadataStoreError(f"Cannot migrate the metadata store: {exc}") from exc


@cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_alembic_config(None))


def _alembic_config(connection: Connection | None) -> AlembicConfig:
    config = AlembicConfig(attributes={"connection": connection})
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


__all__ = ["MIGRATIONS", "Migration", "bring_up_to_date", "head_revision", "migrate"]

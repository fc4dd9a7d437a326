"""Throwaway databases and schemas on a PostgreSQL server, dropped on the way out.

The server itself comes from ``scripts/start-postgres.sh``: ``-- COMMAND`` runs the
command with ``CURSOROPS_TEST_PG_URL`` naming a fresh server in a folder of its own and
stops it (its process group) afterwards, whatever the command did; without a command it
prints that URL and ``scripts/stop-postgres.sh`` stops it. What runs on it takes a
database or a schema of its own from here, so that runs sharing a server never meet:

- :func:`databases`: databases of given names (dropped first if a failed run left them);
- :func:`database`: one database of a fresh name;
- :func:`schema`: one schema of a fresh name, its URL's ``search_path`` set to it (cheaper
  than a database: no template copy).

Each takes the server's SQLAlchemy URL (a superuser's, or a role allowed to create
them) and yields SQLAlchemy URLs with their passwords, ready for ``create_engine`` or
``CURSOROPS_METADATA_URL``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

URL_ENV = "CURSOROPS_TEST_PG_URL"
"""The variable ``scripts/start-postgres.sh -- COMMAND`` sets to its server's URL."""


@contextlib.contextmanager
def databases(server_url: str, *names: str) -> Iterator[dict[str, str]]:
    """Fresh databases ``names`` on the server, dropped (with their connections) on the
    way out and first: name → URL."""
    base = make_url(server_url)
    admin = create_engine(
        base.set(database="postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )

    def drop() -> None:
        with admin.connect() as connection:
            for name in names:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    try:
        drop()
        with admin.connect() as connection:
            for name in names:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield {
                name: base.set(database=name).render_as_string(hide_password=False)
                for name in names
            }
        finally:
            drop()
    finally:
        admin.dispose()


@contextlib.contextmanager
def database(server_url: str, prefix: str = "cursorops") -> Iterator[tuple[str, str]]:
    """A database of a fresh name (``prefix`` and 10 hex digits): (URL, name)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with databases(server_url, name) as made:
        yield made[name], name


@contextlib.contextmanager
def schema(server_url: str, prefix: str = "test") -> Iterator[tuple[str, str]]:
    """A schema of a fresh name (``prefix`` and 32 hex digits) in the server URL's
    database, dropped with everything in it on the way out: (URL whose ``search_path`` is
    that schema, schema)."""
    base = make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex}"
    admin = create_engine(base, poolclass=NullPool)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{name}"'))
        try:
            url = base.update_query_dict({"options": f"-csearch_path={name}"})
            yield url.render_as_string(hide_password=False), name
        finally:
            with admin.begin() as connection:
                connection.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
    finally:
        admin.dispose()

"""The metadata store migrates its schema once: an open of a current store runs no DDL.

An open reads the store's revision with one ``SELECT`` and, at the head, takes no
lock and imports no Alembic; a read-only command never waits behind a writer.
Here a writer holds the schema lock (SQLite's write lock, PostgreSQL's advisory
lock) while a new store opens and reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command as alembic_command
from sqlalchemy import inspect, text

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import MetadataStoreError, SchemaOutOfDateError
from cursorops.core.store.engine import PG_SCHEMA_LOCK_KEY
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.migrate import _alembic_config, migrate
from cursorops.core.store.schema import HEAD_REVISION, recorded_revision

from ..conftest import write_lock_held

OPEN_WITHIN_S = 15.0
"""Far below the 60 s an open waiting on the write lock would take, far above a slow open."""
SCHEMA_LOCKED = "SELECT pg_advisory_xact_lock(:key)"
"""PostgreSQL's schema advisory lock, which the old open took (SQLite: its write lock)."""


def finishes(work: Callable[[], object], within_s: float) -> bool:
    done = threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the caller's assertion
            failures.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(within_s)
    if failures:
        raise failures[0]
    return finished


def open_and_read(url: str) -> list[str]:
    with MetadataStore(url) as store:
        return store.list_tenants()


def test_first_open_records_the_head_revision(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        assert recorded_revision(store.engine) == HEAD_REVISION
    assert open_and_read(metadata_url) == ["acme"]


def test_open_of_a_current_store_waits_for_no_writer(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
    # What a migration takes: SQLite's write lock, PostgreSQL's schema lock.
    with write_lock_held(metadata_url, SCHEMA_LOCKED, key=PG_SCHEMA_LOCK_KEY):
        read: list[list[str]] = []
        assert finishes(lambda: read.append(open_and_read(metadata_url)), OPEN_WITHIN_S)
    assert read == [["acme"]]


@pytest.mark.slow
def test_opens_of_a_new_and_of_a_current_store_import_no_alembic(tmp_path: Path) -> None:
    """A new store gets the tables and the head revision directly; a current one is read."""
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    code = (
        "import sys; from cursorops.core.store.metadata import MetadataStore; "
        "MetadataStore(sys.argv[1]).close(); print('alembic' in sys.modules)"
    )
    repo = str(Path(__file__).resolve().parents[3])
    for _ in ("new", "current"):
        done = subprocess.run(
            [sys.executable, "-c", code, url],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": repo},
        )
        assert done.stdout.split() == ["False"]
        assert recorded_revision_of(url) == HEAD_REVISION


def recorded_revision_of(url: str) -> str | None:
    with MetadataStore(url) as store:
        return recorded_revision(store.engine)


def test_an_embedded_store_behind_migrates_itself_on_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    with MetadataStore(url) as store:
        store.create_tenant("acme")
        # Taken back to the baseline by the revisions' own downgrades: the store as the
        # first release left it.
        with store.write_engine.begin() as connection:
            alembic_command.downgrade(_alembic_config(connection), "0001_baseline")
        assert "cursorops_schema" in inspect(store.write_engine).get_table_names()
    with MetadataStore(url) as store:
        assert recorded_revision(store.engine) == HEAD_REVISION
        indexes = {i["name"] for i in inspect(store.engine).get_indexes("plan_records")}
        assert "ix_plan_records_waiting" in indexes
        assert "cursorops_schema" not in inspect(store.engine).get_table_names()
        assert store.list_tenants() == ["acme"]


def test_concurrent_first_opens_all_succeed(metadata_url: str) -> None:
    errors: list[BaseException] = []

    def first_open() -> None:
        try:
            open_and_read(metadata_url)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_open) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with MetadataStore(metadata_url) as store:
        assert recorded_revision(store.engine) == HEAD_REVISION


def test_concurrent_migrations_migrate_once(tmp_path: Path, metadata_url: str) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    results: list[tuple[str | None, str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            done = migrate(config)
            results.append((done.before, done.after))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results, key=str) == [
        (HEAD_REVISION, HEAD_REVISION),
        (HEAD_REVISION, HEAD_REVISION),
        (None, HEAD_REVISION),
    ]


def test_a_store_newer_than_the_code_is_refused_and_left_alone(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        with store.write_engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
        engine = store.engine
        with pytest.raises(MetadataStoreError, match="newer than this cursorops") as refused:
            MetadataStore(metadata_url)
        assert not isinstance(refused.value, SchemaOutOfDateError)
        assert recorded_revision(engine) == "9999_future"


def test_many_first_connections_to_a_new_sqlite_home_all_open(tmp_path: Path) -> None:
    """Switching a new file to WAL is refused at once while another connection opens it;
    every first connection of several processes' first open must still succeed."""
    from sqlalchemy import make_url

    from cursorops.core.store.engine import create_store_engine

    for round_ in range(15):
        url = make_url(f"sqlite:///{tmp_path}/round-{round_}.db")
        errors: list[BaseException] = []

        def connect(url: object = url, errors: list[BaseException] = errors) -> None:
            engine = create_store_engine(url)  # type: ignore[arg-type]
            try:
                with engine.connect() as connection:
                    assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                engine.dispose()

        threads = [threading.Thread(target=connect) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []

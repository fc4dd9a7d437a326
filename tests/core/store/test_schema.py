"""The metadata store creates its tables once: an open of a current store runs no DDL.

The old open took the write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL's schema
advisory lock) to run ``create_all`` every time, so a read-only command waited
behind any writer. Here a writer holds that lock while a new store opens and reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import inspect, text, update

from core.store.engine import PG_SCHEMA_LOCK_KEY
from core.store.metadata import MetadataStore
from core.store.schema import SCHEMA_TABLE, recorded_digest, tables_digest
from core.store.tables import Base

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


def test_first_open_records_the_digest(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        assert recorded_digest(store._engine) == tables_digest(Base.metadata)
    assert open_and_read(metadata_url) == ["acme"]


def test_open_of_a_current_store_waits_for_no_writer(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
    # What the old open waited for: SQLite's write lock, PostgreSQL's schema lock.
    with write_lock_held(metadata_url, SCHEMA_LOCKED, key=PG_SCHEMA_LOCK_KEY):
        read: list[list[str]] = []
        assert finishes(lambda: read.append(open_and_read(metadata_url)), OPEN_WITHIN_S)
    assert read == [["acme"]]


def test_a_stale_digest_creates_the_missing_tables(metadata_url: str) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        with store._write_engine.begin() as connection:
            connection.execute(text("DROP TABLE backlog_history"))
            connection.execute(update(SCHEMA_TABLE).values(tables_digest="an older table set"))
    with MetadataStore(metadata_url) as store:
        assert "backlog_history" in inspect(store._engine).get_table_names()
        assert recorded_digest(store._engine) == tables_digest(Base.metadata)
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
        assert recorded_digest(store._engine) == tables_digest(Base.metadata)


@pytest.mark.parametrize("names", [["a"], ["a", "b"], ["b", "a", "c"]])
def test_the_digest_depends_on_the_table_names_only(names: list[str]) -> None:
    from sqlalchemy import Column, Integer, MetaData, Table

    def metadata(order: list[str], column: str) -> MetaData:
        result = MetaData()
        for name in order:
            Table(name, result, Column(column, Integer, primary_key=True))
        return result

    digest = tables_digest(metadata(names, "id"))
    assert tables_digest(metadata(sorted(names), "other")) == digest
    assert tables_digest(metadata([*names, "z"], "id")) != digest

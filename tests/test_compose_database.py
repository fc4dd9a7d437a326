"""The compose PostgreSQL's roles (scripts/compose-init-db.sh), on a real server.

The script runs as the container's entrypoint would run it, against the test server;
then the store is migrated as ``cursorops`` and a real cursor written, and each role
tries what it must not do. The test server trusts every login, so passwords are not
what is checked here: the privileges are.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.pool import NullPool

from tests.conftest import PG_URL_ENV

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compose-init-db.sh"
DATABASES = ("cursorops", "airflow")
ROLES = ("cursorops", "cursorops_reader", "airflow")


def _drop(admin: URL) -> None:
    engine = create_engine(admin, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for database in DATABASES:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            for role in ROLES:
                connection.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
    finally:
        engine.dispose()


@pytest.fixture
def server() -> Iterator[URL]:
    """The test server's superuser URL, with the script's databases and roles made."""
    base = os.environ.get(PG_URL_ENV)
    if not base:
        pytest.skip(f"{PG_URL_ENV} names no PostgreSQL (bash scripts/start-postgres.sh -- ...)")
    admin = make_url(base)
    _drop(admin)
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={
            **os.environ,
            "PGHOST": admin.host or "127.0.0.1",
            "PGPORT": str(admin.port or 5432),
            "POSTGRES_USER": admin.username or "postgres",
            "CURSOROPS_DB_PASSWORD": "writer-pw",
            "CURSOROPS_READER_PASSWORD": "reader-pw",
            "CURSOROPS_AIRFLOW_DB_PASSWORD": "airflow-pw",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    try:
        yield admin
    finally:
        _drop(admin)


def _as(admin: URL, role: str, database: str) -> URL:
    return admin.set(username=role, password=None, database=database)


def test_the_reader_may_select_the_cursor_state_and_write_none_of_it(
    server: URL, tmp_path: Path
) -> None:
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker
    from cursorops.core.store.migrate import migrate

    writer = _as(server, "cursorops", "cursorops").render_as_string(hide_password=False)
    config = Config.from_home(tmp_path / "home", metadata_url=writer)
    migrate(config)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/orders")
        broker.admin.create_topic("admin", "persistent://acme/orders/t")
        broker.admin.create_subscription("admin", "persistent://acme/orders/t", "s")

    reader = create_engine(_as(server, "cursorops_reader", "cursorops"), poolclass=NullPool)
    try:
        with reader.connect() as connection:
            (cursor_id, version) = connection.execute(text("SELECT id, version FROM cursors")).one()
            assert connection.execute(text("SELECT count(*) FROM cursor_deltas")).scalar() == 0
        for statement, values in (
            ("UPDATE cursors SET version = version + 1", {}),
            (
                "INSERT INTO cursor_deltas (cursor_id, version, payload) VALUES (:c, :v, :p)",
                {"c": cursor_id, "v": version + 1, "p": b"x"},
            ),
            ("DELETE FROM subscriptions", {}),
            ("CREATE TABLE planted (x int)", {}),
        ):
            with (
                pytest.raises(ProgrammingError, match="permission denied"),
                reader.begin() as connection,
            ):
                connection.execute(text(statement), values)
    finally:
        reader.dispose()
    # Nothing changed, as the owner sees it.
    owner = create_engine(writer, poolclass=NullPool)
    try:
        with owner.connect() as connection:
            assert connection.execute(text("SELECT id, version FROM cursors")).one() == (
                cursor_id,
                version,
            )
    finally:
        owner.dispose()


def test_airflow_s_database_is_airflow_s_alone(server: URL) -> None:
    # Its own user owns it and may create its tables there.
    own = create_engine(_as(server, "airflow", "airflow"), poolclass=NullPool)
    try:
        with own.begin() as connection:
            connection.execute(text("CREATE TABLE dag_probe (x int)"))
    finally:
        own.dispose()
    # Neither cursorops role may connect to it; nor may airflow to the cursorops store.
    for role, database in (
        ("cursorops", "airflow"),
        ("cursorops_reader", "airflow"),
        ("airflow", "cursorops"),
    ):
        engine = create_engine(_as(server, role, database), poolclass=NullPool)
        try:
            with (
                pytest.raises(OperationalError, match="permission denied for database"),
                engine.connect(),
            ):
                pass
        finally:
            engine.dispose()


def test_no_role_it_makes_is_a_superuser(server: URL) -> None:
    engine = create_engine(server, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
                    "WHERE rolname = ANY(:names) ORDER BY rolname"
                ),
                {"names": list(ROLES)},
            ).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [
        ("airflow", False, False, False),
        ("cursorops", False, False, False),
        ("cursorops_reader", False, False, False),
    ]

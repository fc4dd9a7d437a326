"""``make up``'s PostgreSQL for Airflow's metadata (``scripts/airflow-up.sh`` with
``CURSOROPS_AIRFLOW_DB=postgres``), on a stand-in Airflow and a real PostgreSQL.

A fake ``airflow`` stands in for standalone: it writes the database settings it was
started with and stops on SIGINT. So what is tested is the launcher's own logic, in
seconds: it starts a PostgreSQL of its own (or uses the one answering on the port, or the
database named by ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``), hands Airflow its URL, and on
Ctrl-C or ``scripts/airflow-down.sh`` stops the server it started, keeping its data for the
next start; nothing outlives it. ``tests/dags/test_five_approvers_postgres_airflow.py``
runs the real Airflow on it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cursorops.airflow.local_airflow import Airflow, default_sigint
from cursorops.local.ports import free_port, listening

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"

FAKE_AIRFLOW = """#!/usr/bin/env python3
import json, os, signal, sys, time
home = os.environ["AIRFLOW_HOME"]
names = ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC")
signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
with open(os.path.join(home, "database.json.part"), "w") as out:
    json.dump({name: os.environ.get(name) for name in names}, out)
os.replace(os.path.join(home, "database.json.part"), os.path.join(home, "database.json"))
while True:
    time.sleep(0.1)
"""

FAKE_PYTHON = f"""#!/usr/bin/env bash
exec {sys.executable} "$@"
"""

postgres_installed = bool(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or bool(
    shutil.which("pg_config")
)
needs_postgres = pytest.mark.skipif(not postgres_installed, reason="PostgreSQL is not installed")


@pytest.fixture
def short() -> Iterator[Path]:
    """A folder for clusters: short (a server's socket path is at most 107 bytes) and open
    to all (as root, the server runs as the postgres user)."""
    folder = Path(tempfile.mkdtemp(prefix="up-pg-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for cluster in folder.iterdir():
            if (cluster / "data" / "postmaster.pid").exists():
                subprocess.run(
                    ["bash", str(SCRIPTS / "stop-postgres.sh"), str(cluster)], check=False
                )
        shutil.rmtree(folder, ignore_errors=True)


def _venv(root: Path) -> Path:
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in (("airflow", FAKE_AIRFLOW), ("python", FAKE_PYTHON)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir.parent


def start(root: Path, **extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``airflow-up.sh`` as ``make up`` runs it, on the stand-in; once Airflow has started,
    the launcher and its AIRFLOW_HOME."""
    launcher, home = launch(root, **extra)
    log = root / "launcher.log"
    deadline = time.monotonic() + 120
    while not (home / "database.json").exists():
        assert launcher.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return launcher, home


def launch(root: Path, **extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``airflow-up.sh`` as ``make up`` runs it, on the stand-in, its output in
    ``root/launcher.log``: the launcher and its AIRFLOW_HOME."""
    home = root / "airflow"
    venv = root / "venv"
    if not venv.exists():
        _venv(root)
    (home / "database.json").unlink(missing_ok=True)
    env = {
        **os.environ,
        "VENV": str(venv),
        "CURSOROPS_HOME": str(root / "cursorops"),
        "AIRFLOW_PORT": str(free_port()),
        "AIRFLOW_LOG_PORT": str(free_port(span=2)),
        "CURSOROPS_SPARK_CONNECT": "0",
        "CURSOROPS_AIRFLOW_DB": "postgres",
        **extra,
    }
    for name in (
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC",
    ):
        if name not in extra:
            env.pop(name, None)
    log = root / "launcher.log"
    launcher = subprocess.Popen(
        ["bash", str(SCRIPTS / "airflow-up.sh"), str(home)],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    return launcher, home


def database(home: Path) -> dict[str, str | None]:
    return dict(json.loads((home / "database.json").read_text()))


def ctrl_c(launcher: subprocess.Popen[bytes], home: Path) -> None:
    """SIGINT to the launcher's process group, as a terminal sends it; it exits 0 and
    nothing of its group outlives it."""
    group = int((home / "standalone.group").read_text())
    os.killpg(launcher.pid, signal.SIGINT)
    assert launcher.wait(timeout=120) == 0
    deadline = time.monotonic() + 10
    while _group_alive(group) or _group_alive(launcher.pid):
        assert time.monotonic() < deadline, "a process outlived the launcher"
        time.sleep(0.1)


def _group_alive(group: int) -> bool:
    """Whether a live process (not a zombie its parent has yet to reap: the parent of an
    orphan here may reap late) is in process group ``group``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def url_of(port: int, name: str = "airflow") -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{name}"


@pytest.mark.slow
@needs_postgres
def test_make_up_starts_postgres_for_airflow_and_ctrl_c_stops_it_keeping_the_data(
    tmp_path: Path, short: Path
) -> None:
    port, cluster = free_port(), short / "airflow-pg"
    launcher, home = start(tmp_path, AIRFLOW_PG_PORT=str(port), AIRFLOW_PG_DIR=str(cluster))
    try:
        assert database(home) == {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url_of(port),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": url_of(port),
        }
        assert (home / "postgres.dir").read_text().strip() == str(cluster)
        engine = create_engine(url_of(port), poolclass=NullPool)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE kept (n integer)"))
            connection.execute(text("INSERT INTO kept VALUES (42)"))
        engine.dispose()
        ctrl_c(launcher, home)
        assert not listening(port)
        assert (cluster / "data" / "PG_VERSION").exists()  # the data is kept
        assert not (home / "postgres.dir").exists()

        # The next start finds Airflow's database as it was; airflow-down.sh stops it all.
        launcher, home = start(tmp_path, AIRFLOW_PG_PORT=str(port), AIRFLOW_PG_DIR=str(cluster))
        engine = create_engine(url_of(port), poolclass=NullPool)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT n FROM kept")).scalar_one() == 42
        engine.dispose()
        down = subprocess.run(
            ["bash", str(SCRIPTS / "airflow-down.sh"), str(home)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == "stopped", down.stdout
        assert launcher.wait(timeout=30) == 0
        assert not listening(port)
        assert not (home / "postgres.dir").exists()
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)


@pytest.mark.slow
@needs_postgres
def test_a_postgres_already_on_the_port_is_used_and_left_running(
    tmp_path: Path, short: Path
) -> None:
    port, theirs = free_port(), short / "theirs"
    started = subprocess.run(
        ["bash", str(SCRIPTS / "start-postgres.sh"), "--port", str(port), str(theirs)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stderr
    launcher, home = start(
        tmp_path,
        AIRFLOW_PG_PORT=str(port),
        AIRFLOW_PG_DIR=str(short / "ours"),
        AIRFLOW_PG_DATABASE="airflow_theirs",
    )
    try:
        url = url_of(port, "airflow_theirs")  # made on their server
        assert database(home)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url
        assert not (home / "postgres.dir").exists()  # not the launcher's to stop
        assert not (short / "ours").exists()
        ctrl_c(launcher, home)
        assert listening(port)
        engine = create_engine(url, poolclass=NullPool)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
        engine.dispose()
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)


@pytest.mark.slow
@needs_postgres
def test_airflow_down_stops_the_postgres_a_killed_launcher_left(
    tmp_path: Path, short: Path
) -> None:
    port, cluster = free_port(), short / "airflow-pg"
    launcher, home = start(tmp_path, AIRFLOW_PG_PORT=str(port), AIRFLOW_PG_DIR=str(cluster))
    group = int((home / "standalone.group").read_text())
    launcher.kill()
    launcher.wait(timeout=30)
    assert listening(port)
    down = subprocess.run(
        ["bash", str(SCRIPTS / "airflow-down.sh"), str(home)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == "stopped (forced)", (down.stdout, down.stderr)
    assert not listening(port)
    assert not _group_alive(group)
    assert (cluster / "data" / "PG_VERSION").exists()


@pytest.mark.slow
@needs_postgres
def test_airflow_stop_checks_the_launcher_s_postgres_is_gone(tmp_path: Path, short: Path) -> None:
    """``Airflow.stop()`` (the tests' and the demo's stop) passes once the launcher has
    stopped its PostgreSQL; a server the launcher left running is stopped, its data kept,
    and the stop fails saying so."""
    port, cluster = free_port(), short / "airflow-pg"
    launcher, home = start(tmp_path, AIRFLOW_PG_PORT=str(port), AIRFLOW_PG_DIR=str(cluster))
    try:
        Airflow("http://127.0.0.1:1", home, tmp_path / "launcher.log", launcher).stop()
        assert not listening(port)
        assert not (home / "postgres.dir").exists()
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)

    # A launcher that ended and left its server running (its stop failed, or it was killed).
    started = subprocess.run(
        ["bash", str(SCRIPTS / "start-postgres.sh"), "--port", str(port), str(cluster)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stderr
    (home / "postgres.dir").write_text(f"{cluster}\n")
    ended = subprocess.Popen(["true"], start_new_session=True)
    ended.wait(timeout=30)
    with pytest.raises(RuntimeError, match="left its PostgreSQL in .* running"):
        Airflow("http://127.0.0.1:1", home, tmp_path / "launcher.log", ended).stop()
    assert not listening(port)
    assert (cluster / "data" / "PG_VERSION").exists()
    assert not (home / "postgres.dir").exists()


@needs_postgres
def test_a_hostile_database_name_starts_nothing(tmp_path: Path, short: Path) -> None:
    port, cluster = free_port(), short / "never"
    launcher, home = launch(
        tmp_path,
        AIRFLOW_PG_PORT=str(port),
        AIRFLOW_PG_DIR=str(cluster),
        AIRFLOW_PG_DATABASE='airflow"; DROP DATABASE postgres; --',
    )
    try:
        assert launcher.wait(timeout=120) == 1
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert "a database name is lower-case letters" in (tmp_path / "launcher.log").read_text()
    assert not (home / "database.json").exists()  # Airflow never started
    assert not (home / "postgres.dir").exists()
    assert not cluster.exists()
    assert not listening(port)


def test_a_named_database_is_used_as_it_is(tmp_path: Path) -> None:
    named = "postgresql+psycopg://someone@127.0.0.1:1/theirs"
    launcher, home = start(tmp_path, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=named)
    try:
        assert database(home) == {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": named,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": named,
        }
        assert not (home / "postgres.dir").exists()
        ctrl_c(launcher, home)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)


def test_without_make_up_s_setting_airflow_keeps_sqlite(tmp_path: Path) -> None:
    launcher, home = start(tmp_path, CURSOROPS_AIRFLOW_DB="sqlite")
    try:
        assert database(home) == {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": None,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": None,
        }
        ctrl_c(launcher, home)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)


def test_make_up_asks_for_postgres_and_make_down_stops_it() -> None:
    makefile = (REPO / "Makefile").read_text()
    up = makefile.split("\nup:", 1)[1].split("\n\n", 1)[0]
    assert "CURSOROPS_AIRFLOW_DB ?= postgres" in makefile
    assert "CURSOROPS_AIRFLOW_DB=$(CURSOROPS_AIRFLOW_DB) bash scripts/airflow-up.sh" in up
    assert "bash scripts/airflow-down.sh" in makefile.split("\ndown:", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--database", 'air"; DROP DATABASE x; --'], "a database name is lower-case letters"),
        (["--database", "Airflow"], "a database name is lower-case letters"),
        (["--port", "5432x"], "the port must be a number from 1 to 65535"),
        (["--port", "70000"], "the port must be a number from 1 to 65535"),
    ],
)
def test_start_postgres_refuses_a_hostile_port_or_database(flags: list[str], said: str) -> None:
    refused = subprocess.run(
        ["bash", str(SCRIPTS / "start-postgres.sh"), *flags, "/tmp/never-made"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert said in refused.stderr
    assert not Path("/tmp/never-made").exists()

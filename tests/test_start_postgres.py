"""``scripts/start-postgres.sh -- COMMAND`` stops the server it started, whatever happens.

This is how ``make test`` runs the suite: the throwaway PostgreSQL and its
folder must be gone afterwards when the suite passes, fails, or is stopped
with Ctrl-C (SIGINT to the whole process group, as a terminal sends it).
Each test starts its own server on a free port.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.local.ports import free_port, listening

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "start-postgres.sh"

if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("pg_config"):
    pytest.skip("PostgreSQL is not installed", allow_module_level=True)


@pytest.fixture
def temp() -> Iterator[Path]:
    """The script's TMPDIR: under /tmp and open to all, as the server may run as postgres."""
    folder = Path(tempfile.mkdtemp(prefix="start-pg-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def environment(temp: Path, port: int) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(temp), "CURSOROPS_TEST_PG_PORT": str(port)}


def test_a_failing_command_gets_the_url_and_the_server_is_stopped_and_removed(
    temp: Path,
) -> None:
    port = free_port()
    done = subprocess.run(
        ["bash", str(SCRIPT), "--", "bash", "-c", 'echo "$CURSOROPS_TEST_PG_URL"; exit 3'],
        env=environment(temp, port),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == f"postgresql+psycopg://postgres@127.0.0.1:{port}/cursorops_test"
    assert not listening(port)
    assert list(temp.iterdir()) == []


def test_ctrl_c_stops_the_command_and_the_server(temp: Path) -> None:
    port = free_port()
    ready = temp / "ready"
    process = subprocess.Popen(
        ["bash", str(SCRIPT), "--", "bash", "-c", f"touch {ready}; exec sleep 300"],
        env=environment(temp, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), process.stderr.read() if process.stderr else ""
        assert listening(port)
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=60) == 130
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert not listening(port)
    assert [p.name for p in temp.iterdir()] == ["ready"]


def test_a_folder_is_refused_with_a_command() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "/tmp/somewhere", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "give no DIR" in done.stderr

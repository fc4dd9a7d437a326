"""The check that fails a test run which leaves processes behind (``tests/leftovers.py``)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests import leftovers


def _detached_sleep(env: dict[str, str]) -> int:
    """A ``sleep`` in a session of its own, reparented to init: no longer our descendant."""
    started = subprocess.run(
        ["bash", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/cmdline").read_bytes() != b"sleep\x00300\x00":
        assert time.monotonic() < deadline, "setsid did not exec sleep"
        time.sleep(0.05)
    return pid


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_a_process_of_this_run_is_found_after_it_left_the_tree_and_is_stopped() -> None:
    token = os.environ[leftovers.RUN_MARKER]
    pid = _detached_sleep(dict(os.environ))
    try:
        found = [p for p in leftovers.find(token, os.getpid()) if p.pid == pid]
        assert [p.command for p in found] == ["sleep 300"]
        leftovers.stop(found)
        assert _gone(pid)
    finally:
        subprocess.run(["kill", "-9", str(pid)], capture_output=True, check=False)


def test_a_process_without_the_marker_outside_the_tree_is_left_alone() -> None:
    token = os.environ[leftovers.RUN_MARKER]
    other = {k: v for k, v in os.environ.items() if k != leftovers.RUN_MARKER}
    pid = _detached_sleep(other)
    try:
        assert pid not in {p.pid for p in leftovers.find(token, os.getpid())}
        assert pid not in {p.pid for p in leftovers.find("another-run", os.getpid())}
    finally:
        subprocess.run(["kill", "-9", str(pid)], capture_output=True, check=False)


def test_a_child_that_dropped_the_marker_is_found_while_it_is_a_descendant() -> None:
    token = os.environ[leftovers.RUN_MARKER]
    child = subprocess.Popen(["sleep", "300"], env={"PATH": os.environ["PATH"]})
    try:
        assert child.pid in {p.pid for p in leftovers.find(token, os.getpid())}
    finally:
        child.kill()
        child.wait()
    assert child.pid not in {p.pid for p in leftovers.find(token, os.getpid())}


def test_only_servers_fail_the_run() -> None:
    assert leftovers.Leftover(1, "cursorops standalone /tmp/home").is_server
    assert not leftovers.Leftover(1, "python -c from multiprocessing.resource_tracker").is_server


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("cursorops standalone /tmp/home", "cursorops standalone"),
        ("cursorops standalone /tmp/a home/with airflow in it", "cursorops standalone"),
        ("/venv/bin/python /venv/bin/cursorops standalone", "cursorops standalone"),
        (
            "/venv/bin/python3.11 -m cursorops.cli.main --home /tmp/h standalone",
            "cursorops standalone",
        ),
        ("/venv/bin/python /venv/bin/airflow standalone", "Airflow"),
        ("/usr/lib/postgresql/15/bin/postgres -D /tmp/x/data", "PostgreSQL"),
        ("postgres: checkpointer ", "PostgreSQL"),
        (
            "/venv/bin/python -m cursorops.cli.main --metadata-url postgresql://h/db topics list",
            "process",
        ),
        ("/usr/bin/java -cp /venv/pyspark/jars/* org.apache.spark.deploy.SparkSubmit", "Spark JVM"),
        ("/venv/bin/python /venv/bin/airflow scheduler", "Airflow"),
        ("sleep 300", "process"),
    ],
)
def test_leftovers_are_named_for_what_they_are(command: str, kind: str) -> None:
    assert leftovers.Leftover(1, command).kind == kind

"""Processes a test run leaves behind: found by a marker every process it starts inherits.

``tests/conftest.py`` puts :data:`RUN_MARKER` in the test process's environment
when the run starts; every process started from it (a ``cursorops standalone``, a
Spark JVM, ``airflow standalone`` and its children, a PostgreSQL a test starts)
inherits it, including those that left the process tree (a background standalone
in a session of its own, reparented to init). A process of the run that changed its
environment is still found while it is a descendant of the test process.
Another run's processes, and anything a developer started, carry another
marker or none, and are never reported nor stopped.

A process that writes its title over its environment (setproctitle's default,
which Airflow's processes use; PostgreSQL's children) loses the marker in
``/proc/PID/environ``: it is found only while in the tree. A background cursorops
standalone, titled ``cursorops standalone HOME``, keeps its environment
(``SPT_NOENV``); the Airflow harness checks its own process group; PostgreSQL's
postmaster keeps it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

RUN_MARKER = "PYTEST_CURSOROPS_RUN"
"""Not a ``CURSOROPS_*`` name: tests strip those from the environments they pass on."""
SERVERS = ("cursorops standalone", "PostgreSQL", "Spark JVM", "Airflow")
"""What a run must never leave running. Anything else it left (a helper that ends with the
test process, such as multiprocessing's resource tracker) is only named."""


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str

    @property
    def kind(self) -> str:
        """What it is: one of :data:`SERVERS`, or ``process``."""
        command = self.command
        if command.startswith("cursorops standalone "):
            return "cursorops standalone"  # a background one, by its title
        if (
            "standalone" in command
            and "airflow" not in command
            and ("cursorops" in command or "cli." in command)
        ):
            return "cursorops standalone"
        program = os.path.basename(command.split(" ", 1)[0])
        if program == "java" and "spark" in command.lower():
            return "Spark JVM"
        if "airflow" in command:
            return "Airflow"
        if program == "postgres" or command.startswith("postgres:"):
            return "PostgreSQL"
        return "process"

    @property
    def is_server(self) -> bool:
        return self.kind in SERVERS

    def __str__(self) -> str:
        return f"{self.kind} (pid {self.pid}): {self.command[:200]}"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name, or None if gone."""
    raw = _read(Path(f"/proc/{pid}/stat"))
    if raw is None:
        return None
    # The command name is in parentheses and may hold spaces or parentheses itself.
    return raw[raw.rindex(b")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """The state letter and parent pid of ``pid`` (``/proc/PID/stat``), or None if gone."""
    fields = _fields(pid)
    if fields is None:
        return None
    return fields[0].decode(), int(fields[1])


def _command(pid: int) -> str:
    raw = _read(Path(f"/proc/{pid}/cmdline")) or b""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def in_session(session: int) -> list[Leftover]:
    """Live processes of the session ``session`` (a launcher started with
    ``start_new_session``): they stay in it whatever process group they move to, whoever
    their parent becomes, and whatever title they give themselves."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _fields(int(entry.name))
        if fields is None or fields[0] in (b"Z", b"X") or int(fields[3]) != session:
            continue
        found.append(Leftover(int(entry.name), _command(int(entry.name))))
    return found


def find(token: str, root: int) -> list[Leftover]:
    """Live processes carrying ``RUN_MARKER=token``, or descending from ``root``; not ``root``."""
    marker = f"{RUN_MARKER}={token}".encode()
    parents: dict[int, int] = {}
    marked: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        state = _stat(pid)
        if state is None or state[0] in ("Z", "X"):
            continue
        parents[pid] = state[1]
        environ = _read(entry / "environ")
        if environ is not None and marker in environ.split(b"\0"):
            marked.add(pid)
    found = []
    for pid in sorted(parents):
        if pid == root or pid == os.getpid():
            continue
        ancestor, seen = parents.get(pid), 0
        while ancestor not in (None, 0, 1, root) and seen < 1000:
            ancestor, seen = parents.get(ancestor), seen + 1
        if pid in marked or ancestor == root:
            found.append(Leftover(pid, _command(pid)))
    return found


def wait_for_servers(token: str, root: int, grace_s: float) -> list[Leftover]:
    """What is left once no server is, or after ``grace_s`` (servers that were stopping
    may end)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = find(token, root)
        if not any(leftover.is_server for leftover in left) or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def stop(leftovers: Iterable[Leftover], grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL for those still there after ``grace_s``."""
    pids = {leftover.pid for leftover in leftovers}
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if (_stat(pid) or ("X", 0))[0] not in ("Z", "X")}
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

"""Where the standalone serving a home listens, and how a command reaches it.

Every ``cursorops standalone`` also serves its admin REST app on a private Unix socket
of its home: ``/tmp/cursorops-<uid>/<key>.sock``, the key being the first 16 hex digits
of the SHA-256 of the home's real path and the metadata URL. The folder is this user's
only (mode 700), the socket mode 600: on it the operating system's user is the
authentication. ``<socket>.lock`` is locked (``flock``) by the standalone for its whole
life, so a home is never served twice; it holds the holder's pid and whether it runs in
the background.

:func:`serving_socket` is what a command calls first: the socket of the standalone
serving the home, starting a background one (``cursorops standalone --background``)
when none answers. This module imports only the standard library: it is on every
command's path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cursorops.core.domain.admin_socket import STATUS_PATH, STOP_PATH

DEFAULT_HOME = "~/.cursorops"
LOG_NAME = "logs/standalone.log"
"""A background standalone's standard streams, under its home."""
EXIT_SERVED_ELSEWHERE = 0
"""A background standalone that finds the home already served exits with this status:
another starter won the race, which is what every starter wanted."""
STOP_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 5.0
LOG_LINES = 5
"""Lines of a background standalone's log an error quotes when it dies starting."""


def socket_folder() -> Path:
    """``/tmp/cursorops-<uid>``: short whatever the home's length (a socket path has a
    108-byte limit)."""
    return Path(f"/tmp/cursorops-{os.getuid()}")


def socket_path(home: str, metadata_url: str | None) -> Path:
    """The socket of the standalone serving ``home`` with ``metadata_url`` (None: SQLite
    in the home)."""
    resolved = os.path.realpath(os.path.expanduser(home))
    key = hashlib.sha256(f"{resolved}\0{metadata_url or ''}".encode("utf-8", "surrogatepass"))
    return socket_folder() / f"{key.hexdigest()[:16]}.sock"


def lock_path(sock: Path) -> Path:
    """``<socket>.lock``: held by the standalone serving the socket, for its whole life."""
    return sock.with_name(sock.name + ".lock")


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` may not hold a home's socket (None: it may): it must be a real
    directory owned by this user that nobody else may enter."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist"
    except OSError as exc:
        return f"{folder} cannot be examined: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder"
    if info.st_uid != os.getuid():
        return f"{folder} belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
    if stat.S_IMODE(info.st_mode) & 0o077:
        return (
            f"{folder} has mode {stat.S_IMODE(info.st_mode):o}: others may enter it "
            "(it must be 700)"
        )
    return None


def private_folder() -> Path:
    """The socket folder, created with mode 700 when missing; a StandaloneError when it
    belongs to someone else or others may enter it."""
    folder = socket_folder()
    try:  # noqa: SIM105  (not contextlib: one import less on every command's path)
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    problem = folder_problem(folder)
    if problem is not None:
        raise _error(f"refusing the socket folder: {problem}")
    return folder


# -- the lock ----------------------------------------------------------------------


def take_lock(path: Path) -> int | None:
    """Lock ``path`` for this process (its open file), or None when another holds it.

    A standalone removes the file as it exits, still holding it: a lock taken on a file
    that is no longer at ``path`` is let go and taken again on the new one.
    """
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def write_holder(fd: int, *, background: bool) -> None:
    """Say in the held lock file who holds it."""
    import json

    data = json.dumps({"pid": os.getpid(), "background": background}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def holder(path: Path) -> dict[str, object] | None:
    """Who holds the lock at ``path`` (``pid``, ``background``), or None when nobody does."""
    import json

    deadline = time.monotonic() + 2.0
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            else:
                return None
            text = os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        try:
            found = json.loads(text)
        except ValueError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("pid"), int):
            return found
        if time.monotonic() > deadline:
            # Held, but the holder has not said who it is yet.
            return {"pid": None, "background": None}
        time.sleep(0.01)


def lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# -- asking the standalone -----------------------------------------------------------


def answers(sock: Path) -> bool:
    """Something accepts connections on ``sock``, in a folder of this user only."""
    if folder_problem(sock.parent) is not None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


def ask(
    sock: Path, method: str, path: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> tuple[int, bytes] | None:
    """One request on ``sock``: the status and body, or None when nothing answers."""
    if folder_problem(sock.parent) is not None:
        return None
    from cursorops.cli.transport import Transport
    from cursorops.core.domain.errors import CursorOpsError

    try:
        answer = Transport(socket_path=str(sock), timeout_s=timeout_s).request(method, path)
    except CursorOpsError:
        return None
    return answer.status, answer.body


def status(home: str, metadata_url: str | None) -> dict[str, object] | None:
    """What the standalone serving the home says of itself, or None when none answers."""
    import json

    answer = ask(socket_path(home, metadata_url), "GET", STATUS_PATH)
    if answer is None or answer[0] != 200:
        return None
    document = json.loads(answer[1])
    return document if isinstance(document, dict) else None


def stop(home: str, metadata_url: str | None, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
    """Stop the standalone serving the home and wait until it has let go of the home;
    its pid, or None when none was serving it."""
    sock = socket_path(home, metadata_url)
    lock = lock_path(sock)
    found = holder(lock)
    if found is None:
        return None
    pid = found.get("pid")
    answer = ask(sock, "POST", STOP_PATH)
    if answer is None and isinstance(pid, int):
        try:  # noqa: SIM105
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while lock_held(lock):
        if time.monotonic() > deadline:
            raise _error(
                f"the standalone (pid {pid}) serving {home} did not stop within {timeout_s:.0f} s"
            )
        time.sleep(0.02)
    return pid if isinstance(pid, int) else None


# -- starting one ------------------------------------------------------------------


def serving_socket(
    home: str,
    metadata_url: str | None,
    *,
    start: bool = True,
    timeout_s: float = 60,
    notice: Callable[[str], None] | None = None,
) -> Path:
    """The socket of the standalone serving ``home`` with ``metadata_url``.

    When none answers, a background standalone is started for the home
    (``cursorops standalone --background``, in a session of its own, its output in
    ``<home>/logs/standalone.log``) and waited for; ``start=False`` raises instead.
    Several callers racing end with one standalone: each starts one, the first to lock
    the home serves it, the others exit at once; when the one that held the home stops
    before answering (it was stopping as this caller came), another is started. A
    StandaloneError says why none serves (with the log's last lines when the one started
    died). ``notice`` is told, once, that one is being started (it takes a few seconds).
    """
    sock = socket_path(home, metadata_url)
    if answers(sock):
        return sock
    if not start:
        raise _error(f"no cursorops standalone serves {home}")
    import subprocess

    private_folder()
    log = Path(os.path.expanduser(home)) / LOG_NAME
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(f"cannot make {log.parent} for the standalone's log: {exc.strerror}") from exc
    # It runs in "/": a relative home is made absolute here. The metadata URL travels in
    # the environment, not on the command line, which ps shows to everyone.
    absolute = os.path.abspath(os.path.expanduser(home))
    environment = {
        **os.environ,
        "CURSOROPS_HOME": absolute,
        "CURSOROPS_METADATA_URL": metadata_url or "",
        # setproctitle writes its title over the command line only, not over the
        # environment /proc/PID/environ shows.
        "SPT_NOENV": "1",
    }
    command = [sys.executable, "-m", "cursorops.cli.main", "--home", absolute]
    command += ["standalone", "--background"]

    def spawn() -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(
                command,
                env=environment,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    lock = lock_path(sock)
    if notice is not None:
        notice(
            f"Starting a cursorops standalone for {absolute} (it stops after an hour without "
            "a request, or with `cursorops standalone stop`)..."
        )
    process = spawn()
    deadline = time.monotonic() + timeout_s
    while True:
        if status(home, metadata_url) is not None:
            return sock
        code = process.poll()
        if code is not None and code != EXIT_SERVED_ELSEWHERE:
            raise _error(
                f"the background standalone for {home} exited with status {code} while "
                f"starting ({log}): {' | '.join(last_lines(log, LOG_LINES))}"
            )
        if code is not None and not lock_held(lock) and not answers(sock):
            # The standalone that held the home when this one started stopped without
            # serving this caller (its idle timeout, a stop): start another.
            process = spawn()
        if time.monotonic() > deadline:
            if code is None:
                process.terminate()
                process.wait(STOP_TIMEOUT_S)
            raise _error(
                f"no standalone answered on {sock} within {timeout_s:g} s ({log}): "
                f"{' | '.join(last_lines(log, LOG_LINES))}"
            )
        time.sleep(0.02)


def last_lines(path: Path, count: int) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ["(no log)"]
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-count:] or ["(no output)"]


def _error(message: str) -> Exception:
    from cursorops.core.domain.errors import StandaloneError

    return StandaloneError(message)

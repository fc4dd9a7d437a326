"""The ``cursorops`` entry point: hand the command to a running daemon, or run it here.

A command run here first imports what it needs (SQLAlchemy, numpy, pyarrow's
Parquet reader): about two thirds of a second before any work. ``cursorops daemon
start`` keeps one process with all of that imported (:mod:`cursorops.cli.daemon`); this
module, which imports only the standard library, finds that daemon's socket for
the command's home and metadata store, passes it the command line, environment,
working directory and its own standard streams (as file descriptors), and waits
for the exit code. The daemon forks a worker that runs the very command
:func:`cursorops.cli.main.main` would run, writing straight to this process's terminal or
pipes, so output, exit codes and errors are the same either way.

Whenever the daemon cannot answer for this command (none running, another build
of the code, another home, metadata store or ledger root, or a command it does
not take), the command runs in this process, as it would without a daemon.
``CURSOROPS_DAEMON=off`` in the environment never asks a daemon.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_HOME = "~/.cursorops"
HEADER = struct.Struct("!I")
"""Length prefix of every message on the daemon's socket (then that many bytes of JSON)."""
MAX_MESSAGE = 16 * 1024 * 1024
STREAMS = 3
"""stdin, stdout and stderr travel with the request as file descriptors."""
EXIT_UNEXPECTED = 1
IN_CALLER = ("daemon", "demo", "standalone")
"""Commands that always run in the caller's process: managing the daemon itself, the
demo, which starts Airflow and must stop with the caller's terminal, and the
standalone server, a long-running process of its own."""
_PACKAGES = ("cli", "core", "spark")
_VALUED_GLOBALS = {"--home", "--role", "--metadata-url", "-o", "--output"}


# -- where a daemon listens ------------------------------------------------------


def socket_folder() -> Path:
    """``/tmp/cursorops-<uid>``: short enough for a Unix socket path whatever the home's length."""
    return Path(f"/tmp/cursorops-{os.getuid()}")


def socket_path(home: str, metadata_url: str | None) -> Path:
    """The socket of the daemon serving ``home`` with ``metadata_url`` (None: SQLite in home)."""
    resolved = os.path.realpath(os.path.expanduser(home))
    key = hashlib.sha256(f"{resolved}\0{metadata_url or ''}".encode("utf-8", "surrogatepass"))
    return socket_folder() / f"{key.hexdigest()[:24]}.sock"


def folder_is_private(folder: Path) -> bool:
    """The socket folder is a real directory of this user that nobody else may enter.

    A daemon receives the caller's terminal and environment: never talk to a socket
    another user could have put there.
    """
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )


def build_id() -> str:
    """What identifies this build of the code: every source file's path, size and mtime.

    A daemon started before the code changed declines commands, which then run
    here with the code on disk; ``cursorops daemon status`` reports it as stale.
    """
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{sys.version}\0{sys.executable}".encode())
    for package in _PACKAGES:
        for folder, subfolders, files in os.walk(root / package):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    info = os.stat(os.path.join(folder, name))
                    digest.update(f"{folder}/{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:24]


def global_options(
    argv: Sequence[str], environ: dict[str, str]
) -> tuple[str, str | None, str | None]:
    """The home, metadata URL and command the command line names, to find the daemon's socket.

    Only a hint: the daemon's worker parses the whole command line and declines
    a command whose configuration differs from its own.
    """
    found: dict[str, str] = {}
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-"):
            found["command"] = token
            break
        name, equals, value = token.partition("=")
        if name in _VALUED_GLOBALS:
            found[name] = value if equals else next(tokens, "")
    home = found.get("--home") or environ.get("CURSOROPS_HOME") or DEFAULT_HOME
    url = found.get("--metadata-url") or environ.get("CURSOROPS_METADATA_URL") or None
    return home, url, found.get("command")


# -- messages --------------------------------------------------------------------


def send_message(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = HEADER.pack(len(data)) + data
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        sent = sock.sendmsg([payload], ancillary)
        payload = payload[sent:]
    sock.sendall(payload)


def receive_message(
    sock: socket.socket, max_fds: int = 0
) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors that came with it; (None, []) at end of stream."""
    fds: list[int] = []
    head = b""
    while len(head) < HEADER.size:
        if max_fds and not fds:
            chunk, ancillary, _flags, _address = sock.recvmsg(
                HEADER.size - len(head), socket.CMSG_SPACE(max_fds * array.array("i").itemsize)
            )
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(data[: len(data) - len(data) % received.itemsize])
                    fds.extend(received)
        else:
            chunk = sock.recv(HEADER.size - len(head))
        if not chunk:
            _close_all(fds)
            return None, []
        head += chunk
    (length,) = HEADER.unpack(head)
    if length > MAX_MESSAGE:
        _close_all(fds)
        raise ValueError(f"message of {length} bytes on the daemon socket")
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            _close_all(fds)
            return None, []
        body += chunk
    message = json.loads(body)
    if not isinstance(message, dict):
        _close_all(fds)
        raise ValueError("a daemon message is a JSON object")
    return message, fds


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def connect(path: Path) -> socket.socket | None:
    """A connection to the daemon at ``path``, or None when there is no daemon to talk to."""
    if not folder_is_private(path.parent):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


# -- the client ------------------------------------------------------------------


def _stream_facts(stream: Any) -> dict[str, Any] | None:
    """How this process's text stream encodes and buffers, for the worker to do the same."""
    if stream is None:
        return None
    return {
        "encoding": getattr(stream, "encoding", None) or "utf-8",
        "errors": getattr(stream, "errors", None) or "strict",
        "line_buffering": bool(getattr(stream, "line_buffering", False)),
        "write_through": bool(getattr(stream, "write_through", False)),
    }


def run_on_daemon(argv: Sequence[str]) -> int | None:
    """Run the command on the daemon for its home; its exit code, or None if it declined."""
    environ = dict(os.environ)
    if environ.get("CURSOROPS_DAEMON", "").lower() == "off":
        return None
    home, url, command = global_options(argv, environ)
    if command in IN_CALLER:
        return None
    sock = connect(socket_path(home, url))
    if sock is None:
        return None
    streams = (sys.stdin, sys.stdout, sys.stderr)
    fds = [s.fileno() if s is not None else -1 for s in streams]
    if any(fd < 0 for fd in fds):
        sock.close()
        return None
    with sock, _Forwarder() as forwarder:
        try:
            send_message(
                sock,
                {
                    "op": "run",
                    "argv": list(argv),
                    "env": environ,
                    "cwd": os.getcwd(),
                    "umask": _umask(),
                    "build": build_id(),
                    "streams": [_stream_facts(s) for s in streams],
                },
                fds,
            )
            reply, _ = receive_message(sock)
        except (OSError, ValueError):
            reply = None
        if reply is None or "pid" not in reply:
            if forwarder.received:
                # Interrupted before the daemon took the command: nothing ran.
                return 128 + forwarder.received[0]
            return None
        forwarder.worker = int(reply["pid"])
        try:
            done, _ = receive_message(sock)
        except (OSError, ValueError):
            done = None
        if done is not None and isinstance(done.get("exit"), int):
            return int(done["exit"])
        if forwarder.received:
            return 128 + forwarder.received[-1]
        print(
            "error: the daemon's worker for this command stopped without an exit code "
            "(see cursorops daemon status)",
            file=sys.stderr,
        )
        return EXIT_UNEXPECTED


def _umask() -> int:
    """This process's umask (reading it means setting it: set it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class _Forwarder:
    """Signals this process receives while the daemon runs its command go to the worker.

    Handlers are in place before the request is sent; a signal that arrives
    before the worker's pid is known is sent on as soon as it is.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._worker: int | None = None
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    @property
    def worker(self) -> int | None:
        return self._worker

    @worker.setter
    def worker(self, pid: int) -> None:
        self._worker = pid
        for signum in self.received:
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self._worker is not None:
            with contextlib.suppress(OSError):
                os.kill(self._worker, signum)

    def _handle(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self._send(signum)

    def __enter__(self) -> _Forwarder:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``cursorops`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    code = run_on_daemon(arguments)
    if code is not None:
        return code
    from cursorops.cli.main import main as run_here

    return run_here(arguments)


if __name__ == "__main__":
    sys.exit(main())

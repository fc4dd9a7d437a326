"""``cursorops daemon``: one warm process per home, so a command starts in milliseconds.

A command run in a new process spends about two thirds of a second importing
SQLAlchemy, numpy and pyarrow before it does anything (``docs/benchmarks.md``,
CLI latency). The daemon imports them once, listens on a Unix socket of this
user (:func:`cursorops.cli.launcher.socket_path`, keyed by the home and the metadata URL),
and for each command :mod:`cursorops.cli.launcher` hands it, forks a worker: the worker
takes the caller's standard streams, environment and working directory, and
runs :func:`cursorops.cli.main.run`, exactly what the command would run in-process, with
its own store connections (the daemon itself never opens the store, so nothing
is shared across a fork). Commands still run one process each, concurrently, and
take the same locks as any other process on the store: the daemon changes when
a command starts, not what it does.

The worker declines a command (and the caller runs it itself) when the code on
disk is not the code the daemon loaded, when the command's home, metadata store
or ledger root differ from the daemon's, and for ``daemon`` and ``demo``.
The daemon stops on ``cursorops daemon stop``, on SIGTERM, or after
``--idle-timeout`` without a command. In ``ps`` it is ``cursorops daemon HOME``
and its workers ``cursorops daemon worker HOME`` (:data:`PROCESS_TITLE`).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cursorops.cli import launcher
from cursorops.core.config import Config
from cursorops.core.errors import DaemonError

DEFAULT_IDLE_TIMEOUT_MS = 3_600_000
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 5.0
"""How long the daemon waits for a connected caller to send its request."""
_PEER = struct.Struct("3i")
PROCESS_TITLE = "cursorops daemon"
"""What ``ps`` and ``pgrep -f`` show for the daemon, instead of ``python3.11 -m
cursorops.cli.daemon``."""


@dataclass(frozen=True)
class Address:
    """Which daemon: the home and metadata URL as the caller gave them, and its socket."""

    home: str
    metadata_url: str | None

    @property
    def socket(self) -> Path:
        return launcher.socket_path(self.home, self.metadata_url)

    @property
    def lock(self) -> Path:
        return self.socket.with_suffix(".lock")


# -- the daemon process ------------------------------------------------------------


MIGRATION_SCRIPTS = "cursorops.core.store.migrations."
"""Modules of Alembic's script directory, which :func:`preload` leaves out."""


def preload(metadata_url: str) -> None:
    """Import what commands import, so forked workers start with it in memory."""
    import importlib
    import pkgutil

    import numpy  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import sqlalchemy.orm
    from sqlalchemy.engine import make_url

    import cursorops.cli.main
    import cursorops.cli.output  # noqa: F401
    import cursorops.core

    for module in pkgutil.walk_packages(cursorops.core.__path__, "cursorops.core."):
        # Alembic's scripts run inside Alembic only (env.py needs its context), and only
        # when a store must be migrated: no command needs them in memory.
        if module.name.startswith(MIGRATION_SCRIPTS):
            continue
        importlib.import_module(module.name)
    make_url(metadata_url).get_dialect().import_dbapi()
    sqlalchemy.orm.configure_mappers()
    cursorops.cli.main.build_parser()


class Daemon:
    """The accept loop: one forked worker per command."""

    def __init__(self, address: Address, config: Config, idle_timeout_ms: int) -> None:
        self.address = address
        self.config = config
        self.idle_timeout_s = idle_timeout_ms / 1000
        self.build = launcher.build_id()
        self.started_ms = int(time.time() * 1000)
        self.served = 0
        self.workers: set[int] = set()
        self.stopping = False
        self.lock: int | None = None

    def serve(self) -> int:
        folder = self.address.socket.parent
        folder.mkdir(mode=0o700, exist_ok=True)
        if not launcher.folder_is_private(folder):
            print(f"error: {folder} must be a folder of this user only (mode 700)", file=sys.stderr)
            return 1
        lock = self.lock = _take_lock(self.address.lock)
        if lock is None:
            print("error: a daemon for this home is already running", file=sys.stderr)
            return 4
        with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as listener:
            with contextlib.suppress(FileNotFoundError):
                self.address.socket.unlink()
            listener.bind(str(self.address.socket))
            os.chmod(self.address.socket, 0o600)
            listener.listen(64)
            listener.settimeout(1.0)
            signal.signal(signal.SIGTERM, self._stop_on_signal)
            signal.signal(signal.SIGINT, self._stop_on_signal)
            print(f"cursorops daemon {os.getpid()} serving {self.address.home}", flush=True)
            try:
                self._loop(listener)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    self.address.socket.unlink()
                # Removed while still held: a starter waiting on this file sees it is gone.
                with contextlib.suppress(FileNotFoundError):
                    self.address.lock.unlink()
        os.close(lock)
        return 0

    def _stop_on_signal(self, _signum: int, _frame: object) -> None:
        self.stopping = True

    def _loop(self, listener: socket.socket) -> None:
        last_active = time.monotonic()
        while not self.stopping:
            if self._reap():
                last_active = time.monotonic()
            if not self.workers and time.monotonic() - last_active > self.idle_timeout_s:
                print("idle timeout: stopping", flush=True)
                return
            try:
                connection, _ = listener.accept()
            except (TimeoutError, InterruptedError):
                continue
            served = self.served
            with connection:
                self._answer(connection, listener)
            if self.served != served:
                # Only commands keep the daemon alive, not status requests.
                last_active = time.monotonic()

    def _reap(self) -> bool:
        reaped = False
        for pid in list(self.workers):
            with contextlib.suppress(ChildProcessError):
                done, _status = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    continue
            self.workers.discard(pid)
            reaped = True
        return reaped

    def _answer(self, connection: socket.socket, listener: socket.socket) -> None:
        _pid, uid, _gid = _PEER.unpack(
            connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER.size)
        )
        if uid != os.getuid():
            return
        connection.settimeout(REQUEST_TIMEOUT_S)
        try:
            request, fds = launcher.receive_message(connection, max_fds=launcher.STREAMS)
        except (OSError, ValueError):
            return
        if request is None:
            return
        try:
            op = request.get("op")
            if op == "status":
                launcher.send_message(connection, self.status())
            elif op == "stop":
                self.stopping = True
                launcher.send_message(connection, {"stopped": os.getpid()})
            elif op == "run" and request.get("build") != self.build:
                launcher.send_message(connection, {"decline": "stale build"})
            elif op == "run" and len(fds) == launcher.STREAMS:
                self._fork_worker(connection, listener, request, fds)
            else:
                launcher.send_message(connection, {"decline": f"unknown request {op!r}"})
        except OSError:
            pass
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _fork_worker(
        self,
        connection: socket.socket,
        listener: socket.socket,
        request: dict[str, Any],
        fds: list[int],
    ) -> None:
        pid = os.fork()
        if pid:
            self.workers.add(pid)
            self.served += 1
            return
        code = 1
        try:
            listener.close()
            if self.lock is not None:
                # A long command must not keep the next daemon from starting.
                os.close(self.lock)
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _set_title(f"{PROCESS_TITLE} worker {self.address.home}")
            connection.settimeout(None)
            code = run_worker(connection, request, fds, self.config)
        finally:
            os._exit(code)

    def status(self) -> dict[str, Any]:
        self._reap()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "pid": os.getpid(),
            "home": str(self.config.home),
            "metadataUrl": _redacted(self.config.metadata_url),
            "ledgerRoot": self.config.ledger_root,
            "socket": str(self.address.socket),
            "build": self.build,
            "startedMs": self.started_ms,
            "served": self.served,
            "workers": len(self.workers),
            "workerCpuS": children.ru_utime + children.ru_stime,
            "idleTimeoutMs": int(self.idle_timeout_s * 1000),
        }


def _set_title(title: str) -> None:
    """Name this process in ``ps``: its command line, and its 15-character ``comm``."""
    import setproctitle

    setproctitle.setproctitle(title)


def _take_lock(path: Path) -> int | None:
    """Hold the lock file at ``path`` (one daemon per socket), or None if another does.

    A daemon removes the file as it exits, still holding it; a lock taken on a file
    that is no longer at ``path`` is let go and taken again on the new one.
    """
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
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


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


# -- one command in a forked worker -------------------------------------------------


def run_worker(
    connection: socket.socket, request: dict[str, Any], fds: list[int], config: Config
) -> int:
    """Take the caller's streams, environment, folder and umask; run its command or decline it.

    Returns the worker's own exit status (0 once the caller has its answer).
    """
    from cursorops.cli import main as cli_main
    from cursorops.core.errors import CursorOpsError

    try:
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
    except (OSError, KeyError, TypeError, ValueError):
        launcher.send_message(connection, {"decline": "working directory or umask"})
        return 0
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin, sys.stdout, sys.stderr = (
        _text_stream(fd, facts, "r" if fd == 0 else "w")
        for fd, facts in enumerate(request["streams"])
    )
    os.environ.clear()
    os.environ.update(request["env"])
    argv = [str(a) for a in request["argv"]]
    sys.argv = ["cursorops", *argv]
    try:
        args = cli_main.build_parser().parse_args(argv)
    except SystemExit as exc:
        return _report(connection, _exit_status(exc))
    if args.command in launcher.IN_CALLER:
        launcher.send_message(connection, {"decline": f"{args.command} runs in the caller"})
        return 0
    try:
        same = cli_main.Context(args, sys.stdout).config() == config
    except CursorOpsError:
        same = False
    if not same:
        launcher.send_message(connection, {"decline": "another configuration"})
        return 0
    try:
        launcher.send_message(connection, {"pid": os.getpid()})
        code = cli_main.run(args)
    except SystemExit as exc:
        code = _exit_status(exc)
    except KeyboardInterrupt:
        # Forwarded before run() reached its own handler: the same line it would print.
        cli_main.report_error("interrupted")
        code = cli_main.EXIT_INTERRUPTED
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    launcher.send_message(connection, {"exit": code})
    return 0


def _report(connection: socket.socket, code: int) -> int:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    launcher.send_message(connection, {"pid": os.getpid()})
    launcher.send_message(connection, {"exit": code})
    return 0


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _text_stream(fd: int, facts: dict[str, Any] | None, mode: str) -> TextIO:
    """A text stream on ``fd`` that encodes and buffers as the caller's did."""
    facts = facts or {}
    raw = io.FileIO(fd, mode, closefd=False)
    binary = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        binary,
        encoding=facts.get("encoding") or "utf-8",
        errors=facts.get("errors") or "strict",
        line_buffering=bool(facts.get("line_buffering")),
        write_through=bool(facts.get("write_through")),
    )


# -- daemon start, stop, status (run in the caller) -----------------------------------


def ask(address: Address, request: dict[str, Any]) -> dict[str, Any] | None:
    """One request to the daemon at ``address``; its answer, or None if none answers."""
    sock = launcher.connect(address.socket)
    if sock is None:
        return None
    with sock:
        sock.settimeout(REQUEST_TIMEOUT_S)
        try:
            launcher.send_message(sock, request)
            answer, _ = launcher.receive_message(sock)
        except (OSError, ValueError):
            return None
    return answer


def status(address: Address) -> dict[str, Any]:
    """What the daemon for ``address`` says of itself, with whether it runs today's code."""
    answer = ask(address, {"op": "status"})
    if answer is None:
        return {"running": False, "socket": str(address.socket)}
    return {**answer, "running": True, "stale": answer.get("build") != launcher.build_id()}


def start(address: Address, config: Config, idle_timeout_ms: int) -> dict[str, Any]:
    """Start the daemon for ``address`` in the background (a stale one is replaced)."""
    current = status(address)
    if current["running"] and not current["stale"]:
        return {**current, "started": False}
    if current["running"]:
        stop(address)
    config.home.mkdir(parents=True, exist_ok=True)
    log_path = config.home / "daemon.log"
    environment = {
        **os.environ,
        "CURSOROPS_HOME": address.home,
        "CURSOROPS_METADATA_URL": address.metadata_url or "",
        # setproctitle writes the title over the command line only, not over the
        # environment (which /proc/PID/environ shows): the title fits, as the command
        # line names the home too.
        "SPT_NOENV": "1",
    }
    command = [
        sys.executable,
        "-m",
        "cursorops.cli.daemon",
        "--idle-timeout-ms",
        str(idle_timeout_ms),
    ]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [*command, "--home", address.home],
            env=environment,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        current = status(address)
        if current["running"]:
            return {**current, "started": True, "log": str(log_path)}
        if process.poll() is not None:
            raise DaemonError(
                f"the daemon exited with status {process.returncode} while starting: "
                f"{_last_line(log_path)} (log: {log_path})"
            )
        time.sleep(0.05)
    process.terminate()
    raise DaemonError(f"the daemon did not answer within {START_TIMEOUT_S:.0f} s (log: {log_path})")


def stop(address: Address) -> dict[str, Any]:
    """Stop the daemon for ``address``; waits until it has let go of its socket."""
    answer = ask(address, {"op": "stop"})
    if answer is None:
        return {"stopped": False, "socket": str(address.socket)}
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and _lock_held(address):
        time.sleep(0.05)
    return {"stopped": True, "pid": answer.get("stopped"), "socket": str(address.socket)}


def _lock_held(address: Address) -> bool:
    try:
        fd = os.open(address.lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


@contextlib.contextmanager
def running(address: Address, config: Config, idle_timeout_ms: int) -> Iterator[dict[str, Any]]:
    """A daemon for the duration of a ``with`` block (tests and benchmarks)."""
    started = start(address, config, idle_timeout_ms)
    try:
        yield started
    finally:
        stop(address)


def serve_main(argv: Sequence[str] | None = None) -> int:
    """``python -m cursorops.cli.daemon``: the daemon process ``cursorops daemon start``
    launches."""
    parser = argparse.ArgumentParser(prog="python -m cursorops.cli.daemon")
    parser.add_argument("--idle-timeout-ms", type=int, default=DEFAULT_IDLE_TIMEOUT_MS)
    parser.add_argument("--home", help="the home served (default: CURSOROPS_HOME)")
    args = parser.parse_args(argv)
    environ = dict(os.environ)
    if args.home:
        environ["CURSOROPS_HOME"] = args.home
    address = Address(
        environ.get("CURSOROPS_HOME") or launcher.DEFAULT_HOME,
        environ.get("CURSOROPS_METADATA_URL") or None,
    )
    config = Config.from_environ(environ)
    _set_title(f"{PROCESS_TITLE} {address.home}")
    preload(config.metadata_url)
    return Daemon(address, config, args.idle_timeout_ms).serve()


if __name__ == "__main__":
    sys.exit(serve_main())

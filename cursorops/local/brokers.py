"""``cursorops standalone`` brokers as local processes: one, or several on one store.

The one way the demo, the tests and the benchmarks start a broker they then talk to.
:func:`start` runs ``python -m cursorops.cli.main standalone`` on free ports
(``--broker-port 0``: the readiness line names the ports it took) in a session of its
own, its log (stderr) in a file of its home, and returns once that line is printed;
:meth:`Standalone.stop` sends SIGINT, as a person would with Ctrl-C, then kills what is
left of its process group. :func:`standalone` and :func:`cluster` are the context
managers around it.

The process gets the caller's environment (a test run's marker included, so that a
broker it left is found) with the stores named in it, or the home's defaults. A broker
that exits or stays silent for ``timeout_s`` raises :class:`BrokerStartError`, which
names its log and quotes its end.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

READY = re.compile(
    r"cursorops standalone ready: (pulsar://\S+)(?: admin (http://\S+))?"
    r"(?: tls (pulsar\+ssl://\S+))?(?: (https://\S+))?"
)
"""The line a standalone prints once it serves: its broker URL, then its admin URL, its
TLS broker URL and its TLS admin URL when it serves them."""
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 20


class BrokerStartError(RuntimeError):
    """A standalone exited, or never printed its readiness line, before it served."""


@dataclass
class Standalone:
    """One running ``cursorops standalone`` and what it printed."""

    home: Path
    process: subprocess.Popen[str]
    service_url: str
    web_url: str | None
    log: Path
    lines: list[str] = field(default_factory=list)
    """Its stdout, line by line, read by a thread for its whole life (it never blocks on
    a full pipe)."""
    tls_service_url: str | None = None
    tls_web_url: str | None = None

    @property
    def port(self) -> int:
        return int(self.service_url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        """What it printed: its log (stderr), then its stdout."""
        return self.log.read_text(errors="replace") + "".join(self.lines)

    def stop(self, sig: int = signal.SIGINT, timeout: float = STOP_TIMEOUT_S) -> int:
        """Send ``sig`` (SIGINT: a clean stop), wait up to ``timeout`` s, then SIGKILL; then
        kill anything left in its process group. Its exit code (negative: the signal)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)  # a stopped one handles no signal
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.returncode


def start(
    home: Path,
    *,
    web: bool = False,
    broker_port: int = 0,
    web_port: int = 0,
    extra: Sequence[str] = (),
    metadata_url: str | None = None,
    ledger_root: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    tree: Path | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> Standalone:
    """A standalone serving ``home``, once it printed its readiness line.

    One standalone per home: brokers sharing a store each have a home, and
    ``metadata_url`` and ``ledger_root`` name the shared stores. ``broker_port``, and with
    ``web`` the admin REST's ``web_port`` (else ``--no-web``): 0 is a free port. ``extra``
    are more ``standalone`` flags; ``env`` is added to the caller's environment. ``tree``:
    the checkout whose code runs (the process's ``cwd`` and ``PYTHONPATH``), default the
    installed cursorops.
    """
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"standalone-{uuid.uuid4().hex[:6]}.log"
    environ = dict(os.environ)
    if env is not None:
        environ.update(env)
    if metadata_url is not None:
        environ["CURSOROPS_METADATA_URL"] = metadata_url
    if ledger_root is not None:
        environ["CURSOROPS_LEDGER_ROOT"] = str(ledger_root)
    if tree is not None:
        environ["PYTHONPATH"] = str(tree)
    argv = [sys.executable, "-m", "cursorops.cli.main", "--home", str(home), "standalone"]
    argv += ["--broker-port", str(broker_port)]
    argv += ["--web-port", str(web_port)] if web else ["--no-web"]
    argv += list(extra)
    with open(log, "w") as err:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=environ,
            cwd=tree,
            start_new_session=True,
        )
    lines: list[str] = []
    found: list[re.Match[str]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = READY.search(line)
            if match and not found:
                found.append(match)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            why = (
                f"exited {process.returncode}"
                if process.poll() is not None
                else f"did not say ready within {timeout_s:.0f} s"
            )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            raise BrokerStartError(
                f"cursorops standalone on {home} {why}; its log, {log}, ends:\n"
                + "\n".join(tail + [line.rstrip("\n") for line in lines])
            )
        time.sleep(0.05)
    ready = found[0]
    return Standalone(
        home, process, ready.group(1), ready.group(2), log, lines, ready.group(3), ready.group(4)
    )


@contextlib.contextmanager
def standalone(
    home: Path,
    *,
    web: bool = False,
    broker_port: int = 0,
    web_port: int = 0,
    extra: Sequence[str] = (),
    metadata_url: str | None = None,
    ledger_root: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    tree: Path | None = None,
) -> Iterator[Standalone]:
    """:func:`start` (same options), stopped with SIGINT on the way out."""
    server = start(
        home,
        web=web,
        broker_port=broker_port,
        web_port=web_port,
        extra=extra,
        metadata_url=metadata_url,
        ledger_root=ledger_root,
        env=env,
        tree=tree,
    )
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Cluster:
    """Several standalones on one metadata store and one ledger root."""

    brokers: list[Standalone]
    metadata_url: str
    ledger_root: Path

    @property
    def service_url(self) -> str:
        """The multi-host service URL a client takes."""
        return "pulsar://" + ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)


@contextlib.contextmanager
def cluster(
    work: Path,
    count: int,
    metadata_url: str,
    *,
    ledger_root: Path | None = None,
    web: bool = False,
    env: Mapping[str, str] | None = None,
    tree: Path | None = None,
) -> Iterator[Cluster]:
    """``count`` standalones, ``work/broker-<i>`` their homes (from 0), sharing
    ``metadata_url`` (its schema already migrated) and ``ledger_root`` (default
    ``work/ledgers``); every one stopped on the way out, those started so far if one
    fails to start."""
    root = ledger_root if ledger_root is not None else work / "ledgers"
    brokers: list[Standalone] = []
    try:
        for i in range(count):
            brokers.append(
                start(
                    work / f"broker-{i}",
                    web=web,
                    metadata_url=metadata_url,
                    ledger_root=root,
                    env=env,
                    tree=tree,
                )
            )
        yield Cluster(brokers, metadata_url, root)
    finally:
        for broker in brokers:
            broker.stop()

"""A ``cursorops standalone`` subprocess for the protocol tests, and the official client.

Each test module starts its own standalone on free ports with a temporary
home (``--broker-port 0``: the readiness line names the ports it took) and
stops it with SIGINT afterwards, as a person would with Ctrl-C.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker import Broker

READY = re.compile(
    r"cursorops standalone ready: (pulsar://\S+)(?: admin (http://\S+))?"
    r"(?: tls (pulsar\+ssl://\S+))?(?: (https://\S+))?"
)
START_TIMEOUT_S = 60.0


@dataclass
class Standalone:
    home: Path
    process: subprocess.Popen[str]
    service_url: str
    web_url: str | None
    log: Path
    lines: list[str] = field(default_factory=list)
    tls_service_url: str | None = None
    tls_web_url: str | None = None

    @property
    def port(self) -> int:
        return int(self.service_url.rsplit(":", 1)[1])

    def broker(self) -> Broker:
        return Broker(Config.from_home(self.home))

    def client(
        self, timeout_s: int = 10, service_url: str | None = None, **kwargs: object
    ) -> pulsar.Client:
        return pulsar.Client(
            service_url or self.service_url,
            operation_timeout_seconds=timeout_s,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            **kwargs,  # type: ignore[arg-type]
        )

    def log_text(self) -> str:
        """What it printed: its log (stderr), then its stdout."""
        return self.log.read_text(errors="replace") + "".join(self.lines)

    @property
    def slot(self) -> str:
        """Its broker id in the cluster: the slot of its home it holds locked
        (:mod:`cursorops.wire.broker_identity`)."""
        held = []
        for path in sorted((self.home / "brokers").glob("*.lock")):
            with open(path, "rb") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(path.stem)
        assert len(held) == 1, held
        return held[0]

    def owned_topic(self, prefix: str = "t", store: Config | None = None) -> str:
        """A new topic name this broker owns among the live brokers of its store (``store``,
        default its home's): a lookup of it from any broker answers this one."""
        from cursorops.core.services.broker.cluster import owner_of

        with Broker(store or Config.from_home(self.home)) as broker:
            live = broker.cluster.members()
        while True:
            topic = unique(prefix)
            owner = owner_of(str(TopicName.parse(topic)), live)
            if owner is not None and owner.broker_id == self.slot:
                return topic

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


def start(
    home: Path,
    *,
    web: bool = False,
    broker_port: int = 0,
    extra: tuple[str, ...] = (),
    metadata_url: str | None = None,
    ledger_root: str | None = None,
) -> Standalone:
    """A standalone serving ``home`` (one per home: a second on the same home and store is
    refused; brokers sharing a store each have a home, and ``ledger_root`` and
    ``metadata_url`` name the shared stores)."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"standalone-{uuid.uuid4().hex[:6]}.log"
    env = dict(os.environ)
    if metadata_url is not None:
        env["CURSOROPS_METADATA_URL"] = metadata_url
    if ledger_root is not None:
        env["CURSOROPS_LEDGER_ROOT"] = ledger_root
    argv = [
        sys.executable,
        "-m",
        "cursorops.cli.main",
        "--home",
        str(home),
        "standalone",
        "--broker-port",
        str(broker_port),
        *(("--web-port", "0") if web else ("--no-web",)),
        *extra,
    ]
    with open(log, "w") as err:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True
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
    deadline = time.monotonic() + START_TIMEOUT_S
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"standalone did not start:\n{log.read_text()}")
        time.sleep(0.05)
    ready = found[0]
    return Standalone(
        home, process, ready.group(1), ready.group(2), log, lines, ready.group(3), ready.group(4)
    )


def unique(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def drain(consumer: pulsar.Consumer, timeout_ms: int = 1500) -> list[pulsar.Message]:
    """Everything the consumer receives until ``timeout_ms`` passes with nothing."""
    received = []
    while True:
        try:
            received.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            return received

"""What the core tests share: a clock, an installation and its Broker, a cursor on a topic
of numbered messages, a held write lock, and message rows for predicates and filters."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from cursorops.core.domain.acks.cursor import AckTarget
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.ledger import MESSAGE_SCHEMA

T0 = 1_700_000_000_000
"""The tests' "now" in epoch milliseconds (2023-11-14T22:13:20Z)."""


class Clock:
    """A settable clock in epoch milliseconds, so delayed delivery is tested without sleeping."""

    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def home_config(tmp_path: Path, metadata_url: str) -> Config:
    """An installation on SQLite or PostgreSQL (the ``metadata_url`` parameter)."""
    return Config.from_home(tmp_path / "home", metadata_url=metadata_url)


@pytest.fixture
def broker(home_config: Config, clock: Clock) -> Iterator[Broker]:
    with Broker(home_config, clock=clock) as b:
        b.admin.create_tenant("admin", "acme", admin_roles=["acme-admin"])
        b.admin.create_namespace("admin", "acme/ops")
        yield b


# -- a cursor on a topic of numbered messages ----------------------------------------------


def install_topic(
    broker: Broker,
    topic: str,
    messages: int,
    *,
    subscriptions: Sequence[str] = ("s",),
    batch_size: int = 1,
) -> list[AckTarget]:
    """Tenant ``acme``, namespace ``acme/ops``, ``topic`` holding ``messages`` numbered
    messages (in batches of ``batch_size``) and a Shared subscription at earliest per name;
    the ack target of every message, in order."""
    broker.admin.create_tenant("admin", "acme")
    broker.admin.create_namespace("admin", "acme/ops")
    broker.admin.create_topic("admin", topic)
    for subscription in subscriptions:
        broker.admin.create_subscription(
            "admin", topic, subscription, SubscriptionType.SHARED, initial_position="earliest"
        )
    produced = [OutgoingMessage(b"%d" % i) for i in range(messages)]
    ids = broker.producing.produce("admin", topic, produced, batch_size=batch_size)
    return [AckTarget(m.position, m.batch_index, m.batch_size) for m in ids]


def in_threads(work: Callable[[int], object], threads: int, timeout: float = 120) -> None:
    """``work(0)`` … ``work(threads - 1)``, each in a thread of its own; all must finish."""
    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in pool), "a thread did not finish"


def acknowledged_before_kill_9(
    config: Config, child: str, *args: str, lines: int = 300
) -> list[Position]:
    """Run the Python script ``child`` with the arguments ``home url *args`` of ``config``;
    it prints ``ledger:entry`` once each acknowledgement has returned. Killed with SIGKILL
    after ``lines`` of them: every position it printed, those written before the kill too
    (each came after a return)."""
    repo = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-c", child, str(config.home), config.metadata_url, *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert process.stdout is not None
    printed: list[str] = []
    for line in process.stdout:
        printed.append(line.strip())
        if len(printed) >= lines:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    printed += [line.strip() for line in process.stdout.read().splitlines() if line.strip()]
    assert len(printed) >= lines
    return [Position(*(int(part) for part in text.split(":"))) for text in printed]


@contextmanager
def write_lock_held(metadata_url: str, postgres_lock: str, **params: object) -> Iterator[None]:
    """Another connection holds a write lock until the block ends.

    On SQLite the database's one write lock (``BEGIN IMMEDIATE``), which every
    write needs; on PostgreSQL what the statement ``postgres_lock`` (with
    ``params``) takes, in a transaction rolled back at the end.
    """
    url = make_url(metadata_url)
    if url.get_backend_name() == "sqlite":
        assert url.database
        holder = sqlite3.connect(url.database, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            connection.execute(text(postgres_lock), params)
            yield
            transaction.rollback()
    finally:
        engine.dispose()


# -- message rows, as predicates and entry filters read them ----------------------------------


def rows(messages: Sequence[dict[str, Any]]) -> pa.Table:
    """Message rows with defaults for every column not given; ``properties`` as pairs or a
    dict."""
    full = []
    for number, message in enumerate(messages):
        row: dict[str, Any] = {
            "partition": 0,
            "ledger_id": 1,
            "entry_id": number,
            "batch_index": -1,
            "batch_size": 0,
            "publish_time": T0,
            "deliver_at": None,
            "key": None,
            "properties": [],
            "payload": b"",
            "producer_name": "p",
            "sequence_id": number,
        }
        row.update(message)
        if isinstance(row["properties"], dict):
            row["properties"] = list(row["properties"].items())
        full.append(row)
    return pa.Table.from_pylist(full, schema=MESSAGE_SCHEMA)


def file_digests(root: str) -> dict[str, str]:
    """Every file under ``root`` (relative path, a segment's without its write attempt's
    random part) and the SHA-256 of its bytes."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            key = re.sub(r"-[0-9a-f]{8}[.]parquet$", ".parquet", os.path.relpath(path, root))
            assert key not in found, f"two attempts of one segment: {path}"
            with open(path, "rb") as data:
                found[key] = hashlib.sha256(data.read()).hexdigest()
    return found

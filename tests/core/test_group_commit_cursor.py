"""Group commit on one cursor: the calls queued during a write become ONE journal row.

- Calls that queue while a write is held up (here by another writer holding
  the database's write lock, or the cursor's row lock on PostgreSQL) are
  folded into one delta and appended as one row; each returns once it is
  durable, and a new store finds every one of them.
- Folding follows arrival order: acknowledgements by union, a reset forgets
  what came before it in the batch; the in-memory state equals the replayed one.
- 64 threads acknowledging on one cursor: every acknowledgement is found by a
  new store, no other is, and the in-memory state equals the replayed one.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from core.broker import Broker
from core.config import Config
from core.cursor import AckTarget, CursorState
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor, replay
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

TOPIC = "persistent://acme/ops/folded"
MESSAGES = 3_000
BATCH = 10


def _install(broker: Broker) -> list[AckTarget]:
    broker.create_tenant("admin", "acme")
    broker.create_namespace("admin", "acme/ops")
    broker.create_topic("admin", TOPIC)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.produce(
        "admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(MESSAGES)], batch_size=BATCH
    )
    return [AckTarget(m.position, m.batch_index, m.batch_size) for m in ids]


def _cursor(broker: Broker) -> ManagedCursor:
    ledgers = broker.metadata.ledgers(TOPIC)
    layout = LedgerLayout.of((ledger.ledger_id, ledger.entries) for ledger in ledgers)
    return ManagedCursor.open(broker.metadata, TOPIC, "s", layout)


@contextmanager
def _writes_held(metadata_url: str) -> Iterator[None]:
    """Another writer holds what every cursor append needs until the block ends."""
    url = make_url(metadata_url)
    if url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(url.database or "", isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")  # the database's one write lock
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            connection.execute(text("SELECT id FROM cursors FOR UPDATE"))  # every cursor row
            yield
            transaction.rollback()
    finally:
        engine.dispose()


def _wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_calls_queued_during_a_write_become_one_journal_row(
    tmp_path: Path, metadata_url: str
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    followers = 20
    with Broker(config) as broker:
        targets = _install(broker)
        cursor = _cursor(broker)
        journal_before = len(broker.metadata.load_cursor(TOPIC, "s").deltas)
        # Whole entries far apart, and single batch indexes: nothing folds into mark-delete.
        first = targets[BATCH * 50]
        queued = [targets[BATCH * (100 + 7 * n) + n % BATCH] for n in range(followers)]
        returned: list[AckTarget] = []
        with _writes_held(metadata_url):
            leader = threading.Thread(target=lambda: returned.append(cursor.acknowledge([first])))
            leader.start()
            # The held-up call has taken its batch: whoever comes now queues for the next.
            _wait_for(lambda: cursor._writes._busy and not cursor._writes._queue)
            others = [
                threading.Thread(target=lambda t=t: (cursor.acknowledge([t]), returned.append(t)))
                for t in queued
            ]
            for thread in others:
                thread.start()
            _wait_for(lambda: len(cursor._writes._queue) == followers)
            assert returned == []  # nothing returns before its write is durable
        for thread in [leader, *others]:
            thread.join(60)
        assert len(returned) == followers + 1
        record = broker.metadata.load_cursor(TOPIC, "s")
        # The held-up call, then the 20 queued meanwhile: two rows, not 21.
        assert len(record.deltas) - journal_before == 2
        assert replay(record, cursor.layout) == cursor.state
    with Broker(config) as restarted:
        state = _cursor(restarted).state
        for target in [first, *queued]:
            assert state.is_acked(target.position, target.batch_index)
        assert not state.is_acked(targets[BATCH * 60].position, -1)


def test_a_batch_folds_in_arrival_order_and_a_reset_forgets_what_came_before(
    tmp_path: Path, metadata_url: str
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    with Broker(config) as broker:
        targets = _install(broker)
        cursor = _cursor(broker)
        before_reset = targets[BATCH * 50]
        after_reset = targets[BATCH * 60 + 3]
        reset_to = targets[BATCH * 40].position
        reset = CursorState()
        reset.reset(reset_to, cursor.layout)
        cursor.acknowledge([targets[BATCH * 10]])
        outcomes = cursor._write(
            [
                (CursorState.ack_delta([before_reset]), False),
                (reset, True),
                (CursorState.ack_delta([after_reset]), False),
            ]
        )
        assert outcomes == [None, None, None]
        state = cursor.state
        assert state.mark_delete < reset_to
        assert state.is_acked(targets[BATCH * 10].position, -1)  # before the reset's position
        assert not state.is_acked(before_reset.position, before_reset.batch_index)
        assert state.is_acked(after_reset.position, after_reset.batch_index)
        assert replay(broker.metadata.load_cursor(TOPIC, "s"), cursor.layout) == state
        # An acknowledgement and a compaction in one batch: the row, then the snapshot.
        cursor._write([(CursorState.ack_delta([before_reset]), False), None])
        assert broker.metadata.load_cursor(TOPIC, "s").deltas == []
        assert cursor.state.is_acked(before_reset.position, before_reset.batch_index)
        final = cursor.state.copy()
    with Broker(config) as restarted:
        assert _cursor(restarted).state == final


def test_64_threads_acknowledging_on_one_cursor_all_survive_a_new_store(
    tmp_path: Path, metadata_url: str
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    threads = 64
    with Broker(config) as broker:
        targets = _install(broker)
        cursor = _cursor(broker)
        # Every third message, whole entries and batch indexes alike, none next to another.
        wanted = targets[1::3][:960]

        def work(worker: int) -> None:
            for target in wanted[worker::threads]:
                cursor.acknowledge([target])

        pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(120)
        assert not any(thread.is_alive() for thread in pool)
        in_memory = cursor.state.copy()
    with Broker(config) as restarted:
        state = _cursor(restarted).state
        assert state == in_memory
        assert all(state.is_acked(t.position, t.batch_index) for t in wanted)
        others = set(targets) - set(wanted)
        assert not any(state.is_acked(t.position, t.batch_index) for t in others)

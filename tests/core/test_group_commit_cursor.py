"""Group commit on one cursor: the calls queued during a write become ONE journal row.

- Calls that queue while a write is held up (here by another writer holding
  the database's write lock, or the cursor's row lock on PostgreSQL) are
  folded into one delta and appended as one row; each returns once it is
  durable, and a new store finds every one of them.
- Folding follows arrival order: acknowledgements by union, a reset forgets
  what came before it in the batch; the in-memory state equals the replayed one.
- 64 threads acknowledging on one cursor: every acknowledgement is found by a
  new store, no other is, and the in-memory state equals the replayed one.
- A refresh while a write of the same cursor commits keeps that write in memory.
"""

from __future__ import annotations

import threading
import time

from core.acks.cursor import AckTarget, CursorState
from core.acks.managed_cursor import ManagedCursor, replay
from core.broker import Broker
from core.config import Config
from tests.conftest import open_cursor

from .conftest import in_threads, install_topic, write_lock_held

TOPIC = "persistent://acme/ops/folded"
MESSAGES = 3_000
BATCH = 10
WRITE_RETURNS_WITHIN_S = 1.0
"""Far above the time an unhindered write takes from its commit to its return."""
CURSOR_ROWS_LOCKED = "SELECT id FROM cursors FOR UPDATE"
"""On PostgreSQL every cursor append needs its cursor's row lock: this takes them all."""


def _install(broker: Broker) -> list[AckTarget]:
    return install_topic(broker, TOPIC, MESSAGES, batch_size=BATCH)


def _cursor(broker: Broker) -> ManagedCursor:
    return open_cursor(broker, TOPIC, "s")


def _wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_calls_queued_during_a_write_become_one_journal_row(home_config: Config) -> None:
    followers = 20
    with Broker(home_config) as broker:
        targets = _install(broker)
        cursor = _cursor(broker)
        journal_before = len(broker.metadata.load_cursor(TOPIC, "s").deltas)
        # Whole entries far apart, and single batch indexes: nothing folds into mark-delete.
        first = targets[BATCH * 50]
        queued = [targets[BATCH * (100 + 7 * n) + n % BATCH] for n in range(followers)]
        returned: list[AckTarget] = []
        with write_lock_held(home_config.metadata_url, CURSOR_ROWS_LOCKED):
            leader = threading.Thread(target=lambda: returned.append(cursor.acknowledge([first])))
            leader.start()
            # The held-up call has taken its batch: whoever comes now queues for the next.
            _wait_for(lambda: cursor.writes.busy and not cursor.writes.queued)
            others = [
                threading.Thread(target=lambda t=t: (cursor.acknowledge([t]), returned.append(t)))
                for t in queued
            ]
            for thread in others:
                thread.start()
            _wait_for(lambda: cursor.writes.queued == followers)
            assert returned == []  # nothing returns before its write is durable
        for thread in [leader, *others]:
            thread.join(60)
        assert len(returned) == followers + 1
        record = broker.metadata.load_cursor(TOPIC, "s")
        # The held-up call, then the 20 queued meanwhile: two rows, not 21.
        assert len(record.deltas) - journal_before == 2
        assert replay(record, cursor.layout) == cursor.state
    with Broker(home_config) as restarted:
        state = _cursor(restarted).state
        for target in [first, *queued]:
            assert state.is_acked(target.position, target.batch_index)
        assert not state.is_acked(targets[BATCH * 60].position, -1)


def test_a_batch_folds_in_arrival_order_and_a_reset_forgets_what_came_before(
    home_config: Config,
) -> None:
    with Broker(home_config) as broker:
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
    with Broker(home_config) as restarted:
        assert _cursor(restarted).state == final


def test_64_threads_acknowledging_on_one_cursor_all_survive_a_new_store(
    home_config: Config,
) -> None:
    threads = 64
    with Broker(home_config) as broker:
        targets = _install(broker)
        cursor = _cursor(broker)
        # Every third message, whole entries and batch indexes alike, none next to another.
        wanted = targets[1::3][:960]

        def work(worker: int) -> None:
            for target in wanted[worker::threads]:
                cursor.acknowledge([target])

        in_threads(work, threads)
        in_memory = cursor.state.copy()
    with Broker(home_config) as restarted:
        state = _cursor(restarted).state
        assert state == in_memory
        assert all(state.is_acked(t.position, t.batch_index) for t in wanted)
        others = set(targets) - set(wanted)
        assert not any(state.is_acked(t.position, t.batch_index) for t in others)


class _PausingStore:
    """The cursor's real store, whose ``load_cursor`` from ``thread`` waits after it has read
    until ``resume`` is set: the moment a refresh has read and not yet replaced the state."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.thread: threading.Thread | None = None
        self.read = threading.Event()
        self.resume = threading.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def load_cursor(self, topic: str, subscription: str) -> object:
        record = self._store.load_cursor(topic, subscription)  # type: ignore[attr-defined]
        if threading.current_thread() is self.thread:
            self.read.set()
            assert self.resume.wait(30)
        return record


def test_a_refresh_keeps_a_write_that_commits_while_it_reloads(home_config: Config) -> None:
    """The refresh reads the journal, then a write of the same cursor commits before the
    refresh sets its state: the write must still be in the cursor's state afterwards.
    Unguarded, the write merged into the state the refresh then replaced with its older read.
    """
    with Broker(home_config) as broker:
        target = _install(broker)[BATCH * 50]
        cursor = _cursor(broker)
        store = _PausingStore(cursor.store)
        cursor.store = store  # type: ignore[assignment]
        store.thread = threading.Thread(target=cursor.refresh)
        store.thread.start()
        assert store.read.wait(30)
        writer = threading.Thread(target=cursor.acknowledge, args=([target],))
        writer.start()
        _wait_for(
            lambda: replay(broker.metadata.load_cursor(TOPIC, "s"), cursor.layout).is_acked(
                target.position, target.batch_index
            )
        )
        # Committed: unhindered, the write now merges and returns; guarded, it waits for the
        # refresh. Either way the refresh then sets the state it read before the commit.
        writer.join(WRITE_RETURNS_WITHIN_S)
        store.resume.set()
        store.thread.join(30)
        writer.join(30)
        assert not writer.is_alive() and not store.thread.is_alive()
        assert cursor.state.is_acked(target.position, target.batch_index)
        assert cursor.state == replay(broker.metadata.load_cursor(TOPIC, "s"), cursor.layout)

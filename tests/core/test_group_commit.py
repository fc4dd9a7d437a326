"""Group commit of durable acknowledgements.

- :class:`GroupCommit`: callers queued during a commit share the next one, each
  gets its own outcome, a failed batch fails each of its callers.
- The metadata store: concurrent acknowledgements from threads on one cursor
  and on several cursors all persist (SQLite and PostgreSQL), a missing cursor
  fails only its own callers.
- kill -9: a process acknowledging from 16 or 64 threads is killed mid-run;
  every acknowledgement that had returned is there after a restart.
"""

from __future__ import annotations

import threading
import time

import pytest

from core.acks import cursor_codec
from core.acks.cursor import AckTarget, CursorState
from core.broker import Broker
from core.config import Config
from core.errors import SubscriptionNotFoundError
from core.store.group_commit import GroupCommit
from tests.conftest import open_cursor

from .conftest import acknowledged_before_kill_9, in_threads, install_topic

TOPIC = "persistent://acme/ops/grouped"
MESSAGES = 2_000


# -- GroupCommit ----------------------------------------------------------------


def test_callers_queued_during_a_commit_share_the_next_one() -> None:
    followers = 7
    queued = threading.Event()
    batches: list[list[int]] = []
    committer: GroupCommit[int, int] = GroupCommit(lambda items: commit(items))

    def commit(items: list[int]) -> list[int]:
        if not batches:
            # The first batch stays open until every other caller has queued.
            assert queued.wait(10)
        batches.append(list(items))
        return [item * 10 for item in items]

    results: dict[int, int] = {}
    first = threading.Thread(target=lambda: results.__setitem__(0, committer.submit(0)))
    first.start()
    while not committer.busy:
        time.sleep(0.001)
    others = [
        threading.Thread(target=lambda n=n: results.__setitem__(n, committer.submit(n)))
        for n in range(1, followers + 1)
    ]
    for thread in others:
        thread.start()
    while committer.queued < followers:
        time.sleep(0.001)
    queued.set()
    for thread in [first, *others]:
        thread.join(10)
    assert batches[0] == [0]
    assert sorted(batches[1]) == list(range(1, followers + 1))
    assert len(batches) == 2
    assert results == {n: n * 10 for n in range(followers + 1)}


def test_a_failed_batch_fails_each_caller_and_per_item_errors_stay_their_own() -> None:
    def commit(items: list[str]) -> list[str | BaseException]:
        if "boom" in items:
            raise RuntimeError("batch failed")
        return [ValueError(item) if item == "bad" else item.upper() for item in items]

    committer: GroupCommit[str, str] = GroupCommit(commit)
    assert committer.submit("ok") == "OK"
    with pytest.raises(ValueError, match="bad"):
        committer.submit("bad")
    with pytest.raises(RuntimeError, match="batch failed"):
        committer.submit("boom")
    assert committer.submit("again") == "AGAIN"


# -- the metadata store -----------------------------------------------------------


def _install(broker: Broker, subscriptions: int) -> list[AckTarget]:
    names = [f"s{n}" for n in range(subscriptions)]
    return install_topic(broker, TOPIC, MESSAGES, subscriptions=names)


@pytest.mark.parametrize("subscriptions", [1, 4])
def test_concurrent_acknowledgements_from_threads_all_persist(
    home_config: Config, subscriptions: int
) -> None:
    threads = 16
    with Broker(home_config) as broker:
        targets = _install(broker, subscriptions)
        cursors = [open_cursor(broker, TOPIC, f"s{n}") for n in range(subscriptions)]
        # Every other entry: nothing folds into mark-delete, each ack stays visible.
        wanted = targets[1::2][:800]

        def work(worker: int) -> None:
            cursor = cursors[worker % subscriptions]
            for target in wanted[worker::threads]:
                cursor.acknowledge([target])

        in_threads(work, threads)
        calls = len(wanted)
    with Broker(home_config) as restarted:
        for n in range(subscriptions):
            state = open_cursor(restarted, TOPIC, f"s{n}").state
            mine = [t for w in range(n, threads, subscriptions) for t in wanted[w::threads]]
            assert all(state.is_acked(t.position, t.batch_index) for t in mine)
            others = [t for t in wanted if t not in mine]
            assert not any(state.is_acked(t.position, t.batch_index) for t in others)
        assert calls == 800


def test_a_missing_cursor_fails_only_its_own_callers(home_config: Config) -> None:
    with Broker(home_config) as broker:
        targets = _install(broker, 1)
        cursor = open_cursor(broker, TOPIC, "s0")
        payload = cursor_codec.encode(CursorState.ack_delta([targets[5]]))
        outcomes = broker.metadata._commit_deltas(
            [(TOPIC, "s0", payload), (TOPIC, "nobody", payload), (TOPIC, "s0", payload)]
        )
        assert isinstance(outcomes[1], SubscriptionNotFoundError)
        assert isinstance(outcomes[0], int) and outcomes[2] == outcomes[0] + 1
        cursor.refresh()
        assert cursor.state.is_acked(targets[5].position, targets[5].batch_index)


# -- kill -9 --------------------------------------------------------------------

_CHILD = """
import sys, threading
from core.broker import Broker
from core.config import Config
from core.acks.cursor import AckTarget
from core.acks.ledger_layout import LedgerLayout
from core.acks.managed_cursor import ManagedCursor
from core.ids.position import Position

home, url, topic, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
broker = Broker(Config.from_home(home, metadata_url=url))
ledgers = broker.metadata.ledgers(topic)
layout = LedgerLayout.of((ledger.ledger_id, ledger.entries) for ledger in ledgers)
cursor = ManagedCursor.open(broker.metadata, topic, "s0", layout)
entries = [Position(l.ledger_id, e) for l in ledgers for e in range(l.entries)][1::2]
out = threading.Lock()

def work(worker):
    for position in entries[worker::threads]:
        cursor.acknowledge([AckTarget(position, -1, 0)])
        with out:
            sys.stdout.write(f"{position.ledger_id}:{position.entry_id}\\n")
            sys.stdout.flush()

pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
for thread in pool:
    thread.start()
for thread in pool:
    thread.join()
"""


@pytest.mark.parametrize("threads", [16, 64])
def test_acknowledgements_that_returned_survive_kill_9(home_config: Config, threads: int) -> None:
    with Broker(home_config) as broker:
        _install(broker, 1)
    returned = acknowledged_before_kill_9(home_config, _CHILD, TOPIC, str(threads))
    with Broker(home_config) as restarted:
        state = open_cursor(restarted, TOPIC, "s0").state
        for position in returned:
            assert state.is_acked(position, -1), position

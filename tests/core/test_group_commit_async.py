"""Asynchronous acknowledgements (Pulsar's ``acknowledgeAsync``) and their group commit.

- :meth:`GroupCommit.submit_async`: asyncio tasks share commits, each future
  completes only after the commit holding its item, with that item's outcome
  or error; blocking callers and asyncio tasks of one committer all finish.
- :meth:`ManagedCursor.acknowledge_async`: many acknowledgements in flight per
  task, all durable once their futures completed (SQLite and PostgreSQL); a bad
  batch index raises at the call and writes nothing.
- kill -9: a process with 64 tasks, 16 acknowledgements in flight each, is
  killed mid-run; every acknowledgement whose future had completed is there.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from core.acks.cursor import AckTarget
from core.broker import Broker
from core.config import Config
from core.errors import InvalidBatchIndexError
from core.store.group_commit import GroupCommit
from tests.conftest import open_cursor

from .conftest import acknowledged_before_kill_9, install_topic

TOPIC = "persistent://acme/ops/async-acks"
MESSAGES = 4_000


def test_tasks_share_commits_and_each_future_waits_for_its_own() -> None:
    committed: set[int] = set()
    batches: list[list[int]] = []

    def commit(items: list[int]) -> list[int | BaseException]:
        time.sleep(0.005)  # a commit takes a while: tasks queue meanwhile
        batches.append(list(items))
        committed.update(items)
        return [ValueError(f"item {i}") if i % 97 == 0 else i * 10 for i in items]

    committer: GroupCommit[int, int] = GroupCommit(commit)

    async def caller(first: int) -> list[tuple[int, object]]:
        seen: list[tuple[int, object]] = []
        window = [(i, committer.submit_async(i)) for i in range(first, first + 8)]
        for item, future in window:
            try:
                outcome: object = await future
            except ValueError as exc:
                outcome = str(exc)
            assert item in committed  # completed only once its batch committed
            seen.append((item, outcome))
        return seen

    async def main() -> list[list[tuple[int, object]]]:
        return await asyncio.gather(*(caller(8 * n) for n in range(50)))

    results = asyncio.run(main())
    flat = dict(pair for seen in results for pair in seen)
    assert flat == {i: (f"item {i}" if i % 97 == 0 else i * 10) for i in range(400)}
    assert sorted(i for batch in batches for i in batch) == list(range(400))
    assert len(batches) < 100  # shared, not one commit per item


def test_a_failed_batch_fails_every_future_of_it() -> None:
    def commit(items: list[str]) -> list[str]:
        raise RuntimeError("store down")

    committer: GroupCommit[str, str] = GroupCommit(commit)

    async def main() -> list[BaseException | str]:
        futures = [committer.submit_async(f"x{n}") for n in range(20)]
        return await asyncio.gather(*futures, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RuntimeError) and str(o) == "store down" for o in outcomes)


def test_blocking_callers_and_tasks_of_one_committer_all_finish() -> None:
    batches: list[list[str]] = []

    def commit(items: list[str]) -> list[str]:
        time.sleep(0.002)
        batches.append(items)
        return [item.upper() for item in items]

    committer: GroupCommit[str, str] = GroupCommit(commit)
    blocking: list[str] = []

    def thread_caller(n: int) -> None:
        for i in range(30):
            blocking.append(committer.submit(f"t{n}-{i}"))

    async def task_caller(n: int) -> list[str]:
        return [await committer.submit_async(f"a{n}-{i}") for i in range(30)]

    async def tasks() -> list[list[str]]:
        return await asyncio.gather(*(task_caller(n) for n in range(16)))

    pool = [threading.Thread(target=thread_caller, args=(n,)) for n in range(8)]
    for thread in pool:
        thread.start()
    from_tasks = asyncio.run(asyncio.wait_for(tasks(), 60))
    for thread in pool:
        thread.join(60)
    assert not any(thread.is_alive() for thread in pool)
    assert sorted(blocking) == sorted(f"T{n}-{i}" for n in range(8) for i in range(30))
    assert from_tasks == [[f"A{n}-{i}" for i in range(30)] for n in range(16)]
    assert sum(len(b) for b in batches) == 8 * 30 + 16 * 30


def test_asynchronous_acknowledgements_all_persist(home_config: Config) -> None:
    tasks, window = 64, 8
    with Broker(home_config) as broker:
        targets = install_topic(broker, TOPIC, MESSAGES, subscriptions=["s0"])
        cursor = open_cursor(broker, TOPIC, "s0")
        # Every other entry: nothing folds into mark-delete, each ack stays visible.
        wanted = targets[1::2]

        async def caller(n: int) -> None:
            in_flight: list[asyncio.Future[None]] = []
            for target in wanted[n::tasks]:
                in_flight.append(cursor.acknowledge_async([target]))
                if len(in_flight) >= window:
                    await in_flight.pop(0)
            await asyncio.gather(*in_flight)

        async def main() -> None:
            await asyncio.gather(*(caller(n) for n in range(tasks)))

        asyncio.run(main())
        assert all(cursor.state.is_acked(t.position, -1) for t in wanted)
        batches = cursor.writes.batches
        assert batches < len(wanted) / 4  # commits were shared
    with Broker(home_config) as restarted:
        state = open_cursor(restarted, TOPIC, "s0").state
        assert all(state.is_acked(t.position, -1) for t in wanted)
        assert not any(state.is_acked(t.position, -1) for t in targets[0::2])


def test_a_bad_batch_index_raises_at_the_call_and_writes_nothing(home_config: Config) -> None:
    with Broker(home_config) as broker:
        targets = install_topic(broker, TOPIC, 100, subscriptions=["s0"], batch_size=4)
        cursor = open_cursor(broker, TOPIC, "s0")
        journal = len(broker.metadata.load_cursor(TOPIC, "s0").deltas)
        bad = AckTarget(targets[8].position, 4, 4)

        async def main() -> None:
            with pytest.raises(InvalidBatchIndexError, match="Invalid batchIndex: 4"):
                cursor.acknowledge_async([targets[5], bad])

        asyncio.run(main())
        assert len(broker.metadata.load_cursor(TOPIC, "s0").deltas) == journal
        assert not cursor.state.is_acked(targets[5].position, targets[5].batch_index)


# -- kill -9 --------------------------------------------------------------------

_CHILD = """
import asyncio, sys
from core.broker import Broker
from core.config import Config
from core.acks.cursor import AckTarget
from core.acks.ledger_layout import LedgerLayout
from core.acks.managed_cursor import ManagedCursor
from core.ids.position import Position

home, url, topic = sys.argv[1], sys.argv[2], sys.argv[3]
broker = Broker(Config.from_home(home, metadata_url=url))
ledgers = broker.metadata.ledgers(topic)
layout = LedgerLayout.of((ledger.ledger_id, ledger.entries) for ledger in ledgers)
cursor = ManagedCursor.open(broker.metadata, topic, "s0", layout)
entries = [Position(l.ledger_id, e) for l in ledgers for e in range(l.entries)][1::2]

async def caller(n):
    in_flight = []
    for position in entries[n::64]:
        in_flight.append((position, cursor.acknowledge_async([AckTarget(position, -1, 0)])))
        if len(in_flight) >= 16:
            done, future = in_flight.pop(0)
            await future
            sys.stdout.write(f"{done.ledger_id}:{done.entry_id}\\n")
            sys.stdout.flush()

async def main():
    await asyncio.gather(*(caller(n) for n in range(64)))

asyncio.run(main())
"""


def test_completed_asynchronous_acknowledgements_survive_kill_9(home_config: Config) -> None:
    with Broker(home_config) as broker:
        install_topic(broker, TOPIC, MESSAGES, subscriptions=["s0"])
    # Each line the child printed came after its future completed.
    returned = acknowledged_before_kill_9(home_config, _CHILD, TOPIC)
    with Broker(home_config) as restarted:
        state = open_cursor(restarted, TOPIC, "s0").state
        for position in returned:
            assert state.is_acked(position, -1), position

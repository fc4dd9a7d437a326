"""Which cursor rows a skip locks, and in what order (PostgreSQL: SQLite has one writer).

A skip plans outside any lock, then locks the cursors of the partitions its ids
are on, and only those, in the order of the partitions' names, and decides what
is still unacknowledged under them. Here another connection holds one cursor's
row lock, and the skips that need it wait while the others go on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.services.gating import unsubscribe
from cursorops.core.services.gating.skip import FOLD_AFTER_DELTAS
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.cursor_door import Hold

from .conftest import write_lock_held

TOPIC = "persistent://acme/ops/locks"
WIDE = "persistent://acme/ops/wide"
"""Twelve partitions: ``-partition-10`` sorts before ``-partition-2``."""
LOCK_CURSORS_OF = "SELECT id FROM cursors WHERE topic_partition = :partition FOR UPDATE"
DEADLINE_S = 120.0
"""How long a skip that must not wait gets before the test calls it blocked: no timing
is measured, a skip that waits for the held lock waits until it is released."""


@pytest.fixture
def postgres_url(metadata_url: str) -> str:
    if metadata_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer at a time: every write waits for every other")
    return metadata_url


@pytest.fixture
def by_partition(broker: Broker) -> dict[int, list[MessageId]]:
    broker.admin.create_topic("admin", TOPIC, partitions=4)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(40)])
    found: dict[int, list[MessageId]] = {}
    for m in ids:
        found.setdefault(m.partition, []).append(m)
    assert sorted(found) == [0, 1, 2, 3]
    return found


def partition(index: int) -> str:
    return f"{TOPIC}-partition-{index}"


class Skip:
    """A skip run in a thread of its own."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def finished(self) -> bool:
        self.thread.join(DEADLINE_S)
        if self.error is not None:
            raise self.error
        return not self.thread.is_alive()


@contextmanager
def lock_waits(url: str, waiting: str = "%FROM cursors%FOR UPDATE%") -> Iterator[Callable[[], int]]:
    """How many backends running a statement ``LIKE waiting`` (by default, one locking rows of
    ``cursors``) wait for a lock now."""
    engine = create_engine(url, poolclass=NullPool)
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE :waiting AND pid <> pg_backend_pid()"
    ).bindparams(waiting=waiting)
    try:
        with engine.connect() as connection:

            def count() -> int:
                connection.commit()
                return int(connection.execute(query).scalar_one())

            yield count
    finally:
        engine.dispose()


def acknowledged(broker: Broker, ids: list[MessageId]) -> bool:
    return bool(
        skip_slice.plan_skip(
            broker.gated, "admin", TOPIC, "s", ids
        ).columns.already_acknowledged.all()
    )


def wait_until_blocked(waiting: Callable[[], int], skips: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while waiting() < skips:
        assert time.monotonic() < deadline, "the skip never waited for the held lock"
        time.sleep(0.05)


def test_a_skip_waits_only_for_the_partitions_it_touches(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    with (
        lock_waits(postgres_url) as waiting,
        write_lock_held(postgres_url, LOCK_CURSORS_OF, partition=partition(0)),
    ):
        # The held lock is one a skip needs: a skip on partition 0 waits for it...
        blocked = Skip(
            lambda: skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", by_partition[0][:1])
        )
        wait_until_blocked(waiting, 1)
        # ...and one on partition 1 is not held up, nor by the skip waiting on partition 0.
        free = Skip(
            lambda: skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", by_partition[1][:1])
        )
        assert free.finished()
        assert blocked.thread.is_alive()
    assert blocked.finished()
    assert acknowledged(broker, by_partition[0][:1] + by_partition[1][:1])


def test_a_skip_locks_its_partitions_in_the_order_of_their_names(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    """Whatever the order of the ids, partition 0's cursor is locked before partition 3's:
    a skip waiting for partition 0 holds nothing of partition 3 meanwhile, and two skips
    over the same partitions cannot deadlock.

    The second skip comes from another process (another Broker): within one, a skip
    that needs a partition a waiting batch of skips holds joins the batch after it
    (core/domain/combining.py), whatever the lock order."""
    ids = [by_partition[3][0], by_partition[0][0]]
    with (
        Broker(broker.config) as elsewhere,
        lock_waits(postgres_url) as waiting,
        write_lock_held(postgres_url, LOCK_CURSORS_OF, partition=partition(0)),
    ):
        both = Skip(lambda: skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", ids))
        wait_until_blocked(waiting, 1)
        alone = Skip(
            lambda: skip_slice.skip_messages(
                elsewhere.gated, "admin", TOPIC, "s", by_partition[3][1:2]
            )
        )
        assert alone.finished()
        assert both.thread.is_alive()
    assert both.finished()


def test_skips_over_the_same_partitions_in_opposite_orders_all_apply(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    """Two writers, each skipping one message of every partition at a time, listed in
    opposite orders: in the one lock order, neither deadlocks the other."""
    rounds = [[by_partition[p][i] for p in (0, 1, 2, 3)] for i in range(8)]

    def skip_all(reverse: bool) -> None:
        for ids in rounds:
            skip_slice.skip_messages(
                broker.gated, "admin", TOPIC, "s", ids[::-1] if reverse else ids
            )

    skips = [Skip(lambda: skip_all(False)), Skip(lambda: skip_all(True))]
    assert all(s.finished() for s in skips)
    assert acknowledged(broker, [m for ids in rounds for m in ids])


def test_a_skip_that_folds_the_journal_waits_for_no_dispatcher(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    """A dispatcher holds the subscription's row while it reads the cursors, as a
    dispatch holds it (``Hold.DISPATCH``): a skip that folds a long journal under its
    cursor lock holds the row shared (``Hold.MOVE``), which a dispatch leaves free (and
    which a second UPDATE of the cursor row in one transaction takes anyway: PostgreSQL
    re-checks its foreign keys)."""
    name = partition(0)
    for _ in range(FOLD_AFTER_DELTAS):
        broker.metadata.append_cursor_delta(name, "s", cursor_codec.encode(CursorState()))
    with write_lock_held(
        postgres_url,
        f"SELECT id FROM subscriptions WHERE name = :name{Hold.DISPATCH.value}",
        name="s",
    ):
        folding = Skip(
            lambda: skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", by_partition[0][:2])
        )
        assert folding.finished()
    assert len(broker.metadata.load_cursor(name, "s").deltas) == 1


def test_a_dispatch_reads_the_cursors_in_the_order_of_their_names(
    broker: Broker, postgres_url: str
) -> None:
    """A dispatch over every partition reads (and key-share locks) their cursors in the order
    of their names, the order a skip locks them in: waiting for partition 10's cursor, it
    holds nothing of partition 2's, so a skip holding 10 and wanting 2 cannot deadlock with
    it (in partition-number order it would hold 2 while waiting for 10)."""
    broker.admin.create_topic("admin", WIDE, partitions=12)
    broker.admin.create_subscription(
        "admin", WIDE, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce("admin", WIDE, [OutgoingMessage(b"%d" % i) for i in range(120)])
    on_2 = [m for m in ids if m.partition == 2][:1]
    consumer = broker.reading.dispatcher("admin", WIDE, "s").subscribe("c", receiver_queue_size=10)
    with (
        Broker(broker.config) as elsewhere,
        lock_waits(postgres_url, "%read_positions%FOR KEY SHARE%") as waiting,
        write_lock_held(postgres_url, LOCK_CURSORS_OF, partition=f"{WIDE}-partition-10"),
    ):
        reading = Skip(lambda: consumer.receive_many(10))
        wait_until_blocked(waiting, 1)
        free = Skip(lambda: skip_slice.skip_messages(elsewhere.gated, "admin", WIDE, "s", on_2))
        assert free.finished()
        assert reading.thread.is_alive()
    assert reading.finished()
    assert skip_slice.plan_skip(
        broker.gated, "admin", WIDE, "s", on_2
    ).columns.already_acknowledged.all()


def test_an_unsubscribe_waits_for_a_cursor_move_in_progress(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    """A cursor move holds its subscription's row shared (``Hold.MOVE``); deleting the
    subscription (``Hold.REMOVE``) waits for it to end."""
    held = f"SELECT id FROM subscriptions WHERE name = :name{Hold.MOVE.value}"
    with (
        lock_waits(postgres_url, "%FROM subscriptions%FOR UPDATE%") as waiting,
        write_lock_held(postgres_url, held, name="s"),
    ):
        gone = Skip(
            lambda: unsubscribe.delete_subscription(broker.gated, "admin", TOPIC, "s", force=True)
        )
        wait_until_blocked(waiting, 1)
        assert gone.thread.is_alive()
    assert gone.finished()
    assert [s.name for s in broker.admin.list_subscriptions("admin", TOPIC)] == []


def test_a_cursor_move_waits_for_a_deletion_of_its_subscription(
    broker: Broker, by_partition: dict[int, list[MessageId]], postgres_url: str
) -> None:
    """While the subscription's row is held for deletion (``Hold.REMOVE``), a skip waits
    before it locks any cursor; here the deletion is rolled back, and the skip applies."""
    held = f"SELECT id FROM subscriptions WHERE name = :name{Hold.REMOVE.value}"
    with (
        lock_waits(postgres_url) as waiting,
        write_lock_held(postgres_url, held, name="s"),
    ):
        blocked = Skip(
            lambda: skip_slice.skip_messages(broker.gated, "admin", TOPIC, "s", by_partition[1][:1])
        )
        wait_until_blocked(waiting, 1)
        assert blocked.thread.is_alive()
    assert blocked.finished()
    assert acknowledged(broker, by_partition[1][:1])

"""Nothing acknowledged is lost: no cap, restarts, concurrent writers, compaction."""

from __future__ import annotations

import random
import threading

import pytest

from core.acks import managed_cursor
from core.acks.cursor import AckTarget
from core.acks.managed_cursor import ManagedCursor
from core.broker import Broker
from core.config import Config
from core.errors import PositionOutOfRangeError, SubscriptionNotFoundError
from core.ids.message_id import MessageId
from core.ids.position import Position
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType
from tests.conftest import open_cursor

from .conftest import Clock

TOPIC = "persistent://acme/ops/durable"


def make_topic(broker: Broker, messages: int, batch_size: int = 1) -> list[MessageId]:
    broker.create_topic("admin", TOPIC, partitions=0)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    return broker.produce(
        "admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(messages)], batch_size=batch_size
    )


def managed(broker: Broker) -> ManagedCursor:
    """The topic's cursor itself: these tests are about how it persists."""
    return open_cursor(broker, TOPIC, "s")


def targets(ids: list[MessageId]) -> list[AckTarget]:
    return [AckTarget(m.position, m.batch_index, m.batch_size) for m in ids]


def test_scattered_holes_beyond_pulsars_cap_survive_a_restart(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    """30,000 isolated acknowledged entries: 3x Pulsar 4.x's 10,000-range persistence cap."""
    ids = make_topic(broker, 60_001)
    acked = ids[1::2]
    cursor = managed(broker)
    for start in range(0, len(acked), 5_000):
        cursor.acknowledge(targets(acked[start : start + 5_000]))
    assert cursor.state.individually_deleted.range_count() == 30_000
    expected = cursor.state.copy()
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        recovered = restarted.cursor_state("admin", TOPIC, "s")
        assert recovered == expected
        analysis = restarted.analyze_backlog("admin", TOPIC, "s")[0].result
        assert analysis.messages == 30_001


def test_batch_index_acks_survive_a_restart(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    ids = make_topic(broker, 1_000, batch_size=10)
    chosen = random.Random(7).sample(ids, 300)
    managed(broker).acknowledge(targets(chosen))
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        state = restarted.cursor_state("admin", TOPIC, "s")
        for m in ids:
            assert state.is_acked(m.position, m.batch_index) == (m in chosen)
        assert restarted.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 700


def test_concurrent_consumer_acks_and_admin_skips_lose_nothing(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    """A consumer acknowledging and an admin skipping at once, each with its own connection."""
    ids = make_topic(broker, 2_000, batch_size=4)
    shuffled = random.Random(3).sample(ids, len(ids))
    by_consumer, by_admin = shuffled[:1_000], shuffled[1_000:1_600]
    errors: list[BaseException] = []

    def consumer() -> None:
        try:
            with Broker(home_config, clock=clock) as own:
                cursor = managed(own)
                for start in range(0, len(by_consumer), 10):
                    cursor.acknowledge(targets(by_consumer[start : start + 10]))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def admin() -> None:
        try:
            with Broker(home_config, clock=clock) as own:
                for start in range(0, len(by_admin), 20):
                    own.skip_messages("admin", TOPIC, "s", by_admin[start : start + 20])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consumer), threading.Thread(target=admin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    state = broker.cursor_state("admin", TOPIC, "s")
    acked = set(by_consumer) | set(by_admin)
    for m in ids:
        assert state.is_acked(m.position, m.batch_index) == (m in acked), m
    assert broker.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 400


def test_compaction_keeps_every_delta(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, home_config: Config, clock: Clock
) -> None:
    monkeypatch.setattr(managed_cursor, "COMPACT_AFTER_DELTAS", 7)
    ids = make_topic(broker, 300, batch_size=3)
    other = Broker(home_config, clock=clock)
    try:
        a, b = managed(broker), managed(other)
        for i, m in enumerate(ids):
            (a if i % 2 else b).acknowledge(targets([m]))
        snapshot_bytes, journal_bytes = broker.metadata.cursor_sizes(TOPIC, "s")
        assert snapshot_bytes > 0
    finally:
        other.close()
    state = broker.cursor_state("admin", TOPIC, "s")
    assert state.mark_delete == ids[-1].position
    assert broker.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 0


def test_reset_cursor_forgets_later_acks_durably(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    ids = make_topic(broker, 10)
    managed(broker).acknowledge(targets(ids[:8]))
    broker.reset_cursor("admin", TOPIC, "s", position=Position(ids[3].ledger_id, ids[3].entry_id))
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        assert [m.payload for m in restarted.consume("admin", TOPIC, "s", 20)] == [
            b"%d" % i for i in range(3, 10)
        ]


def test_deltas_to_several_cursors_are_all_or_nothing(broker: Broker) -> None:
    broker.create_topic("admin", TOPIC, partitions=2)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    store = broker.metadata
    first = f"{TOPIC}-partition-0"
    before = store.load_cursor(first, "s")
    with pytest.raises(SubscriptionNotFoundError):
        store.append_cursor_deltas([(first, "s", b"delta"), (f"{TOPIC}-partition-1", "nope", b"x")])
    assert store.load_cursor(first, "s") == before
    versions = store.append_cursor_deltas([(f"{TOPIC}-partition-1", "s", b"b"), (first, "s", b"a")])
    assert versions == [1, 1]


def test_reset_to_a_missing_position_changes_nothing(broker: Broker) -> None:
    ids = make_topic(broker, 3)
    managed(broker).acknowledge(targets(ids[:1]))
    before = broker.cursor_state("admin", TOPIC, "s")
    with pytest.raises(PositionOutOfRangeError, match="no such entry"):
        broker.reset_cursor("admin", TOPIC, "s", position=Position(999, 999))
    assert broker.cursor_state("admin", TOPIC, "s") == before

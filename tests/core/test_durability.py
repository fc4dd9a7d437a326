"""Nothing acknowledged is lost: no cap, restarts, concurrent writers, compaction.

Acknowledgements go the way a consumer's do: the dispatcher's cursor transaction."""

from __future__ import annotations

import random
import threading

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import PositionOutOfRangeError, SubscriptionNotFoundError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading import dispatch
from cursorops.core.services.reading.message import Message

from .conftest import Clock

TOPIC = "persistent://acme/ops/durable"


def make_topic(broker: Broker, messages: int, batch_size: int = 1) -> list[MessageId]:
    broker.admin.create_topic("admin", TOPIC, partitions=0)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    return broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(messages)], batch_size=batch_size
    )


def acknowledge(broker: Broker, ids: list[MessageId]) -> None:
    """``ids`` acknowledged by a consumer of the subscription, in one call."""
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("acknowledger")
    try:
        consumer.acknowledge([Message(m, TOPIC, b"", None, {}, 0, None, "", 0) for m in ids])
    finally:
        consumer.close()


def test_scattered_holes_beyond_pulsars_cap_survive_a_restart(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    """30,000 isolated acknowledged entries: 3x Pulsar 4.x's 10,000-range persistence cap."""
    ids = make_topic(broker, 60_001)
    acked = ids[1::2]
    for start in range(0, len(acked), 5_000):
        acknowledge(broker, acked[start : start + 5_000])
    expected = broker.analysis.cursor_state("admin", TOPIC, "s")
    assert expected.individually_deleted.range_count() == 30_000
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        recovered = restarted.analysis.cursor_state("admin", TOPIC, "s")
        assert recovered == expected
        analysis = restarted.analysis.analyze_backlog("admin", TOPIC, "s")[0].result
        assert analysis.messages == 30_001


def test_batch_index_acks_survive_a_restart(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    ids = make_topic(broker, 1_000, batch_size=10)
    chosen = random.Random(7).sample(ids, 300)
    acknowledge(broker, chosen)
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        state = restarted.analysis.cursor_state("admin", TOPIC, "s")
        for m in ids:
            assert state.is_acked(m.position, m.batch_index) == (m in chosen)
        assert restarted.analysis.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 700


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
                for start in range(0, len(by_consumer), 10):
                    acknowledge(own, by_consumer[start : start + 10])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def admin() -> None:
        try:
            with Broker(home_config, clock=clock) as own:
                for start in range(0, len(by_admin), 20):
                    skips.skip_messages(
                        own.gated, "admin", TOPIC, "s", by_admin[start : start + 20]
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consumer), threading.Thread(target=admin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    state = broker.analysis.cursor_state("admin", TOPIC, "s")
    acked = set(by_consumer) | set(by_admin)
    for m in ids:
        assert state.is_acked(m.position, m.batch_index) == (m in acked), m
    assert broker.analysis.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 400


@pytest.mark.slow
def test_compaction_keeps_every_delta(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, home_config: Config, clock: Clock
) -> None:
    """Two brokers acknowledge in turn while the dispatcher folds the journal every 7 deltas
    (when it reads the cursor to dispatch): no acknowledgement is lost to a fold."""
    monkeypatch.setattr(dispatch, "COMPACT_AFTER_DELTAS", 7)
    ids = make_topic(broker, 300, batch_size=3)
    other = Broker(home_config, clock=clock)
    try:
        readers = [
            b.reading.dispatcher("admin", TOPIC, "s").subscribe("reader") for b in (broker, other)
        ]
        for i, m in enumerate(ids):
            acknowledge(other if i % 2 else broker, [m])
            readers[i % 2].receive_many(1, prefetch=False)
        for reader in readers:
            reader.close()
        folded = broker.metadata.load_cursor(TOPIC, "s")
        assert folded.snapshot_version > 0 and len(folded.deltas) < 20
    finally:
        other.close()
    state = broker.analysis.cursor_state("admin", TOPIC, "s")
    assert state.mark_delete == ids[-1].position
    assert broker.analysis.analyze_backlog("admin", TOPIC, "s")[0].result.messages == 0


def test_reset_cursor_forgets_later_acks_durably(
    broker: Broker, home_config: Config, clock: Clock
) -> None:
    ids = make_topic(broker, 10)
    acknowledge(broker, ids[:8])
    reset.reset_cursor(
        broker.gated, "admin", TOPIC, "s", position=Position(ids[3].ledger_id, ids[3].entry_id)
    )
    broker.close()
    with Broker(home_config, clock=clock) as restarted:
        assert [m.payload for m in restarted.reading.consume("admin", TOPIC, "s", 20)] == [
            b"%d" % i for i in range(3, 10)
        ]


def test_deltas_to_several_cursors_are_all_or_nothing(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=2)
    broker.admin.create_subscription(
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
    acknowledge(broker, ids[:1])
    before = broker.analysis.cursor_state("admin", TOPIC, "s")
    with pytest.raises(PositionOutOfRangeError, match="no such entry"):
        reset.reset_cursor(broker.gated, "admin", TOPIC, "s", position=Position(999, 999))
    assert broker.analysis.cursor_state("admin", TOPIC, "s") == before

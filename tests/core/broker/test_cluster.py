"""Several brokers on one store: joining, beating, declaring the silent dead, releasing
what they held, fencing their writes, and who owns a partition (both engines)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import BrokerFencedError, NotAuthorizedError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.broker.cluster import owner_of
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.broker_registry import DEAD, LIVE, Advertised, BrokerRecord

from ..conftest import Clock

TOPIC = "persistent://acme/ops/held"
DEAD_AFTER = Config.broker_dead_after_ms


@pytest.fixture
def pair(home_config: Config, clock: Clock) -> Iterator[tuple[Broker, Broker]]:
    """Two brokers on one store, each with its own view of the same clock."""
    with Broker(home_config, clock=clock) as a, Broker(home_config, clock=clock) as b:
        a.admin.create_tenant("admin", "acme")
        a.admin.create_namespace("admin", "acme/ops")
        a.admin.create_topic("admin", TOPIC)
        a.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(6)])
        a.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        a.cluster.join("aaaa", Advertised("pulsar://a:6650"))
        b.cluster.join("bbbb", Advertised("pulsar://b:6650", web_url="http://b:8080"))
        yield a, b


def _holders(broker: Broker) -> dict[str | None, int]:
    with broker.metadata.subscription_transaction(TOPIC, "s", broker.clock()) as txn:
        counts: dict[str | None, int] = {}
        for info in txn.pending().values():
            counts[info.consumer_id] = counts.get(info.consumer_id, 0) + 1
        return counts


def test_a_silent_broker_is_declared_dead_and_what_it_held_goes_to_the_living(
    pair: tuple[Broker, Broker], clock: Clock
) -> None:
    a, b = pair
    fence_b = b.cluster.fence
    assert fence_b is not None
    held = b.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", consumer_id=f"{fence_b.consumer_prefix}1"
    )
    held.dispatcher.flow(held, 4)
    assert _holders(a) == {f"{fence_b.consumer_prefix}1": 4}
    assert {r.broker_id for r in a.cluster.live()} == {"aaaa", "bbbb"}

    # b falls silent; a beats on. Before the deadline nothing happens.
    clock.advance(DEAD_AFTER)
    assert a.cluster.beat().declared == []
    clock.advance(1)
    # Late but not declared: not beating, still a member (ownership does not move yet).
    assert [r.broker_id for r in a.cluster.live()] == ["aaaa"]
    assert [r.broker_id for r in a.cluster.members()] == ["aaaa", "bbbb"]
    assert [v.state for v in a.cluster.list_brokers("admin")] == ["live", "late"]
    beat = a.cluster.beat()
    assert beat.alive and beat.declared == [fence_b] and beat.released == 1
    assert _holders(a) == {None: 4}
    assert [r.broker_id for r in a.cluster.members()] == ["aaaa"]
    assert {r.broker_id: r.state for r in a.cluster.brokers()} == {"aaaa": LIVE, "bbbb": DEAD}
    # Declared once: the next beat finds nothing more to do.
    assert a.cluster.beat() == type(beat)(True, [], 0)

    # A consumer on the living broker gets what b held.
    fence_a = a.cluster.fence
    assert fence_a is not None
    taker = a.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", consumer_id=f"{fence_a.consumer_prefix}1"
    )
    assert len(taker.receive_many(10)) == 6


def test_on_postgres_a_broker_whose_process_is_gone_is_dead_at_once(
    pair: tuple[Broker, Broker], metadata_url: str
) -> None:
    if not metadata_url.startswith("postgresql"):
        pytest.skip("SQLite has no sessions: a silent broker is found by its heartbeat")
    a, b = pair
    fence_b = b.cluster.fence
    assert a.cluster.beat().declared == []  # b's session holds its lock
    b.metadata.release_life_lock()  # as when b's process is killed
    # No clock advanced: the free lock is enough.
    beat = a.cluster.beat()
    assert beat.declared == [fence_b]
    assert [r.broker_id for r in a.cluster.members()] == ["aaaa"]
    # b's own lock is not a's: a is never declared by itself.
    assert a.cluster.beat().declared == [] and a.cluster.beat().alive


def test_on_postgres_a_silent_broker_stuck_in_a_transaction_is_declared_all_the_same(
    pair: tuple[Broker, Broker], metadata_url: str, clock: Clock
) -> None:
    """A process paused in the middle of a pipeline holds its transaction open where the
    server's idle timeout never starts: a session of b's process, as that one, holds b's
    row KEY SHARE (as every write of b's does) with no timeout. Declaring b ends it, and
    does not wait for it."""
    if not metadata_url.startswith("postgresql"):
        pytest.skip("SQLite has no sessions: a transaction ends with its process")
    import psycopg
    from sqlalchemy import text

    a, b = pair
    fence_b = b.cluster.fence
    with b.metadata.engine.connect() as connection:
        tag = connection.execute(text("SHOW application_name")).scalar()
    assert str(tag).startswith("cursorops ")
    url = metadata_url.replace("postgresql+psycopg://", "postgresql://")
    stuck = psycopg.connect(url, application_name=tag)
    try:
        stuck.execute("SELECT 1 FROM brokers WHERE broker_id = 'bbbb' FOR KEY SHARE")
        dead_after_ms = 200
        time.sleep(3 * dead_after_ms / 1000)  # the transaction has not moved for longer
        clock.advance(10 * dead_after_ms)
        fence_a = a.cluster.fence
        assert fence_a is not None and a.metadata.beat(fence_a, clock())  # only b fell silent
        declared: list[object] = []
        declaring = threading.Thread(
            target=lambda: declared.append(
                a.metadata.declare_dead(clock(), dead_after_ms, me="aaaa")
            )
        )
        declaring.start()
        declaring.join(30)
        assert not declaring.is_alive() and declared == [[fence_b]]
        with pytest.raises(psycopg.OperationalError):
            stuck.execute("SELECT 1")
    finally:
        stuck.close()
    # b's session lock is not a stuck transaction: it holds on, and so does a.
    assert a.cluster.beat().alive
    with b.metadata.engine.connect() as connection:
        locks = connection.execute(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        ).scalar()
    assert locks == 2


def test_on_postgres_a_declaration_waits_for_a_write_in_flight_and_a_beat_does_not(
    pair: tuple[Broker, Broker], metadata_url: str, clock: Clock
) -> None:
    if not metadata_url.startswith("postgresql"):
        pytest.skip("SQLite runs one write transaction at a time")
    a, b = pair
    fence_b = b.cluster.fence
    assert fence_b is not None
    declared: list[object] = []
    with b.metadata.subscription_transaction(TOPIC, "s", clock()):
        # b's write holds its row KEY SHARE: its own heartbeat goes through ...
        beat = threading.Thread(target=b.cluster.beat)
        beat.start()
        beat.join(30)
        assert not beat.is_alive()
        # ... while a's declaration of b waits for the write to end.
        clock.advance(DEAD_AFTER + 1)
        declaring = threading.Thread(target=lambda: declared.append(a.cluster.beat()))
        declaring.start()
        declaring.join(1)
        assert declaring.is_alive() and declared == []
    declaring.join(30)
    assert [beat.declared for beat in declared] == [[fence_b]]  # type: ignore[attr-defined]
    with pytest.raises(BrokerFencedError):
        b.metadata.subscription_transaction(TOPIC, "s", clock()).__enter__()


def test_a_dead_life_writes_nothing_and_the_next_life_does(
    pair: tuple[Broker, Broker], clock: Clock
) -> None:
    a, b = pair
    entries = a.analysis.entry_count("admin", TOPIC)
    clock.advance(DEAD_AFTER + 1)
    assert a.cluster.beat().declared  # b is dead: its appends and dispatches are refused
    with pytest.raises(BrokerFencedError, match="declared dead"):
        b.producing.produce("admin", TOPIC, [OutgoingMessage(b"late")])
    consumer = b.reading.dispatcher("admin", TOPIC, "s")
    with pytest.raises(BrokerFencedError):
        consumer.subscribe("c", consumer_id="bbbb.1/x")
    assert a.analysis.entry_count("admin", TOPIC) == entries
    assert not b.cluster.beat().alive

    fence = b.cluster.join("bbbb", Advertised("pulsar://b:6650"))
    assert fence.epoch == 2
    b.producing.produce("admin", TOPIC, [OutgoingMessage(b"again")])
    assert a.analysis.entry_count("admin", TOPIC) == entries + 1
    assert b.cluster.beat().alive


def test_a_restarted_broker_releases_its_earlier_life_at_once(
    pair: tuple[Broker, Broker], clock: Clock
) -> None:
    a, b = pair
    old = b.cluster.fence
    assert old is not None
    held = b.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", consumer_id=f"{old.consumer_prefix}1"
    )
    held.dispatcher.flow(held, 3)
    # No deadline waited for: the same slot's next life knows the earlier one is gone.
    new = b.cluster.join("bbbb", Advertised("pulsar://b:6650"))
    assert new.epoch == old.epoch + 1
    assert _holders(a) == {None: 3}
    # The earlier life is fenced by the new one, not declared dead by anyone.
    b.metadata.fence = old
    with pytest.raises(BrokerFencedError):
        b.producing.produce("admin", TOPIC, [OutgoingMessage(b"stale")])
    assert a.cluster.beat().declared == []


def test_a_clean_leave_routes_nothing_more_to_the_broker(pair: tuple[Broker, Broker]) -> None:
    a, b = pair
    b.cluster.leave()
    assert [r.broker_id for r in a.cluster.live()] == ["aaaa"]
    assert a.cluster.beat().declared == []
    record = {r.broker_id: r for r in a.cluster.brokers()}["bbbb"]
    assert record.advertised.web_url == "http://b:8080" and record.released


def test_a_closed_broker_has_left_and_released_what_its_consumers_held(
    pair: tuple[Broker, Broker],
) -> None:
    """Closing is stopping: whatever its consumers still hold goes back to the others at
    once, and the life is over without anyone waiting for its heartbeat to go silent."""
    a, b = pair
    fence = b.cluster.fence
    assert fence is not None
    held = b.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", consumer_id=f"{fence.consumer_prefix}1"
    )
    held.dispatcher.flow(held, 3)
    assert _holders(a) == {f"{fence.consumer_prefix}1": 3}
    b.close()
    assert _holders(a) == {None: 3}
    assert [r.broker_id for r in a.cluster.live()] == ["aaaa"]
    assert a.cluster.beat().declared == []


def _record(broker_id: str) -> BrokerRecord:
    return BrokerRecord(broker_id, 1, LIVE, False, Advertised(f"pulsar://{broker_id}"), 0, 0)


ids = st.lists(st.text("0123456789abcdef", min_size=4, max_size=8), min_size=1, unique=True)


@given(ids, st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=20))
def test_ownership_moves_only_the_partitions_of_a_broker_that_leaves(
    brokers: list[str], partitions: list[str]
) -> None:
    live = [_record(b) for b in brokers]
    owners = {p: owner_of(p, live) for p in partitions}
    assert all(o is not None and o in live for o in owners.values())
    # Every broker computes the same owner whatever order it lists the others in.
    assert {p: owner_of(p, list(reversed(live))) for p in partitions} == owners
    gone = live[0]
    rest = live[1:]
    for partition, owner in owners.items():
        moved = owner_of(partition, rest)
        if owner is not gone:
            assert moved is owner
        else:
            assert moved is None if not rest else moved in rest


def test_partitions_spread_over_the_brokers() -> None:
    live = [_record(b) for b in ("aaaa", "bbbb")]
    owners = [owner_of(f"{TOPIC}-partition-{i}", live) for i in range(16)]
    assert {o.broker_id for o in owners if o is not None} == {"aaaa", "bbbb"}
    assert owner_of(TOPIC, []) is None


def test_only_a_superuser_lists_the_brokers(pair: tuple[Broker, Broker]) -> None:
    a, _ = pair
    assert [v.broker_id for v in a.cluster.list_brokers("admin")] == ["aaaa", "bbbb"]
    with pytest.raises(NotAuthorizedError):
        a.cluster.list_brokers("acme-admin")

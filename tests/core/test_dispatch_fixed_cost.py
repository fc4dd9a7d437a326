"""What a dispatch keeps between dispatches, and the transaction it runs in.

A dispatch's fixed cost is kept low by reading again only what may have
changed: the ledger list when new segments were listed, a segment's footer
once per file, released runs from what the same transaction just read. Each
shortcut must give what reading everything afresh gives. The subscription
transaction runs on a pooled DBAPI connection: it must commit or roll back
whole and hand the connection back whatever happens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import MetadataStoreError, SubscriptionNotFoundError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.dispatch_state import SubscriptionTransaction
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.segment_reader import SegmentCache

from .conftest import Clock

TOPIC = "persistent://acme/ops/fixed-cost"
ANY = Ticket.ungated("a test's write, on a namespace that requires no approval")


@pytest.fixture
def small_ledgers(tmp_path: Path, metadata_url: str, clock: Clock) -> Iterator[Broker]:
    """An installation whose ledgers roll over every 3 entries."""
    config = Config.from_home(
        tmp_path / "home", metadata_url=metadata_url, max_entries_per_ledger=3
    )
    with Broker(config, clock=clock) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        yield broker


def _produce(broker: Broker, first: int, count: int) -> None:
    # One message per call: one entry each, so the ledgers roll over.
    for i in range(first, first + count):
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode())])


def test_a_dispatcher_follows_ledgers_added_after_it_started(small_ledgers: Broker) -> None:
    broker = small_ledgers
    _produce(broker, 0, 4)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "s")
    consumer = dispatcher.subscribe("c")
    first = consumer.receive_many(100)
    assert [m.payload for m in first] == [f"m{i}".encode() for i in range(4)]
    consumer.acknowledge(first)
    # New ledgers while the dispatcher holds its segment list and ledger layout.
    _produce(broker, 4, 5)
    second = consumer.receive_many(100)
    assert [m.payload for m in second] == [f"m{i}".encode() for i in range(4, 9)]
    ledgers = [(info.ledger_id, info.entries) for info in broker.metadata.ledgers(TOPIC)]
    assert len(ledgers) == 3
    assert dispatcher.known_layout(TOPIC) == LedgerLayout.of(ledgers)
    consumer.acknowledge(second)
    assert not consumer.receive_many(100)
    # Everything acknowledged: mark-delete at the last entry of the newest ledger.
    state = dispatcher.known_state(TOPIC)
    assert state is not None
    assert state.mark_delete == Position(ledgers[-1][0], ledgers[-1][1] - 1)
    stats = broker.analysis.topic_stats("admin", TOPIC).subscriptions["s"]
    assert stats.msg_backlog == 0


def test_a_segment_replaced_under_its_name_is_read_afresh(small_ledgers: Broker) -> None:
    broker = small_ledgers
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(3)])
    segment = broker.metadata.segments(TOPIC)[0]
    cache = SegmentCache(broker.ledgers.root)
    before = pa.Table.from_batches(list(cache.batches_after([segment], Position(-1, -1))))
    assert before.column("payload").to_pylist() == [b"m0", b"m1", b"m2"]
    path = os.path.join(broker.ledgers.root, segment.path)
    table = pq.read_table(path)
    payload = table.schema.get_field_index("payload")
    changed = table.set_column(
        payload,
        table.schema.field(payload),
        pc.binary_join_element_wise(table.column("payload"), pa.scalar(b"-new"), pa.scalar(b"")),
    )
    # A footer with two row groups, where the old file had one: the cached footer must go.
    pq.write_table(changed, path + ".tmp", row_group_size=2)
    os.replace(path + ".tmp", path)
    after = pa.Table.from_batches(list(cache.batches_after([segment], Position(-1, -1))))
    assert after.column("payload").to_pylist() == [b"m0-new", b"m1-new", b"m2-new"]


def test_a_failed_transaction_writes_nothing_and_returns_its_connection(
    metadata_url: str,
) -> None:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        store.create_namespace("acme/ops")
        store.create_topic(TOPIC, 0)
        store.create_subscription(TOPIC, "s", SubscriptionType.SHARED, {}, {TOPIC: b""})
        # More failures than the pool has connections: each one must come back.
        for _ in range(25):
            with pytest.raises(RuntimeError), store.subscription_transaction(TOPIC, "s", 0) as txn:
                txn.upsert_consumer("c", "c", 0, 0, 1_000)
                raise RuntimeError("the caller failed")
            with (
                pytest.raises(SubscriptionNotFoundError),
                store.subscription_transaction(TOPIC, "missing", 0),
            ):
                pass
            with (
                pytest.raises(MetadataStoreError),
                store.subscription_transaction(TOPIC, "s", 0) as txn,
            ):
                txn.upsert_consumer("c", "c", 0, 0, 1_000)
                txn._driver_execute("INSERT INTO no_such_table VALUES (1)", ())
        with store.subscription_transaction(TOPIC, "s", 0) as txn:
            assert txn.consumers() == []
            with pytest.raises(SubscriptionNotFoundError):
                txn.append_cursor_delta(f"{TOPIC}-partition-9", b"x", ticket=ANY)
        with store.subscription_transaction(TOPIC, "s", 0) as txn:
            version = txn.append_cursor_delta(TOPIC, b"delta", ticket=ANY)
            txn.upsert_consumer("c", "c", 0, 0, 1_000)
        record = store.load_cursor(TOPIC, "s")
        assert record.version == version == 1
        assert record.deltas == [b"delta"]
        with store.subscription_transaction(TOPIC, "s", 0) as txn:
            assert [c.consumer_id for c in txn.consumers()] == ["c"]


def _flush_setting(txn: SubscriptionTransaction) -> str:
    if txn._postgres:
        return str(txn._driver_rows("SHOW synchronous_commit", ())[0][0])
    return {0: "off", 1: "normal", 2: "full", 3: "extra"}[
        int(txn._driver_rows("PRAGMA synchronous", ())[0][0])
    ]


def test_only_a_dispatch_commits_without_waiting_for_the_disk(
    small_ledgers: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dispatch's bookkeeping commits without a flush; joining, acknowledging and
    every later transaction on the same pooled connection flush as before."""
    broker = small_ledgers
    _produce(broker, 0, 2)
    seen: list[tuple[str, str]] = []
    real_lock = SubscriptionTransaction._lock

    def lock(self: SubscriptionTransaction, topic: str, *, flushed: bool = True) -> None:
        if self._postgres:
            # The test server runs with synchronous_commit off: on for this session, so
            # that a transaction turning it off shows.
            self._run("SET synchronous_commit = on", ())
        real_lock(self, topic, flushed=flushed)
        seen.append(("flushed" if flushed else "not flushed", _flush_setting(self)))

    monkeypatch.setattr(SubscriptionTransaction, "_lock", lock)
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
    messages = consumer.receive_many(10)
    assert [m.payload for m in messages] == [b"m0", b"m1"]
    consumer.acknowledge(messages)
    postgres = broker.metadata.engine.dialect.name == "postgresql"
    full = ("flushed", "on" if postgres else "full")
    relaxed = ("not flushed", "off" if postgres else "normal")
    assert seen[0] == full  # subscribe
    assert seen[-1] == full  # acknowledge
    assert set(seen[1:-1]) == {relaxed}  # the dispatches
    # Set back: the next transaction on the pool's connections flushes.
    with broker.metadata.subscription_transaction(TOPIC, "s", 0) as txn:
        assert _flush_setting(txn) == full[1]
    assert broker.analysis.topic_stats("admin", TOPIC).subscriptions["s"].msg_backlog == 0

"""Revision 0007: a store at 0006 whose consumers acknowledged past a held message upgrades
and reads; its cursors carry no consumer-ack mark, so the radar's age rule finds nothing
behind (rather than everything) until a consumer acknowledges again, and then it does."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store import migrate as migrate_module
from cursorops.core.store.engine import create_store_engine
from cursorops.core.store.schema import HEAD_REVISION, recorded_revision

from ..conftest import Clock

BEFORE = "0006_approval_answers"
TOPIC = "persistent://acme/ops/orders"
HELD = b"order 1"


def _columns(url: str) -> set[str]:
    engine = create_store_engine(make_url(url))
    try:
        return {c["name"] for c in inspect(engine).get_columns("cursors")}
    finally:
        engine.dispose()


def test_an_upgraded_store_reads_and_says_nothing_until_a_consumer_acknowledges(
    tmp_path: Path, metadata_url: str, clock: Clock
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    with Broker(config, clock=clock) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(b"order %d" % i) for i in range(6)]
        )
        consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
            "c", receiver_queue_size=3
        )
        for message in consumer.receive_many(3):
            if message.payload != HELD:
                consumer.acknowledge(message)
        consumer.close()
        # The store goes back to 0006, as the code before this revision left it.
        engine = create_store_engine(make_url(metadata_url))
        try:
            with engine.begin() as connection:
                command.downgrade(migrate_module._alembic_config(connection), BEFORE)
            assert recorded_revision(engine) == BEFORE
        finally:
            engine.dispose()
    assert "consumer_ack_ledger_id" not in _columns(metadata_url)

    migrate_module.migrate(config)
    assert "consumer_ack_ledger_id" in _columns(metadata_url)
    clock.advance(600_000)
    with Broker(config, clock=clock) as broker:
        assert broker.metadata.consumer_acks(TOPIC, "s") == {}
        (radar,) = broker.analysis.poison_radar("admin", TOPIC, "s")
        assert radar.result.stuck == 0
        assert len(broker.reading.peek_messages("admin", TOPIC, "s", 50)) == 4
        # A consumer acknowledges again: its acknowledgement is the evidence.
        consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
            "d", receiver_queue_size=3
        )
        consumer.acknowledge([m for m in consumer.receive_many(3) if m.payload != HELD])
        consumer.close()
        (radar,) = broker.analysis.poison_radar("admin", TOPIC, "s")
        assert [m.entry_id for m in radar.result.listed] == [1]
        assert radar.result.listed[0].behind_acks
    engine = create_store_engine(make_url(metadata_url))
    try:
        assert recorded_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()

"""Revisions 0004 and 0005: a store at 0003 or 0004 upgrades, reads the same, and then keeps
schema versions, broker policies and compaction horizons."""

from __future__ import annotations

from pathlib import Path

import pytest
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

TOPIC = "persistent://acme/ops/orders"


def _store_at(url: str, revision: str) -> None:
    engine = create_store_engine(make_url(url))
    try:
        with engine.begin() as connection:
            command.upgrade(migrate_module._alembic_config(connection), revision)
    finally:
        engine.dispose()


@pytest.mark.parametrize("before", ["0003_drop_tables_digest", "0004_schemas_and_policies"])
def test_an_older_store_upgrades_and_keeps_schemas_and_horizons(
    tmp_path: Path, metadata_url: str, before: str
) -> None:
    _store_at(metadata_url, before)
    engine = create_store_engine(make_url(metadata_url))
    try:
        assert recorded_revision(engine) == before
        assert "compaction_horizons" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    migrate_module.migrate(config)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(3)])
        assert broker.analysis.topic_stats("admin", TOPIC).subscriptions["s"].msg_backlog == 3
        from cursorops.core.domain.schemas.schema_info import SchemaInfo, SchemaType

        info = SchemaInfo(SchemaType.STRING, b"", {})
        assert broker.schemas.put_schema("admin", TOPIC, info) == 0
        assert broker.schemas.get_schema("admin", TOPIC) == (0, info)
        broker.policies.set_deduplication("admin", "acme/ops", True)
        assert broker.policies.deduplication_policy("admin", "acme/ops") is True
        assert broker.policies.deduplication(TOPIC) is True
        assert broker.compaction.compaction_status("admin", TOPIC) == "NOT_RUN"
        broker.compaction.compact("admin", TOPIC)
        assert broker.compaction.compaction_status("admin", TOPIC) == "SUCCESS"
    engine = create_store_engine(make_url(metadata_url))
    try:
        assert recorded_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()

"""Schema migrations: a store from before migrations upgrades and then reads exactly the same.

The store "from before" is what that code left: the baseline revision's tables
(frozen in ``v0001_baseline``) and its digest row in ``cursorops_schema``, no
``alembic_version``. It is filled through the Broker with the open's schema check
switched off (that code did none), on SQLite and on PostgreSQL: cursors with
acknowledgements in their journals, a partly acknowledged batch, skips and their
audit rows, backlog history, and messages delivered and not acknowledged. Every
reading (analyze-backlog, stats, peek, the audit log, the history) is taken before
and after the migration; what consume delivers after it is compared with a twin
store built the same way at the head, since a consume changes what it reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect
from sqlalchemy.engine import make_url

from cursorops.cli.main import main
from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import SchemaOutOfDateError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store import dispatch_state
from cursorops.core.store import metadata as metadata_module
from cursorops.core.store.engine import create_store_engine
from cursorops.core.store.migrate import head_revision
from cursorops.core.store.migrations.versions.v0001_baseline import BASELINE
from cursorops.core.store.schema import HEAD_REVISION, recorded_revision
from cursorops.core.store.tables import Base

from ..conftest import Clock

TOPIC = "persistent://acme/ops/orders"
HOUR_MS = 3_600_000
TWINS = ("a", "b")


def create_pre_migration_store(url: str) -> None:
    """The tables and digest row the code before migrations created; no alembic_version."""
    engine = create_store_engine(make_url(url))
    names = sorted(BASELINE.tables)
    try:
        with engine.begin() as connection:
            BASELINE.create_all(connection)
            connection.execute(
                insert(BASELINE.tables["cursorops_schema"]).values(
                    id=1, tables_digest=hashlib.sha256("\n".join(names).encode()).hexdigest()
                )
            )
    finally:
        engine.dispose()


def populate(broker: Broker, clock: Clock) -> None:
    """Acknowledgements of every kind on a 2-partition topic, audit rows and history.

    Subscriptions ``a`` and ``b`` go through the very same steps, so what one
    delivers before the migration, the other must deliver after it.
    """
    broker.admin.create_tenant("admin", "acme")
    broker.admin.create_namespace("admin", "acme/ops")
    broker.admin.create_topic("admin", TOPIC, 2)
    for name in (*TWINS, "other"):
        broker.admin.create_subscription(
            "admin", TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
        )
    singles = [OutgoingMessage(b"s%d" % i, key=f"k{i % 3}") for i in range(16)]
    broker.producing.produce("admin", TOPIC, singles)
    clock.advance(1_000)
    batched = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"b%d" % i) for i in range(16)], batch_size=4
    )
    clock.advance(1_000)
    due_later = clock() + HOUR_MS
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"d", deliver_at=due_later)] * 2)
    first = batched[0]
    one_of_a_batch = MessageId(first.ledger_id, first.entry_id, first.partition, 1, 4)
    for name in TWINS:
        # Acknowledged through the dispatcher (the consumer's path)...
        broker.reading.consume("admin", TOPIC, name, 5, ack=True)
        # ... a skip of a whole message and of one message inside a batch (audited) ...
        skips.skip_messages(broker.gated, "admin", TOPIC, name, [one_of_a_batch, batched[-1]])
        # ... and messages delivered, not acknowledged, released for redelivery.
        broker.reading.consume("admin", TOPIC, name, 3)
    skips.skip_messages(broker.gated, "admin", TOPIC, "other", [batched[5]])
    stats = broker.analysis.topic_stats("admin", TOPIC)
    samples = [
        BacklogSample(TOPIC, name, clock(), sub.msg_backlog, 0, None, run_id="run-1")
        for name, sub in sorted(stats.subscriptions.items())
    ]
    assert broker.analysis.record_backlog_audit("admin", "run-1", samples) == 3
    broker.workflow.record_audit("admin", "note", TOPIC, None, {"why": "before the migration"})
    clock.advance(1_000)


def readings(broker: Broker) -> dict[str, Any]:
    """Everything an operator reads of the topic, without changing it."""
    return {
        "analysis": broker.analysis.analyze_backlog("admin", TOPIC),
        "stats": broker.analysis.topic_stats("admin", TOPIC),
        "peek": {s: broker.reading.peek_messages("admin", TOPIC, s, 50) for s in (*TWINS, "other")},
        "cursors": {
            (p, s): broker.analysis.cursor_state("admin", f"{TOPIC}-partition-{p}", s)
            for p in (0, 1)
            for s in (*TWINS, "other")
        },
        "audit": broker.workflow.audit_log("admin", TOPIC),
        "history": broker.analysis.backlog_history("admin", TOPIC),
    }


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def test_head_revision_constant_is_alembics_head() -> None:
    assert head_revision() == HEAD_REVISION


def test_a_store_from_before_migrations_migrates_and_reads_the_same(
    tmp_path: Path, metadata_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = Config.from_home(tmp_path / "old", metadata_url=metadata_url)
    create_pre_migration_store(metadata_url)
    with monkeypatch.context() as before_migrations:
        before_migrations.setattr(metadata_module, "ensure_schema", lambda *_: None)
        # That code kept no consumer-ack mark (revision 0007): its consumers' acknowledgements
        # bump the cursor alone.
        before_migrations.setattr(dispatch_state, "highest_message", lambda *_: None)
        with Broker(old, clock=Clock()) as broker:
            populate(broker, broker.clock)  # type: ignore[arg-type]
            delivered_before = broker.reading.consume("admin", TOPIC, "a", 50)
            now = broker.clock()
            before = readings(broker)
    url = make_url(metadata_url)
    engine = create_store_engine(url)
    try:
        assert recorded_revision(engine) is None
        if url.get_backend_name() == "postgresql":
            with pytest.raises(SchemaOutOfDateError, match="cursorops db migrate"):
                Broker(old)
            code, said = cli("--metadata-url", metadata_url, "topics", "stats", TOPIC)
            assert code == 6
            assert said.count("\n") == 1 and "run `cursorops db migrate`" in said
            assert recorded_revision(engine) is None  # refused: nothing was changed
            code, said = cli(
                "--home", str(old.home), "--metadata-url", metadata_url, "db", "migrate"
            )
            assert code == 0, said
            assert f"from no revision to {HEAD_REVISION}" in said
        with Broker(old, clock=Clock(now)) as broker:
            assert recorded_revision(engine) == HEAD_REVISION
            assert readings(broker) == before
            delivered_after = broker.reading.consume("admin", TOPIC, "b", 50)
        tables = set(inspect(engine).get_table_names())
        assert tables == {*Base.metadata.tables, "alembic_version"}  # cursorops_schema dropped
    finally:
        engine.dispose()
    assert delivered_after == delivered_before
    assert len(delivered_before) == 16 + 16 - 5 - 2  # delayed ones not yet due


def test_the_migrated_schema_is_the_tables(metadata_url: str) -> None:
    """Upgrading from nothing and from the baseline both give exactly
    cursorops.core.store.tables."""
    create_pre_migration_store(metadata_url)
    code, said = cli("--metadata-url", metadata_url, "db", "migrate")
    assert code == 0, said
    engine = create_store_engine(make_url(metadata_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection)
            assert context.get_current_revision() == HEAD_REVISION
            assert compare_metadata(context, Base.metadata) == []
            indexes = {i["name"] for i in inspect(connection).get_indexes("plan_records")}
            assert "ix_plan_records_waiting" in indexes
    finally:
        engine.dispose()


def test_migrate_is_idempotent_and_says_so(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    code, said = cli("--home", home, "-o", "json", "db", "migrate")
    assert code == 0, said
    assert '"migrated": true' in said and '"from": null' in said
    code, said = cli("--home", home, "db", "migrate")
    assert code == 0, said
    assert "up to date" in said

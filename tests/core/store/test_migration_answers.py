"""Revision 0006: a store at 0005 holding a waiting run's presentation upgrades, keeps it as
it was (no try recorded), takes that gate's answer when it resumes, and refuses to show the
gate again."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import AlreadyExistsError
from cursorops.core.domain.plans.plan_record import ApprovalAnswer, ApprovalRequest
from cursorops.core.services.broker import Broker
from cursorops.core.store import migrate as migrate_module
from cursorops.core.store.engine import create_store_engine
from cursorops.core.store.schema import HEAD_REVISION, recorded_revision

BEFORE = "0005_compaction_horizons"
DIGEST = "d" * 64
PLAN_ROW = {
    "digest": DIGEST,
    "operation": "skip",
    "dag_id": "cursorops_skip_messages",
    "run_id": "manual__1",
    "requester": "alice",
    "role": "alice",
    "topic": "persistent://acme/ops/orders",
    "subscription": "s",
    "created_at_ms": 1,
    "plan_id": "p",
    "plan_json": "{}",
    "document": "{}",
    "messages": 1,
    "required_approvals": 1,
}
REQUEST_ROW = {
    "digest": DIGEST,
    "dag_id": "cursorops_skip_messages",
    "run_id": "manual__1",
    "gate": "approve_skip",
    "body_sha256": "b" * 64,
    "approvers": '["bob", "carol"]',
    "presented_at_ms": 5,
    "valid_for_ms": 60_000,
    "subject": "Skip 1 message(s)",
    "body": "the text",
}


def _insert(connection, table: str, row: dict[str, object]) -> None:
    names = ", ".join(row)
    values = ", ".join(f":{name}" for name in row)
    connection.execute(text(f"INSERT INTO {table} ({names}) VALUES ({values})"), row)


@pytest.fixture
def store_at_0005(metadata_url: str) -> str:
    """A store at revision 0005 with a plan record and its gate's presentation, as a run
    waiting for its approval left them."""
    engine = create_store_engine(make_url(metadata_url))
    try:
        with engine.begin() as connection:
            command.upgrade(migrate_module._alembic_config(connection), BEFORE)
            _insert(connection, "plan_records", PLAN_ROW)
            _insert(connection, "approval_requests", REQUEST_ROW)
        assert recorded_revision(engine) == BEFORE
        assert "approval_answers" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    return metadata_url


def test_a_waiting_presentation_survives_the_upgrade_and_takes_its_answer(
    tmp_path: Path, store_at_0005: str
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=store_at_0005)
    migrate_module.migrate(config)
    shown = ApprovalRequest(
        DIGEST,
        "cursorops_skip_messages",
        "manual__1",
        "approve_skip",
        "b" * 64,
        ("bob", "carol"),
        5,
        60_000,
        "Skip 1 message(s)",
        "the text",
        None,
    )
    with Broker(config) as broker:
        assert broker.workflow.approval_requests("cursorops_skip_messages", "manual__1") == [shown]
        assert broker.workflow.approval_answers("cursorops_skip_messages", "manual__1") == []
        # The gate resumes after the upgrade: its answer is recorded against what it showed.
        answer = broker.workflow.record_approval_answer(
            "cursorops_skip_messages", "manual__1", "approve_skip", 1, ["Approve"], "bob", 9
        )
        assert answer == ApprovalAnswer(shown, ("Approve",), "bob", 9)
        assert broker.workflow.approval_answers("cursorops_skip_messages", "manual__1") == [answer]
        # Cleared after the upgrade, the gate refuses to show anything again.
        with pytest.raises(AlreadyExistsError):
            broker.workflow.record_approval_request(
                ApprovalRequest(
                    DIGEST, "cursorops_skip_messages", "manual__1", "approve_skip", "c" * 64,
                    ("bob",), 10, 60_000, try_number=2,
                )
            )  # fmt: skip
    engine = create_store_engine(make_url(store_at_0005))
    try:
        assert recorded_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()

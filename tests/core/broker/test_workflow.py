"""Plan records, approval requests and the audit log through ``Broker.workflow``."""

from __future__ import annotations

import pytest

from core.broker import Broker
from core.errors import NotAuthorizedError
from core.ids.message_id import MessageId
from core.skipping.plan_record import ApprovalRequest, PlanBinding

from .conftest import TOPIC


def test_a_saved_plan_record_is_the_runs_current_one(broker: Broker, ids: list[MessageId]) -> None:
    plan = broker.plan_skip("admin", TOPIC, "s", ids[:2])
    binding = PlanBinding(dag_id="d", run_id="r", requester="ann", role="admin")
    record = broker.workflow.save_plan_record(binding, plan, {"plan": "document"})
    assert record.required_approvals == 1
    assert broker.workflow.current_plan_record("admin", "d", "r") == record
    assert broker.workflow.current_plan_record("admin", "d", "other") is None
    assert [r.digest for r in broker.workflow.waiting_plan_records("admin", TOPIC)] == [
        record.digest
    ]
    with pytest.raises(NotAuthorizedError):
        broker.workflow.current_plan_record("stranger", "d", "r")


def test_the_audit_log_reads_back_what_was_recorded(broker: Broker, ids: list[MessageId]) -> None:
    first = broker.workflow.record_audit("admin", "note", TOPIC, "s", {"n": 1})
    second = broker.workflow.record_audit("admin", "other", TOPIC, None, {"n": 2})
    assert second > first
    assert [r.detail for r in broker.workflow.audit_log("admin", TOPIC)] == [{"n": 2}, {"n": 1}]
    [note] = broker.workflow.audit_log("admin", TOPIC, kind="note")
    assert (note.subscription, note.role, note.at_ms) == ("s", "admin", broker.clock())
    with pytest.raises(NotAuthorizedError):
        broker.workflow.record_audit("stranger", "note", TOPIC, None, {})


def test_approval_requests_are_kept_per_run(broker: Broker, ids: list[MessageId]) -> None:
    plan = broker.plan_skip("admin", TOPIC, "s", ids[:1])
    binding = PlanBinding(dag_id="d", run_id="r", requester="ann", role="admin")
    record = broker.workflow.save_plan_record(binding, plan, {"plan": "document"})
    request = ApprovalRequest(
        digest=record.digest,
        dag_id="d",
        run_id="r",
        gate="approve_skip",
        body_sha256="b" * 64,
        approvers=("bob",),
        presented_at_ms=broker.clock(),
        valid_for_ms=60_000,
    )
    broker.workflow.record_approval_request(request)
    assert broker.workflow.approval_requests("d", "r") == [request]
    assert broker.workflow.approval_requests("d", "other") == []

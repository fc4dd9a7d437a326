"""Plan records, approval requests, their answers and the audit log through ``Broker.workflow``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cursorops.core.domain.errors import AlreadyExistsError, NotAuthorizedError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.plans.plan_record import ApprovalAnswer, ApprovalRequest, PlanBinding
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips

from .conftest import TOPIC


def test_a_saved_plan_record_is_the_runs_current_one(broker: Broker, ids: list[MessageId]) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:2])
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
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:1])
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
        try_number=1,
    )
    broker.workflow.record_approval_request(request)
    assert broker.workflow.approval_requests("d", "r") == [request]
    assert broker.workflow.approval_requests("d", "other") == []
    # A gate shows its request once per run: a cleared or re-run gate, whatever its try
    # and whatever plan it would show, records nothing.
    for again in (request, replace(request, try_number=2, body_sha256="c" * 64)):
        with pytest.raises(AlreadyExistsError, match="showed its request already"):
            broker.workflow.record_approval_request(again)
    assert broker.workflow.approval_requests("d", "r") == [request]
    later = replace(request, gate="approve_skip_2")
    broker.workflow.record_approval_request(later)
    assert broker.workflow.approval_requests("d", "r") == [request, later]


def test_an_answer_is_recorded_once_for_what_the_gates_try_showed(
    broker: Broker, ids: list[MessageId]
) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:1])
    binding = PlanBinding(dag_id="d", run_id="r", requester="ann", role="admin")
    record = broker.workflow.save_plan_record(binding, plan, {"plan": "document"})
    shown = ApprovalRequest(
        record.digest, "d", "r", "approve_skip", "b" * 64, ("bob",), 5, 60_000, try_number=1
    )
    workflow = broker.workflow
    workflow.record_approval_request(shown)
    assert workflow.approval_answers("d", "r") == []

    def answer(try_number=1, chosen=("Approve",), by="bob", gate="approve_skip", run="r"):
        return workflow.record_approval_answer("d", run, gate, try_number, chosen, by, 9)

    for refused, why in [
        ({"try_number": 2}, "Try 2 of gate approve_skip of run r showed nothing"),
        ({"gate": "approve_skip_2"}, "showed nothing"),
        ({"run": "other"}, "showed nothing"),
    ]:
        with pytest.raises(NotAuthorizedError, match=why):
            answer(**refused)  # type: ignore[arg-type]
    assert workflow.approval_answers("d", "r") == []

    approved = answer()
    assert approved == ApprovalAnswer(shown, ("Approve",), "bob", 9)
    assert answer() == approved  # a resumed gate recording the same answer again
    for other in ({"chosen": ("Reject",)}, {"by": "carol"}, {"by": None}):
        with pytest.raises(NotAuthorizedError, match="answered already"):
            answer(**other)  # type: ignore[arg-type]
    assert workflow.approval_answers("d", "r") == [approved]
    assert workflow.approval_answers("d", "other") == []

    # A presentation recorded before tries were recorded takes the answer of any try.
    old = replace(shown, gate="approve_skip_2", try_number=None)
    workflow.record_approval_request(old)
    second = answer(try_number=3, gate="approve_skip_2")
    assert workflow.approval_answers("d", "r") == [approved, second]
    assert second.request == old

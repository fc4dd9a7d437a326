"""The closing record of a gated request, in cursorops's audit log.

One ``<operation>-request`` record (``skip-request``, ``undo-skip-request``,
``redrive-request``) per attempt at closing a run: who asked and as which role,
why (reason, ticket), who answered each approval gate and when, and what the
run's plan record became, all read from cursorops's store: the answers the gates
recorded, and the apply's own record (``skip``, ..., written in the transaction
that made the change) or an ``<operation>-refused`` record of an apply that
applied nothing. Nothing in it comes from an XCom or from Airflow's API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.plans.plan_record import SKIP

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.services.broker import AuditRecord, Broker


def request_kind(operation: str) -> str:
    return f"{operation}-request"


def _answers(broker: Broker, record: PlanRecord, gates: Sequence[str]) -> list[dict[str, Any]]:
    """The answer each gate of the run recorded to what it showed for ``record`` (chosen
    None: shown, unanswered), in gate order; an answer to another plan of the run (a
    planning task cleared meanwhile) is not one to this plan."""
    from cursorops.airflow.approval import by_gate
    from cursorops.core.services.gating.staleness import iso

    b = record.binding
    answers = by_gate(
        [
            a
            for a in broker.workflow.approval_answers(b.dag_id, b.run_id)
            if a.request.digest == record.digest
        ]
    )
    shown = {
        r.gate
        for r in broker.workflow.approval_requests(b.dag_id, b.run_id)
        if r.digest == record.digest
    }
    out = []
    for gate in gates:
        answer = answers.get(gate)
        if answer is not None:
            out.append(
                {
                    "gate": gate,
                    "chosen": list(answer.chosen),
                    "by": answer.responded_by,
                    "at": iso(answer.responded_at_ms),
                }
            )
        elif gate in shown:
            out.append({"gate": gate, "chosen": None, "by": None, "at": None})
    return out


def closing_records(broker: Broker, record: PlanRecord) -> list[dict[str, Any]]:
    """The closing records of the run bound to ``record`` (its request was closed by them),
    newest first."""
    b = record.binding
    return [
        dict(e.detail)
        for e in broker.workflow.audit_log(
            b.role, record.topic, kind=request_kind(record.operation), limit=1000
        )
        if e.detail.get("runId") == b.run_id and e.detail.get("planDigest") == record.digest
    ]


def attempt_events(broker: Broker, role: str, record: PlanRecord) -> list[AuditRecord]:
    """The apply attempts on ``record`` (``skip`` and ``skip-refused``, ...), newest first."""
    from cursorops.airflow.steps import refused_kind

    kinds = (record.operation, refused_kind(record.operation))
    return [
        e
        for e in broker.workflow.audit_log(role, record.topic, limit=1000)
        if e.kind in kinds
        and e.detail.get("runId") == record.binding.run_id
        and e.detail.get("planDigest") == record.digest
    ]


def decide(
    record: PlanRecord, answers: Sequence[Mapping[str, Any]], latest: AuditRecord | None
) -> tuple[str, str]:
    """``(outcome, one plain sentence)`` from what the latest apply attempt did."""
    if latest is not None and latest.kind != record.operation:
        where = "Apply" if latest.detail.get("stage") != "gate" else latest.detail.get("gate")
        first = f"{where} refused: {latest.detail.get('reason')}"
        if record.applied_at_ms is not None:
            first += " (the plan was applied once before; this attempt applied nothing)"
        return "refused", first
    if latest is not None:
        by = ", ".join(str(a) for a in latest.detail.get("approvedBy") or [])
        if record.operation != SKIP:
            return "applied", f"Approved by {by}: {record.operation} applied."
        skipped = latest.detail.get("skipped") or []
        return (
            "applied",
            f"Approved by {by}: {len(skipped)} id(s) acknowledged over "
            f"{len(record.skip_plan().partitions())} partition(s).",
        )
    rejected = [a for a in answers if a["chosen"] == ["Reject"]]
    if rejected:
        return (
            "rejected",
            f"Rejected by {rejected[0]['by']} at {rejected[0]['at']}: nothing applied.",
        )
    return (
        "not-approved",
        "No approval on record (nobody answered in time, the gate failed, or its state was "
        "forced): nothing applied.",
    )


def _per_partition(record: PlanRecord, latest: AuditRecord | None) -> dict[str, Any]:
    if latest is None or latest.kind != SKIP or record.operation != SKIP:
        return {}
    plan = record.skip_plan()
    where = {i.ledger_id: i.topic_partition for i in plan.items}
    out: dict[str, dict[str, Any]] = {
        p: {"skipped": 0, "alreadyAcknowledged": 0, "acknowledgedMeanwhile": []}
        for p in plan.partitions()
    }
    for field in ("skipped", "alreadyAcknowledged", "acknowledgedMeanwhile"):
        for triplet in latest.detail.get(field) or []:
            partition = where.get(int(str(triplet).split(":", 1)[0]))
            if partition is None:
                continue
            row = out[partition]
            if field == "acknowledgedMeanwhile":
                row[field].append(triplet)
            else:
                row[field] += 1
    return out


def close_request(
    broker: Broker, dag_run: Any, record: PlanRecord, gates: Sequence[str]
) -> dict[str, Any]:
    """Write the record of this attempt; return it with the outcome and the plain sentence."""
    from cursorops.airflow.environment import pulsar_role

    requester = dag_run.triggering_user_name or ""
    role = pulsar_role(requester)
    given = _answers(broker, record, gates)
    events = attempt_events(broker, role, record)
    latest = events[0] if events else None
    outcome, statement = decide(record, given, latest)
    after = None
    if outcome == "applied" and record.operation == SKIP:
        after = broker.analysis.project_backlog(role, record.skip_plan()).before
        statement = statement[:-1] + f"; backlog now {after}."
    doc = record.document
    backlog = doc.get("backlog") or {}
    detail = {
        "dagId": dag_run.dag_id,
        "runId": dag_run.run_id,
        "requester": requester,
        "reason": doc["reason"],
        "ticket": doc.get("ticket"),
        "planDigest": record.digest,
        "attemptEvent": None if latest is None else latest.id,
        "operation": record.operation,
        "planned": {p: v["ids"] for p, v in backlog.get("perPartition", {}).items()},
        "messages": record.messages,
        "backlog": {
            "before": backlog.get("before"),
            "plannedAfter": backlog.get("after"),
            "after": after,
        },
        "answer": given[0] if given else {"chosen": None, "by": None, "at": None},
        "answers": given,
        "approvedBy": list((latest.detail.get("approvedBy") or []) if latest else [])
        if outcome == "applied"
        else [],
        "perPartition": _per_partition(record, latest),
        "outcome": outcome,
        "statement": statement,
    }
    # Idempotent per attempt: a retried record task finds its own record.
    keys = ("runId", "planDigest", "attemptEvent", "outcome")
    kind = request_kind(record.operation)
    for entry in broker.workflow.audit_log(role, record.topic, kind=kind, limit=1000):
        if all(entry.detail.get(k) == detail[k] for k in keys):
            return dict(entry.detail)
    broker.workflow.record_audit(role, kind, record.topic, record.subscription, detail)
    return detail

"""``require_approvals``: the check every irreversible task makes first.

It trusts neither the gate task's state (anyone who may trigger runs may mark
it success by hand) nor its XCom (anyone may post one), nor anything it would
have to fetch from Airflow. It reads the answers the run's gates recorded in
cursorops's store, which no requester writes: each gate records, before it
waits, what it showed (:class:`~cursorops.core.domain.plans.plan_record.ApprovalRequest`), and,
as Airflow resumes it, the answer Airflow handed it
(:class:`~cursorops.core.domain.plans.plan_record.ApprovalAnswer`). Airflow resumes a waiting
gate only with an answer written through its API by an assigned user, or with
a timeout; a gate forced to success, failed or skipped by hand never resumes,
so it records no answer and never counts.

It refuses unless each approval the plan needs is an Approve, answered by a
distinct assigned user other than the requester whose Pulsar role may skip on
every topic of the plan now, to what a gate of this run showed for the run's
current plan record, and no older than that presentation's validity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.core.services.gating.staleness import iso

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import ApprovalAnswer, PlanRecord
    from cursorops.core.services.broker import Broker

CLOCK_SKEW_MS = 1000
"""An answer may carry a time up to this much before its presentation's (two clocks)."""


def by_gate(answers: Sequence[ApprovalAnswer]) -> dict[str, ApprovalAnswer]:
    """Each gate's answer (the answer to its newest presentation that has one)."""
    return {answer.request.gate: answer for answer in answers}


def check_approvals(
    gates: Sequence[str],
    answers: Sequence[ApprovalAnswer],
    record: PlanRecord,
    requester: str | None,
    may_skip: Callable[[str], bool],
    now_ms: int,
) -> list[dict[str, Any]]:
    """Raise NotAuthorizedError unless ``answers`` hold the approvals the plan record needs.

    ``gates`` are the run's gates in order, ``answers`` what they recorded. Each of the
    first ``record.required_approvals`` gates must hold an Approve, by a distinct user
    who is not the requester, was assigned, and may skip on the plan's topics now, given
    to what the gate showed for this very plan digest, and not older than that
    presentation's validity. Returns who approved, when.
    """
    from cursorops.core.services.gating.registry import topics_of

    if len(gates) < record.required_approvals:
        raise NotAuthorizedError(
            f"Plan {record.digest} needs {record.required_approvals} approvals; this workflow "
            f"has {len(gates)} gate(s)"
        )
    if not requester or requester != record.binding.requester:
        raise NotAuthorizedError(
            f"The run's requester ({requester}) is not the plan's ({record.binding.requester})"
        )
    found = by_gate(answers)
    approved: list[dict[str, Any]] = []
    for gate in gates[: record.required_approvals]:
        where = f"approval gate {gate}"
        answer = found.get(gate)
        if answer is None:
            raise NotAuthorizedError(f"No approval on record: nobody answered the {where}")
        request = answer.request
        if list(answer.chosen) != ["Approve"]:
            raise NotAuthorizedError(f"The {where} was answered {list(answer.chosen)}, not Approve")
        approver = answer.responded_by
        if not approver:
            raise NotAuthorizedError(f"The approval on record at {where} names no user")
        if approver == requester:
            raise NotAuthorizedError(
                f"Four eyes: the approval is by {approver}, the requester ({requester}) themselves"
            )
        if approver in {a["approver"] for a in approved}:
            raise NotAuthorizedError(f"{approver} approved twice: the approvals must be distinct")
        if request.digest != record.digest:
            raise NotAuthorizedError(
                f"The plan differs from the one approved (approved {request.digest}, "
                f"the run's plan is {record.digest})"
            )
        if approver not in request.approvers:
            raise NotAuthorizedError(f"{approver} was not assigned the {where}")
        at = answer.responded_at_ms
        if at < request.presented_at_ms - CLOCK_SKEW_MS:
            raise NotAuthorizedError(f"The approval at {where} has no valid answer time")
        if now_ms - at > request.valid_for_ms:
            raise NotAuthorizedError(
                f"The approval by {approver} at {iso(at)} expired: approvals stay valid for "
                f"{request.valid_for_ms // 60_000} min; ask again"
            )
        if not may_skip(approver):
            raise NotAuthorizedError(
                f"Approver {approver} may not skip on {' and '.join(topics_of(record))}"
            )
        approved.append({"approver": approver, "approvedAt": iso(at), "gate": gate})
    return approved


def require_approvals(
    context: Mapping[str, Any], record: PlanRecord, broker: Broker, gates: Sequence[str]
) -> list[dict[str, Any]]:
    """Read every gate's recorded answer from the store and check them; who approved, when."""
    from cursorops.airflow.environment import pulsar_role
    from cursorops.airflow.operators.gate import may_skip
    from cursorops.core.services.broker import wall_clock_ms
    from cursorops.core.services.gating.registry import topics_of

    dag_run = context["dag_run"]
    topics = topics_of(record)
    return check_approvals(
        gates,
        broker.workflow.approval_answers(dag_run.dag_id, dag_run.run_id),
        record,
        dag_run.triggering_user_name,
        lambda user: all(may_skip(broker, pulsar_role(user), t) for t in topics),
        wall_clock_ms(),
    )

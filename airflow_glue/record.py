"""The closing record of a skip request, in cursorops's audit log.

One ``skip-request`` record per run, whatever happened: who asked and as which
role, why (reason, ticket), who answered the approval and when, the decision,
and the outcome per partition. The apply task's ``Broker.apply_skip`` has
already written its own ``skip`` record with the ids it acknowledged, in the
transaction that acknowledged them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.config import Config


KIND = "skip-request"


def decide(
    plan: Mapping[str, Any],
    answer: Mapping[str, Any],
    applied: Sequence[Mapping[str, Any]],
    verified: Mapping[str, Any] | None,
) -> tuple[str, str]:
    """``(outcome, one plain sentence)`` from what the run did."""
    chosen = answer.get("chosen_options") if answer.get("response_received") else None
    by = (answer.get("responded_by_user") or {}).get("id")
    planned = set(plan["partitions"])
    done = {a["partition"] for a in applied}
    if chosen == ["Reject"]:
        return "rejected", f"Rejected by {by} at {answer.get('responded_at')}: nothing applied."
    if chosen is None and not done:
        return (
            "not-approved",
            "No approval on record (nobody answered in time, the gate failed, or its state "
            "was forced): nothing applied.",
        )
    if done == planned and verified:
        skipped = sum(len(a["skipped"]) for a in applied)
        return (
            "applied",
            f"Approved by {by} at {answer.get('responded_at')}: {skipped} id(s) acknowledged "
            f"over {len(done)} partition(s); backlog now {verified['backlogAfter']}.",
        )
    if not done:
        return "refused", "Apply refused or failed on every partition: nothing applied."
    return (
        "partly-applied",
        f"Applied on {sorted(done)} only; not on {sorted(planned - done)}. Re-run the failed "
        "apply tasks (they are idempotent).",
    )


def record_request(
    config: Config,
    dag_run: Any,
    plan: Mapping[str, Any],
    answer: Mapping[str, Any],
    applied: Sequence[Mapping[str, Any]],
    verified: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Write the record; return it with the outcome and the plain sentence."""
    from airflow_glue.environment import pulsar_role
    from core.broker import Broker

    outcome, statement = decide(plan, answer, applied, verified)
    # Who asked comes from the run itself; the plan document travels as XCom.
    requester = dag_run.triggering_user_name or ""
    detail = {
        "dagId": dag_run.dag_id,
        "runId": dag_run.run_id,
        "requester": requester,
        "reason": plan["reason"],
        "ticket": plan.get("ticket"),
        "planId": plan["planId"],
        "planned": {p: v["ids"] for p, v in plan["backlog"]["perPartition"].items()},
        "backlog": {
            "before": plan["backlog"]["before"],
            "plannedAfter": plan["backlog"]["after"],
            "after": (verified or {}).get("backlogAfter"),
        },
        "answer": {
            "chosen": answer.get("chosen_options"),
            "by": (answer.get("responded_by_user") or {}).get("id"),
            "at": answer.get("responded_at"),
        },
        "perPartition": {
            a["partition"]: {
                "skipped": len(a["skipped"]),
                "alreadyAcknowledged": len(a["alreadyAcknowledged"]),
                "acknowledgedMeanwhile": a["acknowledgedMeanwhile"],
            }
            for a in applied
        },
        "outcome": outcome,
        "statement": statement,
    }
    role = pulsar_role(requester)
    with Broker(config) as broker:
        # Idempotent: a retried record task finds its own record and writes no second one.
        for entry in broker.audit_log(role, plan["topic"], kind=KIND, limit=1000):
            if entry.detail.get("runId") == dag_run.run_id:
                return dict(entry.detail)
        broker.record_audit(role, KIND, plan["topic"], plan["subscription"], detail)
    return detail

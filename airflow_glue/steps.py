"""The steps every skip DAG shares after the gates: apply the approved plan, verify, record.

Each takes the task's Airflow context, reads the requester from the run itself
(``dag_run.triggering_user_name``) and the plan from cursorops's store by the
run (its current plan record), never from an XCom anyone may post. An apply
that refuses writes a ``skip-refused`` audit record naming the run and the
plan, so the closing record tells what this attempt did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REFUSED = "skip-refused"
"""Audit kind of an apply attempt that applied nothing, and why."""


def apply_approved_plan(
    context: Mapping[str, Any], planned: Mapping[str, Any] | None, gates: Sequence[str]
) -> dict[str, Any]:
    """Re-check every approval in Airflow itself, then acknowledge the run's plan record in
    one transaction (every partition, its audit record and the record's claim, or nothing).

    ``planned`` is the planning task's result (its XCom, which anyone with edit rights
    may overwrite): only its digest is read, and it must name the run's plan record."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.approval import require_approvals
    from airflow_glue.environment import config, pulsar_role
    from airflow_glue.outcomes import airflow_outcome
    from core.broker import Broker
    from core.errors import InvalidInputError, NotAuthorizedError, PlanAlreadyAppliedError

    ti, dag_run = context["ti"], context["dag_run"]
    role = pulsar_role(dag_run.triggering_user_name or "")
    with Broker(config()) as broker:
        with airflow_outcome():
            record = broker.current_plan_record(role, dag_run.dag_id, dag_run.run_id)
        if record is None:
            raise AirflowFailException("No plan record is bound to this run: nothing applied")
        try:
            told = (planned or {}).get("planDigest")
            if told != record.digest:
                raise NotAuthorizedError(
                    f"The planning task's result names plan {told}, not the run's plan record "
                    f"{record.digest}: nothing applied"
                )
            if record.applied_at_ms is not None:
                raise PlanAlreadyAppliedError(
                    f"Plan {record.digest} was applied already (a plan is applied at most "
                    "once): nothing applied by this attempt"
                )
            approvals = require_approvals(context, record, broker, gates)
            with airflow_outcome():
                outcome = broker.apply_approved_skip(record, approvals, via="airflow")
        except (NotAuthorizedError, InvalidInputError, PlanAlreadyAppliedError) as exc:
            broker.record_audit(
                role,
                REFUSED,
                record.topic,
                record.subscription,
                {
                    "runId": dag_run.run_id,
                    "planDigest": record.digest,
                    "try": getattr(ti, "try_number", None),
                    "reason": str(exc),
                },
            )
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
    return {
        "planDigest": record.digest,
        "approvals": approvals,
        "skipped": len(outcome.skipped),
        "acknowledgedMeanwhile": len(outcome.acknowledged_meanwhile),
    }


def verify_applied(context: Mapping[str, Any]) -> dict[str, Any]:
    """Every message of the run's plan record is acknowledged now; the exact backlog after."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.environment import config, pulsar_role
    from airflow_glue.outcomes import airflow_outcome
    from core.broker import Broker

    dag_run = context["dag_run"]
    role = pulsar_role(dag_run.triggering_user_name or "")
    with airflow_outcome(), Broker(config()) as broker:
        record = broker.current_plan_record(role, dag_run.dag_id, dag_run.run_id)
        if record is None or record.applied_at_ms is None:
            raise AirflowFailException("The run's plan record is not applied: nothing to verify")
        planned = record.plan()
        now = broker.plan_skip(
            role,
            planned.topic,
            planned.subscription,
            planned.message_ids(),
            _any_type="head" in record.document,
        )
        after = broker.project_backlog(role, now).before
    missing = [i.message_id.triplet() for i in now.items if not i.already_acknowledged]
    if missing:
        raise AirflowFailException(f"Not acknowledged after apply: {', '.join(missing[:10])}")
    planned_after = record.document["backlog"]["after"]
    return {
        "backlogAfter": after,
        "plannedAfter": planned_after,
        "differenceSincePlan": after - planned_after,
    }


def record_run(context: Mapping[str, Any], gates: Sequence[str]) -> dict[str, Any]:
    """Who asked, who answered each gate, when, why, and what this attempt applied, to the
    audit log, from the store and Airflow's own records only.

    Fails the task (after recording) unless the run's plan record was applied by this run.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.approval import fetch_approval_record
    from airflow_glue.environment import config, pulsar_role
    from airflow_glue.record import record_request
    from core.broker import Broker

    dag_run = context["dag_run"]
    role = pulsar_role(dag_run.triggering_user_name or "")
    with Broker(config()) as broker:
        record = broker.current_plan_record(role, dag_run.dag_id, dag_run.run_id)
    if record is None:
        raise AirflowFailException(
            "Refused before planning (see the tasks before the approval gate): nothing applied"
        )
    answers = {g: fetch_approval_record(dag_run.dag_id, dag_run.run_id, g) for g in gates}
    summary = record_request(config(), dag_run, record, answers)
    if summary["outcome"] != "applied":
        raise AirflowFailException(summary["statement"])
    return summary

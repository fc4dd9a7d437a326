"""The steps every gated DAG shares after the gates: apply the approved plan, verify, record.

Each takes the task's Airflow context, reads the requester from the run itself
(``dag_run.triggering_user_name``) and the plan from cursorops's store by the
run (its current plan record), never from an XCom anyone may post. An apply
that refuses writes a ``<operation>-refused`` audit record (``skip-refused``, ...)
naming the run and the plan, so the closing record tells what this attempt did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.skipping.plan_record import SKIP

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skipping.plan_record import PlanRecord


def refused_kind(operation: str) -> str:
    """Audit kind of an apply attempt of ``operation`` that applied nothing."""
    return f"{operation}-refused"


def apply_approved_plan(
    context: Mapping[str, Any], planned: Mapping[str, Any] | None, gates: Sequence[str]
) -> dict[str, Any]:
    """Check every approval the run's gates recorded, then apply the run's plan record in one
    transaction (the change, its audit record and the record's claim, or nothing).

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
                applied = broker.apply_approved_plan(record, approvals, via="airflow")
        except (NotAuthorizedError, InvalidInputError, PlanAlreadyAppliedError) as exc:
            broker.record_audit(
                role,
                refused_kind(record.operation),
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
        "operation": record.operation,
        "approvals": approvals,
        "changed": applied.changed,
        "unchanged": applied.unchanged,
    }


def verify_applied(context: Mapping[str, Any]) -> dict[str, Any]:
    """The run's plan record was applied, with its audit record (written in the apply's
    transaction, which acknowledged or reported every planned message); for a skip, the
    exact backlog after, beside the one planned."""
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
        checked = _verify_by_record(broker, role, record)
        if record.operation != SKIP:
            return checked
        after = broker.project_backlog(role, record.skip_plan()).before
    planned_after = record.document["backlog"]["after"]
    return {
        **checked,
        "backlogAfter": after,
        "plannedAfter": planned_after,
        "differenceSincePlan": after - planned_after,
    }


def _verify_by_record(broker: Broker, role: str, record: PlanRecord) -> dict[str, Any]:
    from airflow.sdk.exceptions import AirflowFailException

    applied = dict(record.applied or {})
    audit_id = applied.get("auditId")
    found = [
        e
        for e in broker.audit_log(role, record.topic, kind=record.operation, limit=1000)
        if e.id == audit_id
    ]
    if not found:
        raise AirflowFailException(
            f"Plan {record.digest} is marked applied but its {record.operation} record "
            f"{audit_id} is missing"
        )
    return {"operation": record.operation, "auditId": audit_id, "applied": applied}


def record_run(context: Mapping[str, Any], gates: Sequence[str]) -> dict[str, Any]:
    """Who asked, who answered each gate, when, why, and what this attempt applied, to the
    audit log, from cursorops's store only.

    Fails the task (after recording) unless the run's plan record was applied by this run.
    """
    from airflow.sdk.exceptions import AirflowFailException

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
        summary = record_request(broker, dag_run, record, gates)
    if summary["outcome"] != "applied":
        raise AirflowFailException(summary["statement"])
    return summary

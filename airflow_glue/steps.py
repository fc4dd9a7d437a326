"""The steps every skip DAG shares after the gate: apply the approved plan, verify, record.

Each takes the task's Airflow context and reads the requester from the run
itself (``dag_run.triggering_user_name``), never from an XCom anyone may post.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def verify_applied(
    context: Mapping[str, Any], plan: Mapping[str, Any], applied: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Every planned id is acknowledged now; the exact backlog after, against the plan's."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.environment import config, pulsar_role
    from airflow_glue.outcomes import airflow_outcome
    from airflow_glue.plan import skip_plan
    from core.broker import Broker

    role = pulsar_role(context["dag_run"].triggering_user_name or "")
    planned = skip_plan(plan)
    with airflow_outcome(), Broker(config()) as broker:
        now = broker.plan_skip(role, planned.topic, planned.subscription, planned.message_ids())
        after = broker.project_backlog(role, now).before
    missing = [i.message_id.triplet() for i in now.items if not i.already_acknowledged]
    if missing:
        raise AirflowFailException(f"Not acknowledged after apply: {', '.join(missing[:10])}")
    return {
        "backlogAfter": after,
        "plannedAfter": plan["backlog"]["after"],
        "differenceSincePlan": after - plan["backlog"]["after"],
        "partitions": len(applied),
    }


def record_run(
    context: Mapping[str, Any], plan_task_id: str, gate_task_id: str, apply_task_id: str
) -> dict[str, Any]:
    """Who asked, who answered, when, why, and the outcome per partition, to the audit log.

    Fails the task (after recording) unless the plan was applied.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.approval import fetch_approval_record
    from airflow_glue.environment import config
    from airflow_glue.record import record_request

    ti, dag_run = context["ti"], context["dag_run"]
    plan = ti.xcom_pull(task_ids=plan_task_id)
    if not plan:
        raise AirflowFailException(
            f"Refused before planning (see the tasks up to {plan_task_id}): nothing applied"
        )
    answer = fetch_approval_record(dag_run.dag_id, dag_run.run_id, gate_task_id)
    pulled = ti.xcom_pull(task_ids=apply_task_id) or []
    # Mapped apply tasks give one dict each; an unmapped one gives the list of partitions.
    flat = [a for one in pulled for a in (one if isinstance(one, list) else [one])]
    applied = [a for a in flat if a]
    verified = ti.xcom_pull(task_ids="verify")
    summary = record_request(config(), dag_run, plan, answer, applied, verified)
    if summary["outcome"] != "applied":
        raise AirflowFailException(summary["statement"])
    return summary


def apply_approved_plan(
    context: Mapping[str, Any], plan_task_id: str, gate_task_id: str
) -> list[dict[str, Any]]:
    """Re-check the approval in Airflow itself, then acknowledge the whole plan in one
    transaction (every partition and its audit record, or nothing); one record per partition."""
    from airflow_glue.approval import require_approval
    from airflow_glue.environment import config, pulsar_role
    from airflow_glue.outcomes import airflow_outcome
    from airflow_glue.plan import skip_plan
    from core.broker import Broker

    plan = context["ti"].xcom_pull(task_ids=plan_task_id)
    # The role is the requester's, from the run itself, never from the (postable) XCom.
    role = pulsar_role(context["dag_run"].triggering_user_name or "")
    with airflow_outcome(), Broker(config()) as broker:
        approval = require_approval(context, plan, broker, gate_task_id)
        outcome = broker.apply_skip(role, skip_plan(plan), via="airflow")
    return partition_outcomes(outcome, approval)


def partition_outcomes(outcome: Any, approval: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A :class:`core.skip.SkipOutcome` as one record per partition (what record_run reads)."""

    def empty(name: str) -> dict[str, Any]:
        return {
            "partition": name,
            **approval,
            "skipped": [],
            "alreadyAcknowledged": [],
            "acknowledgedMeanwhile": [],
        }

    rows = {name: empty(name) for name in outcome.per_partition}
    base = outcome.topic
    for field, ids in (
        ("skipped", outcome.skipped),
        ("alreadyAcknowledged", outcome.already_acknowledged),
        ("acknowledgedMeanwhile", outcome.acknowledged_meanwhile),
    ):
        for mid in ids:
            name = base if mid.partition < 0 else f"{base}-partition-{mid.partition}"
            rows.setdefault(name, empty(name))[field].append(mid.triplet())
    return list(rows.values())

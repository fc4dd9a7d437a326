"""The tail every skip DAG shares: approve_skip → apply_skip → verify → record.

:func:`approve_and_apply` builds the four-eyes gate and the three tasks after
it (their bodies are :mod:`airflow_glue.steps`) and wires them behind the plan
task, so each skip DAG only says how it gets to a plan. The task ids are fixed:
tests, benchmarks and the UI's links name them.

Called at parse time inside a ``@dag`` function: it builds tasks and edges
only; every heavy import stays inside the task bodies.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import XComArg, get_current_context, task

from airflow_glue.gate import FourEyesApprovalOperator

GATE = "approve_skip"
APPLY = "apply_skip"


def approve_and_apply(plan: XComArg, *, subject: str) -> None:
    """``plan >> approve_skip >> apply_skip``, then ``verify(plan, applied) >> record``.

    ``plan`` is the output of the DAG's plan task (its task id is read from it);
    ``subject`` heads the approval request."""
    ((plan_operator, _),) = plan.iter_references()
    plan_task_id = plan_operator.task_id

    @task(task_id=APPLY, retries=2)
    def apply_skip() -> list[dict[str, Any]]:
        """Re-check the approval in Airflow, then acknowledge the whole plan in one transaction."""
        from airflow_glue.steps import apply_approved_plan

        return apply_approved_plan(get_current_context(), plan_task_id, GATE)

    @task
    def verify(plan: dict[str, Any], applied: list[dict[str, Any]]) -> dict[str, Any]:
        """Every planned id is acknowledged now; the exact backlog after, against the plan's."""
        from airflow_glue.steps import verify_applied

        return verify_applied(get_current_context(), plan, applied)

    @task(trigger_rule="all_done", retries=2)
    def record() -> dict[str, Any]:
        """Who asked, who answered, when, why (with the predicate, if one chose the messages)
        and the outcome per partition: to the audit log."""
        from airflow_glue.steps import record_run

        return record_run(get_current_context(), plan_task_id, GATE, APPLY)

    gate = FourEyesApprovalOperator(
        task_id=GATE, plan_task_id=plan_task_id, subject=subject, body=""
    )
    applied = apply_skip()
    plan >> gate >> applied
    # Called with the upstream XComArgs, as TaskFlow wires tasks (pyproject: as for dags.*).
    verify(plan, applied) >> record()  # type: ignore[arg-type]

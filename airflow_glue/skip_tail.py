"""The tail every skip DAG shares: the approval gates → apply_skip → verify → record.

:func:`approve_and_apply` builds the gates (one per approval a plan may need,
up to :data:`core.skipping.plan_record.MAX_APPROVALS`; a gate a plan does not need skips
itself) and the three tasks after them (their bodies are
:mod:`airflow_glue.steps`) and wires them behind the plan task, so each skip
DAG only says how it gets to a plan record. The plan task's result reaches
apply as its argument (an XComArg), so the graph shows where the digest apply
checks comes from. The task ids are fixed: tests, benchmarks and the UI's links
name them.

Called at parse time inside a ``@dag`` function: it builds tasks and edges
only; every heavy import stays inside the task bodies.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import XComArg, get_current_context, task

from airflow_glue.gate import FourEyesApprovalOperator
from core.skipping.plan_record import MAX_APPROVALS

GATE = "approve_skip"
"""The first gate; the n-th is ``approve_skip_<n>``."""
APPLY = "apply_skip"
GATES = (GATE, *(f"{GATE}_{n}" for n in range(2, MAX_APPROVALS + 1)))
"""One gate per approval the namespace's quorum may ask for."""


def approve_and_apply(plan: XComArg) -> None:
    """``plan >> approve_skip >> approve_skip_2 >> ... >> apply_skip >> verify``, and
    ``record`` after all of them whatever happened.

    ``plan`` is the output of the DAG's plan task: apply takes it as its argument."""

    # none_failed: a gate the plan does not need skips itself and must not skip apply;
    # apply counts the approvals itself, so a gate skipped or forced by hand never counts.
    @task(task_id=APPLY, retries=2, trigger_rule="none_failed")
    def apply_skip(planned: dict[str, Any]) -> dict[str, Any]:
        """Re-check every approval in Airflow, then acknowledge the run's plan record in one
        transaction."""
        from airflow_glue.steps import apply_approved_plan

        return apply_approved_plan(get_current_context(), planned, GATES)

    @task
    def verify() -> dict[str, Any]:
        """Every planned message is acknowledged now; the exact backlog after."""
        from airflow_glue.steps import verify_applied

        return verify_applied(get_current_context())

    @task(trigger_rule="all_done", retries=2)
    def record() -> dict[str, Any]:
        """Who asked, who answered, when, why (with the predicate, if one chose the messages)
        and what was applied: to the audit log."""
        from airflow_glue.steps import record_run

        return record_run(get_current_context(), GATES)

    gates = [
        FourEyesApprovalOperator(
            task_id=gate,
            ordinal=n,
            earlier_gates=GATES[: n - 1],
            subject="Skip messages",
            body="",
            trigger_rule="none_failed" if n > 1 else "all_success",
        )
        for n, gate in enumerate(GATES, start=1)
    ]
    applied = apply_skip(plan)  # type: ignore[arg-type]  # an XComArg: Airflow passes its value
    checked = verify()
    closing = record()
    plan >> gates[0]
    for earlier, later in zip(gates, gates[1:], strict=False):
        earlier >> later
    gates[-1] >> applied >> checked >> closing

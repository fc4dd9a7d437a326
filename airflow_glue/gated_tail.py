"""The tail every gated operation's DAG shares: the approval gates → apply → verify → record.

A gated operation (skip, undo-skip, redrive) is validate → authorize → plan (a plan
record in cursorops's store) → preview → gate → apply → verify → audit. Each DAG
says only how it gets to its plan record; :func:`approve_and_apply` builds the rest
behind the plan task: the gates (one per approval a plan may need, up to
:data:`core.skipping.plan_record.MAX_APPROVALS`; a gate a plan does not need skips
itself) and the three tasks after them, whose bodies (:mod:`airflow_glue.steps`) read
the plan record by the run and apply it through the one door of approved records,
``Broker.apply_approved_plan``. The plan task's result reaches apply as its argument
(an XComArg), so the graph shows where the digest apply checks comes from.

Task ids are fixed per operation (:data:`TAILS`, derived from each operation's steps in
:mod:`core.gating.registry`): tests, benchmarks and the UI's links name them. Called at
parse time inside a ``@dag`` function: it builds tasks and edges only; every heavy import
stays inside the task bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow.sdk import XComArg, get_current_context, task

from airflow_glue.gate import FourEyesApprovalOperator
from core.gating.operation import SKIP
from core.gating.registry import BY_RECORD
from core.skipping.plan_record import MAX_APPROVALS


@dataclass(frozen=True)
class Tail:
    """The task ids of one operation's tail."""

    operation: str
    gate: str
    """The first gate; the n-th is ``<gate>_<n>``."""
    apply: str
    title: str

    @property
    def gates(self) -> tuple[str, ...]:
        """One gate per approval the namespace's quorum may ask for."""
        return (self.gate, *(f"{self.gate}_{n}" for n in range(2, MAX_APPROVALS + 1)))


TAILS = {
    recorded: Tail(recorded, f"approve_{entry.step}", f"apply_{entry.step}", entry.title)
    for recorded, entry in BY_RECORD.items()
}
"""The tail of each operation a plan record stores, by that operation."""


def approve_and_apply(plan: XComArg, operation: str = SKIP) -> None:
    """``plan >> <gate> >> <gate>_2 >> ... >> <apply> >> verify``, and ``record`` after all
    of them whatever happened.

    ``plan`` is the output of the DAG's plan task: apply takes it as its argument."""
    tail = TAILS[operation]
    gates_ids = tail.gates

    # none_failed: a gate the plan does not need skips itself and must not skip apply;
    # apply counts the approvals itself, so a gate skipped or forced by hand never counts.
    @task(task_id=tail.apply, retries=2, trigger_rule="none_failed")
    def apply(planned: dict[str, Any]) -> dict[str, Any]:
        """Check every approval the run's gates recorded, then apply the run's plan record
        in one transaction."""
        from airflow_glue.steps import apply_approved_plan

        return apply_approved_plan(get_current_context(), planned, gates_ids)

    @task
    def verify() -> dict[str, Any]:
        """What the plan record promised holds now."""
        from airflow_glue.steps import verify_applied

        return verify_applied(get_current_context())

    @task(trigger_rule="all_done", retries=2)
    def record() -> dict[str, Any]:
        """Who asked, who answered, when, why and what was applied: to the audit log."""
        from airflow_glue.steps import record_run

        return record_run(get_current_context(), gates_ids)

    gates = [
        FourEyesApprovalOperator(
            task_id=gate,
            ordinal=n,
            earlier_gates=gates_ids[: n - 1],
            subject=tail.title,
            body="",
            trigger_rule="none_failed" if n > 1 else "all_success",
        )
        for n, gate in enumerate(gates_ids, start=1)
    ]
    applied = apply(plan)  # type: ignore[arg-type]  # an XComArg: Airflow passes its value
    checked = verify()
    closing = record()
    plan >> gates[0]
    for earlier, later in zip(gates, gates[1:], strict=False):
        earlier >> later
    gates[-1] >> applied >> checked >> closing

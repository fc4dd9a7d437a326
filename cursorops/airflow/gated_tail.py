"""The tail every gated operation's DAG shares: the approval gates → apply → record.

A request of a gated operation is made at its door (REST, CLI, the Cursors page:
``Broker.request``): planned once, stored as a plan record bound to a run, and that run
started with the record's digest as its one param (:func:`request_params`). Such a DAG
is only this tail: the gates (one per approval a plan may need, up to
:data:`cursorops.core.domain.plans.plan_record.MAX_APPROVALS`; a gate a plan does not need skips
itself), ``apply`` and ``close_request`` (the run's teardown, so a run marked success or
failed by hand still closes its request). Every gate loads the record by the digest (the
first refuses it unless it is bound to this very run and its requester); apply validates it
once, under the cursors' locks, in the transaction that writes it with its audit
record and the record's claim (so no separate verify step: what it would check, that
transaction checked). A DAG that plans in a step of its own (a Spark scan first: skip
matching) puts its plan task in front (``plan``).

Task ids are fixed per operation (:data:`TAILS`, derived from each operation's steps in
:mod:`cursorops.core.services.gating.registry`): tests, benchmarks and the UI's links name them.
Called at parse time inside a ``@dag`` function: it builds tasks and edges only; every heavy import
stays inside the task bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow.sdk import XComArg, get_current_context, task

from cursorops.airflow.operators.gate import FourEyesApprovalOperator, gate_params
from cursorops.core.domain.plans.plan_record import MAX_APPROVALS
from cursorops.core.services.gating.operation import RUN_DIGEST, SKIP
from cursorops.core.services.gating.registry import BY_RECORD


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


def request_params() -> dict[str, Any]:
    """The params of a DAG whose runs its doors start: the plan record's digest (the door
    fills it in; a run started by hand with another run's digest gets nothing), and the
    gates' timeout and validity."""
    from airflow.sdk import Param

    return {
        RUN_DIGEST: Param(
            "",
            type="string",
            description="The plan record's digest. Requests are made at cursorops's doors "
            "(REST, CLI, the Cursors page), which start the run with it; a digest bound to "
            "another run, or asked for by someone else, is refused",
        ),
        **gate_params(),
    }


def approve_and_apply(operation: str = SKIP, plan: XComArg | None = None) -> None:
    """``[plan >>] <gate> >> <gate>_2 >> ... >> <apply>``, and ``close_request`` after all of
    them whatever happened."""
    tail = TAILS[operation]
    gates_ids = tail.gates

    # none_failed: a gate the plan does not need skips itself and must not skip apply;
    # apply counts the approvals itself, so a gate skipped or forced by hand never counts.
    @task(task_id=tail.apply, retries=2, trigger_rule="none_failed")
    def apply() -> dict[str, Any]:
        """Check every approval the run's gates recorded, then apply the run's plan record
        in one transaction (validated once, under the locks)."""
        from cursorops.airflow.steps import apply_approved_plan

        return apply_approved_plan(get_current_context(), gates_ids)

    # A teardown: Airflow runs it after everything else whatever happened, even when the
    # run is marked success or failed by hand (it skips pending tasks, but not teardowns),
    # and it fails the run when it fails (nothing was applied).
    @task(retries=2)
    def close_request() -> dict[str, Any]:
        """Who asked, who answered, when, why and what was applied: the request's closing
        record, to the audit log."""
        from cursorops.airflow.steps import close_run

        return close_run(get_current_context(), gates_ids)

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
    applied = apply()
    closing = close_request().as_teardown(on_failure_fail_dagrun=True)
    if plan is not None:
        plan >> gates[0]
    for earlier, later in zip(gates, gates[1:], strict=False):
        earlier >> later
    gates[-1] >> applied >> closing

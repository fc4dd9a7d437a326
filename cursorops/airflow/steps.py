"""The steps every gated DAG shares: find the run's plan record, apply it once approved, record.

Each takes the task's Airflow context, reads the requester from the run itself
(``dag_run.triggering_user_name``) and the plan from cursorops's store by the run's
``plan_digest`` (:func:`run_plan_record`: bound to this very run and requester), never
from an XCom anyone may post. An apply
that refuses writes a ``<operation>-refused`` audit record (``skip-refused``, ...)
naming the run and the plan, so the closing record tells what this attempt did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.domain.plans.request_record import RequestRecord
    from cursorops.core.services.broker import Broker


def refused_kind(operation: str) -> str:
    """Audit kind of an apply attempt of ``operation`` that applied nothing."""
    return f"{operation}-refused"


@contextmanager
def refusal_audited(
    context: Mapping[str, Any], operation: str, topic: object, subscription: object, stage: str
) -> Iterator[None]:
    """A request refused before it has a plan record (bad input, not found, not authorized,
    over a limit: the task fails without retry) is audited as ``<operation>-refused`` on its
    topic, as the requester's role, naming the run, the stage and the refusal; then the
    refusal goes on. It holds no content (not the predicate). A topic the requester may not
    read, or that is not there, keeps no record of it: the task's log still says why."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        yield
    except AirflowFailException as exc:
        from cursorops.airflow.hooks.cursorops import CursorOpsHook
        from cursorops.core.domain.errors import CursorOpsError

        dag_run = context["dag_run"]
        detail = {
            "dagId": dag_run.dag_id,
            "runId": dag_run.run_id,
            "requester": dag_run.triggering_user_name,
            "planDigest": None,
            "stage": stage,
            "reason": str(exc),
        }
        hook = CursorOpsHook()
        try:
            with hook.new_broker() as broker:
                broker.workflow.record_audit(
                    hook.requester_role(context),
                    refused_kind(operation),
                    str(topic),
                    None if subscription is None else str(subscription),
                    detail,
                )
        except CursorOpsError:
            pass
        raise


def run_plan_record(
    broker: Broker, context: Mapping[str, Any], *, first: bool = False
) -> PlanRecord:
    """The run's plan record, as its requester's role: the one the run's ``plan_digest``
    names, refused unless it is bound to this very run and its requester (a door stored it
    and started the run; a run started by hand with another run's digest gets nothing);
    in a DAG that plans in a step of its own (no digest), the record that step stored.
    ``first`` (the first gate): refused too when the request was closed as not started."""
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.hooks.cursorops import CursorOpsHook
    from cursorops.airflow.outcomes import airflow_outcome
    from cursorops.core.services.gating.operation import RUN_DIGEST

    dag_run = context["dag_run"]
    requester = dag_run.triggering_user_name
    role = CursorOpsHook().requester_role(context)
    digest = (context.get("params") or {}).get(RUN_DIGEST)
    with airflow_outcome():
        if digest:
            return broker.workflow.bound_plan_record(
                role, str(digest), dag_run.dag_id, dag_run.run_id, requester, started=first
            )
        record = broker.workflow.current_plan_record(role, dag_run.dag_id, dag_run.run_id)
    if record is None:
        raise AirflowFailException(
            "No plan record is bound to this run: requests are made at cursorops's doors, "
            "which start their run; nothing applied"
        )
    return record


def run_request_record(broker: Broker, context: Mapping[str, Any]) -> RequestRecord:
    """The request the run's first task recorded, found by the run's own identity
    (``dag_id``, ``run_id``), never by a digest from an XCom; refused (the task fails) when
    the run recorded none or its requester is not the run's triggering user."""
    from cursorops.airflow.outcomes import airflow_outcome

    dag_run = context["dag_run"]
    with airflow_outcome():
        return broker.workflow.run_request_record(
            dag_run.dag_id, dag_run.run_id, dag_run.triggering_user_name
        )


def apply_approved_plan(context: Mapping[str, Any], gates: Sequence[str]) -> dict[str, Any]:
    """Check every approval of the run's gates, then apply the run's plan record in one
    transaction (the change, its audit record and the record's claim, or nothing)."""
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.approval import require_approvals
    from cursorops.airflow.hooks.cursorops import CursorOpsHook
    from cursorops.airflow.outcomes import airflow_outcome
    from cursorops.core.domain.errors import (
        InvalidInputError,
        NotAuthorizedError,
        PlanAlreadyAppliedError,
    )

    ti, dag_run = context["ti"], context["dag_run"]
    hook = CursorOpsHook()
    role = hook.requester_role(context)
    with hook.new_broker() as broker:
        record = run_plan_record(broker, context)
        try:
            if record.applied_at_ms is not None:
                raise PlanAlreadyAppliedError(
                    f"Plan {record.digest} was applied already (a plan is applied at most "
                    "once): nothing applied by this attempt"
                )
            approvals = require_approvals(context, record, broker, gates)
            with airflow_outcome():
                applied = broker.apply_approved_plan(record, approvals, via="airflow")
        except (NotAuthorizedError, InvalidInputError, PlanAlreadyAppliedError) as exc:
            broker.workflow.record_audit(
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


def close_run(context: Mapping[str, Any], gates: Sequence[str]) -> dict[str, Any]:
    """Who asked, who answered each gate, when, why, and what this attempt applied, to the
    audit log, from cursorops's store only.

    Fails the task (after recording) unless the run's plan record was applied by this run.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.closing_record import close_request
    from cursorops.airflow.hooks.cursorops import CursorOpsHook

    dag_run = context["dag_run"]
    with CursorOpsHook().new_broker() as broker:
        # A run refused here (another run's digest, or planned nothing) records nothing: the
        # request it names is not its own.
        record = run_plan_record(broker, context)
        summary = close_request(broker, dag_run, record, gates)
    if summary["outcome"] != "applied":
        raise AirflowFailException(summary["statement"])
    return summary

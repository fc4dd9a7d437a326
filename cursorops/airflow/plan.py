"""A gated run's plan: stored as a plan record by core, previewed from that record only.

A planning task asks core to plan the run's operation (:func:`plan_in_run`:
``Broker.plan_request``, which plans once, builds the preview document and stores
both as a :class:`~cursorops.core.domain.plans.plan_record.PlanRecord` bound to the run, the
requester and the target). Only a small summary with the record's digest travels
as the task's XCom, and nothing downstream trusts it: the gate renders the
approver's text from the record (:mod:`cursorops.core.services.gating.approval_text`: the record's
:class:`~cursorops.core.domain.plans.preview.Preview`, one layout for every operation), and
apply loads the record by the run.

Every piece of text the approver reads that someone else wrote (reason,
ticket, predicate, names, keys, properties, payloads) goes through
:func:`cursorops.core.services.gating.inert.inert`. Message content (keys, properties, payload
excerpts, a predicate's content conditions: :mod:`cursorops.core.domain.content`) is kept in the
record but shown only to a reader whose role may peek on the plan's topics (the
Cursors page); everyone else reads its size or count. Airflow's approval page,
which every reader of the DAG may open, always shows it masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cursorops.core.services.gating.operation import SKIP

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating.operation import GatedArguments


def plan_in_run(
    broker: Broker, context: Mapping[str, Any], operation: str, arguments: GatedArguments
) -> dict[str, Any]:
    """Plan ``operation`` as the run's requester and store it as the run's plan record; the
    summary the planning task returns."""
    from cursorops.airflow.environment import pulsar_role
    from cursorops.core.services.gating.operation import Caller, Run

    dag_run = context["dag_run"]
    requester = dag_run.triggering_user_name or ""
    caller = Caller(pulsar_role(requester), requester, via="airflow")
    run = Run(dag_run.dag_id, dag_run.run_id)
    return summary(broker.plan_request(operation, caller, arguments, run))


def summary(record: PlanRecord) -> dict[str, Any]:
    """The record's digest and counts: what the planning task returns (XCom, untrusted)."""
    out = {
        "planDigest": record.digest,
        "operation": record.operation,
        "topic": record.topic,
        "subscription": record.subscription,
        "messages": record.messages,
        "requiredApprovals": record.required_approvals,
    }
    if record.operation == SKIP:
        out |= {"ids": len(record.skip_plan()), "backlog": record.document["backlog"]}
    return out

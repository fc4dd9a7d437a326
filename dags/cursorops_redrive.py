"""Redrive a subscription's dead-letter topic to that subscription alone, approved by a second
person: ``topics redrive`` where the namespace requires approval.

Trigger it with the topic, the subscription whose consumers dead-lettered the
messages (their ``<topic>-<subscription>-DLQ``, or ``dead_letter_topic``), an
optional predicate and a reason. Apply publishes the planned messages back to
the topic with their keys and properties (plus provenance properties), and in the
same transaction acknowledges them on every other subscription of the topic and
on the dead-letter topic's subscriptions: only the failing subscription sees them
again.

validate_request → plan_redrive (a plan record) → approve_redrive (four eyes; more
gates when the quorum asks) → apply_redrive → verify → record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply
from airflow_glue.request import RedriveWorkflowRequest, conf_params
from core.skipping.plan_record import REDRIVE


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "redrive", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={**conf_params(RedriveWorkflowRequest), **gate_params()},
)
def cursorops_redrive() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import validate_conf

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = validate_conf(RedriveWorkflowRequest, conf)
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def plan_redrive(request: dict[str, Any]) -> dict[str, Any]:
        """The dead-letter messages to publish back, as the run's plan record (the
        requester's role must produce to the topic and consume the dead-letter topic)."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from core.broker import Broker
        from core.gating import RedriveDeadLetters

        ask = RedriveWorkflowRequest.model_validate(
            {k: v for k, v in request.items() if k != "requester"}
        )
        with airflow_outcome(), Broker(config()) as broker:
            arguments = RedriveDeadLetters(
                topic=ask.topic,
                subscription=ask.subscription,
                dead_letter_topic=ask.dead_letter_topic,
                predicate=ask.predicate,
                reason=ask.reason,
                ticket=ask.ticket,
            )
            return plan_in_run(broker, get_current_context(), "redrive", arguments)

    approve_and_apply(plan_redrive(validate_request()), REDRIVE)


cursorops_redrive()

"""Unsubscribe, approved by a second person.

Where the namespace requires approval, ``topics unsubscribe`` is refused: it drops the
backlog with the subscription, and a subscription gone for a while misses what is
published meanwhile. Trigger
this with the topic, the subscription, ``force`` (delete it even while consumers
are connected) and a reason. The preview shows what is dropped, per partition.

validate_request → plan_unsubscribe (a plan record) → approve_unsubscribe (four eyes;
more gates when the quorum asks) → apply_unsubscribe (the subscription and its audit
record, one transaction) → verify → record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply
from airflow_glue.request import UnsubscribeRequest, conf_params
from core.skipping.plan_record import UNSUBSCRIBE


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "unsubscribe", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={**conf_params(UnsubscribeRequest), **gate_params()},
)
def cursorops_unsubscribe() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import validate_conf

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = validate_conf(UnsubscribeRequest, conf)
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def plan_unsubscribe(request: dict[str, Any]) -> dict[str, Any]:
        """The backlog the subscription would drop, per partition, as the run's plan record."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from core.broker import Broker
        from core.gating import Unsubscribe

        ask = UnsubscribeRequest.model_validate(
            {k: v for k, v in request.items() if k != "requester"}
        )
        with airflow_outcome(), Broker(config()) as broker:
            arguments = Unsubscribe(
                topic=ask.topic,
                subscription=ask.subscription,
                force=ask.force,
                reason=ask.reason,
                ticket=ask.ticket,
            )
            return plan_in_run(broker, get_current_context(), "unsubscribe", arguments)

    approve_and_apply(plan_unsubscribe(validate_request()), UNSUBSCRIBE)


cursorops_unsubscribe()

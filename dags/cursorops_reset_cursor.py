"""Reset a subscription's cursor, approved by a second person: ``reset-cursor`` where the
namespace requires approval.

Trigger it with a topic (or one partition), a subscription, a message id
(``ledgerId:entryId``) or a publish time, and a reason. A reset moves messages both
ways: back, it redelivers everything after the target; forward, it acknowledges
everything before it. The plan resolves a time to one target entry per partition
when it is made, and shows each partition's backlog before and after.

validate_request → plan_reset (a plan record) → approve_reset (four eyes; more gates
when the quorum asks) → apply_reset (every partition in one transaction, with its
audit record) → verify → record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply
from airflow_glue.request import ResetRequest, conf_params
from core.skipping.plan_record import RESET_CURSOR


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "reset", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={**conf_params(ResetRequest), **gate_params()},
)
def cursorops_reset_cursor() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import validate_conf
        from core.broker import wall_clock_ms

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = validate_conf(ResetRequest, conf)
            request.target(wall_clock_ms())
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def plan_reset(request: dict[str, Any]) -> dict[str, Any]:
        """Each partition's target and its backlog before and after, as the run's plan
        record (the requester's role must hold reset-cursor on the topic)."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from core.broker import Broker, wall_clock_ms
        from core.gating import ResetCursor

        ask = ResetRequest.model_validate({k: v for k, v in request.items() if k != "requester"})
        with airflow_outcome(), Broker(config()) as broker:
            position, timestamp = ask.target(wall_clock_ms())
            arguments = ResetCursor(
                topic=ask.topic,
                subscription=ask.subscription,
                position=position,
                timestamp_ms=timestamp,
                reason=ask.reason,
                ticket=ask.ticket,
            )
            return plan_in_run(broker, get_current_context(), "reset-cursor", arguments)

    approve_and_apply(plan_reset(validate_request()), RESET_CURSOR)


cursorops_reset_cursor()

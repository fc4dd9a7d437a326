"""Undo an applied skip, approved by a second person: ``topics undo-skip`` where the namespace
requires approval.

Trigger it with the topic, the subscription, the skip's id (``skip-messages`` prints
it; ``cursorops audit skips`` lists them, and the Cursors page links here) and a
reason. Apply unacknowledges exactly the messages that skip acknowledged and that
are still acknowledged, so they are delivered again; nothing else changes. A skip
is undone at most once, and only while its ledgers are retained.

validate_request → plan_undo_skip (a plan record) → approve_undo_skip (four eyes; more
gates when the quorum asks) → apply_undo_skip → verify → record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply
from airflow_glue.request import UndoSkipRequest, conf_params
from core.skipping.plan_record import UNDO_SKIP


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "undo", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={**conf_params(UndoSkipRequest), **gate_params()},
)
def cursorops_undo_skip() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import validate_conf

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = validate_conf(UndoSkipRequest, conf)
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def plan_undo_skip(request: dict[str, Any]) -> dict[str, Any]:
        """The skip's messages still acknowledged, from its audit record, as the run's plan
        record (the requester's role must hold the skip permission on the topic)."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from core.broker import Broker
        from core.gating import UndoSkip

        ask = UndoSkipRequest.model_validate({k: v for k, v in request.items() if k != "requester"})
        with airflow_outcome(), Broker(config()) as broker:
            arguments = UndoSkip(
                topic=ask.topic,
                subscription=ask.subscription,
                skip_id=ask.skip_id,
                reason=ask.reason,
                ticket=ask.ticket,
            )
            return plan_in_run(broker, get_current_context(), "undo-skip", arguments)

    approve_and_apply(plan_undo_skip(validate_request()), UNDO_SKIP)


cursorops_undo_skip()

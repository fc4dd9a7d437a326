"""Skip the head of a subscription's backlog: ``skip -n N`` or ``clear-backlog``, approved by a
second person.

Trigger it with a topic (or one partition), a subscription, ``messages`` (N; empty clears
the whole backlog) and a reason. N counts messages, not entries as Pulsar's ``skip -n``
does: a batch of 100 is 100 messages; each partition skips its own N, as pulsar-admin's
does on a partitioned topic. Any subscription type.

validate_request → authorize → plan_head (the exact messages, as a plan record) →
approve_skip (four eyes; more gates when the quorum asks) → apply_skip → verify → record.
The plan names the very messages the approver sees: apply acknowledges those, never the
messages that arrived after planning.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply
from airflow_glue.request import HeadSkipRequest, conf_params


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "skip", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={**conf_params(HeadSkipRequest), **gate_params()},
)
def cursorops_skip_head() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import validate_conf

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = validate_conf(HeadSkipRequest, conf)
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def authorize(request: dict[str, Any]) -> None:
        """The requester's Pulsar role must hold the skip permission on the topic."""
        from airflow_glue.environment import config, pulsar_role
        from airflow_glue.outcomes import airflow_outcome
        from core.authz import Operation
        from core.broker import Broker
        from core.ids.topic_name import TopicName

        role = pulsar_role(get_current_context()["dag_run"].triggering_user_name or "")
        with airflow_outcome(), Broker(config()) as broker:
            topic = TopicName.parse(request["topic"])
            broker.authorized_topic(role, Operation.SKIP, topic.base)

    @task
    def plan_head(request: dict[str, Any]) -> dict[str, Any]:
        """The first N unacknowledged messages of each partition (or all of them), exactly;
        the preview and the backlog before and after, stored as the run's plan record."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from core.broker import Broker
        from core.gating import ClearBacklog, GatedArguments, SkipHead

        ask = HeadSkipRequest.model_validate({k: v for k, v in request.items() if k != "requester"})
        target = {"topic": ask.topic, "subscription": ask.subscription}
        why = {"reason": ask.reason, "ticket": ask.ticket}
        with airflow_outcome(), Broker(config()) as broker:
            arguments: GatedArguments
            if ask.messages is None:
                operation, arguments = "clear-backlog", ClearBacklog(**target, **why)
            else:
                operation, arguments = "skip-head", SkipHead(**target, **why, messages=ask.messages)
            return plan_in_run(broker, get_current_context(), operation, arguments)

    request = validate_request()
    plan = plan_head(request)
    authorize(request) >> plan
    approve_and_apply(plan)


cursorops_skip_head()

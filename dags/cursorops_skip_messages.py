"""Skip chosen messages of a subscription: previewed exactly, approved by a second person.

Trigger it from the UI's trigger form, the REST API or ``airflow dags trigger``
with a topic, a subscription, the message ids (pulsar-admin triplets
``ledgerId:entryId[:batchIndex]`` or base64 ``MessageIdData``, or a PIP-423 JSON
body as ``payload``) and a reason. The Airflow user who triggers it is the
requester, acting as the Pulsar role ``CURSOROPS_ROLE_MAP`` maps them to (by
default the same name).

validate_request → authorize → plan_requested_ids (a plan record in cursorops's store) →
approve_skip (four eyes; approve_skip_2, _3 when the namespace's quorum asks for
more approvers) → apply_skip → verify → record. The plan is routed by partition (each id to its
own partition, the backlog before and after per partition); apply_skip commits
every partition's share and its audit record in one transaction, so a run
applies the approved plan whole or not at all. Nothing is acknowledged
unless a permitted user other than the requester approved this very plan; a
rejection or no answer within the timeout (default 24 hours) applies nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from airflow_glue.gate import GATE_PARAMS, gate_params
from airflow_glue.gated_tail import approve_and_apply


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "skip", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params={
        "topic": Param(
            "",
            type="string",
            description="Topic, e.g. persistent://acme/orders/events (not a partition)",
        ),
        "subscription": Param("", type="string", description="Subscription (Shared or Key_Shared)"),
        "message_ids": Param(
            [],
            type="array",
            items={"type": "string"},
            description="Message ids: triplets ledgerId:entryId[:batchIndex] "
            "or base64 MessageIdData",
        ),
        "payload": Param(
            None,
            type=["null", "object", "array"],
            description="Or a PIP-423 skipByMessageIds JSON body: a base64 array, "
            '{"type": "byteArray", "messageIds": [...]} or '
            '{"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 2}]}',
        ),
        "reason": Param("", type="string", description="Why (required; recorded)"),
        "ticket": Param(None, type=["null", "string"], description="Change ticket (optional)"),
        **gate_params(),
    },
)
def cursorops_skip_messages() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf through the pydantic model; bad input fails at once, no retry."""
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.request import parse_request

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        with airflow_outcome():
            request = parse_request(conf)
        return {**request.model_dump(), "requester": context["dag_run"].triggering_user_name}

    @task
    def authorize(request: dict[str, Any]) -> None:
        """The requester's Pulsar role must hold the skip permission on the topic."""
        from airflow_glue.environment import config, pulsar_role
        from airflow_glue.outcomes import airflow_outcome
        from core.authz import Operation
        from core.broker import Broker

        role = pulsar_role(get_current_context()["dag_run"].triggering_user_name or "")
        with airflow_outcome(), Broker(config()) as broker:
            broker.authorized_topic(role, Operation.SKIP, request["topic"])

    @task
    def plan_requested_ids(request: dict[str, Any]) -> dict[str, Any]:
        """Validate and locate every id; the preview and the exact backlog before and after,
        stored as the run's plan record (the XCom carries only its digest and counts)."""
        from airflow_glue.environment import config
        from airflow_glue.outcomes import airflow_outcome
        from airflow_glue.plan import plan_in_run
        from airflow_glue.request import SkipRequest
        from core.broker import Broker
        from core.gating import SkipMessages

        # Every task takes the requester from the run itself, never from an XCom anyone may post.
        ask = SkipRequest.model_validate({k: v for k, v in request.items() if k != "requester"})
        with airflow_outcome(), Broker(config()) as broker:
            arguments = SkipMessages(
                topic=ask.topic,
                subscription=ask.subscription,
                ids=tuple(ask.ids()),
                reason=ask.reason,
                ticket=ask.ticket,
            )
            return plan_in_run(broker, get_current_context(), "skip-messages", arguments)

    request = validate_request()
    plan = plan_requested_ids(request)
    authorize(request) >> plan
    approve_and_apply(plan)


cursorops_skip_messages()

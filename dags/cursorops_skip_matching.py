"""Skip the messages of a subscription that match a predicate, approved by a second person.

Trigger it with a topic, a subscription, a predicate (key, property, publish-time
window, still scheduled, delivery-time window, payload match, producer name, a
predicate document, or everything: a gated clear-backlog) and a reason. The
Airflow user who triggers it is the requester, acting as the Pulsar role
``CURSOROPS_ROLE_MAP`` maps them to (by default the same name).

Unlike the other gated DAGs, whose doors plan a request and start the run with its
digest, this one plans in a step of its own: its plan needs a Spark scan first. So it
is triggered with the request itself, and checks everything it can before the scan.

validate_request (the conf and its predicate, stored as the run's request record) →
authorize (the skip permission, the subscription and its type) → find_messages (Spark:
writes the match list in the run's scratch folder under the cursorops home) →
plan_matched_ids (the exact plan, counts per partition, a sample, the backlog before and
after, stored as the run's plan record, chained to the request record) → approve_skip
(four eyes) → apply_skip (the whole plan in one transaction) → record. More matches than
``limit`` (default 1,000,000) are refused unless ``allow_large``. Nothing is acknowledged
unless a permitted user other than the requester approved this very plan.

After validate_request, no task takes anything from an XCom: each reads the request
from the store by its own run's identity, and the Spark job gets only that identity
(rendered from the run), so an XCom edited between the tasks changes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task

from cursorops.airflow.gated_tail import approve_and_apply
from cursorops.airflow.matching import match_params
from cursorops.airflow.operators.gate import GATE_PARAMS, gate_params
from cursorops.airflow.operators.spark import spark_job
from cursorops.airflow.steps import refusal_audited
from cursorops.core.services.gating.operation import SKIP


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "skip", "approval", "spark"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    doc_md=__doc__,
    params={**match_params(), **gate_params()},
)
def cursorops_skip_matching() -> None:
    @task(retries=0)
    def validate_request() -> dict[str, Any]:
        """The conf and its predicate, checked and stored as the run's request record; the
        record's digest (for people to read: no task reads this XCom)."""
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.matching import parse_match_request, request_record
        from cursorops.airflow.outcomes import airflow_outcome
        from cursorops.core.services.broker import wall_clock_ms

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        dag_run = context["dag_run"]
        requester = dag_run.triggering_user_name or ""
        topic, subscription = conf.get("topic"), conf.get("subscription")
        hook = CursorOpsHook()
        with refusal_audited(context, SKIP, topic, subscription, "validate"), airflow_outcome():
            request, predicate = parse_match_request(conf, wall_clock_ms())
            record = request_record(
                request,
                predicate,
                dag_id=dag_run.dag_id,
                run_id=dag_run.run_id,
                requester=requester,
                role=hook.role(requester),
                now_ms=wall_clock_ms(),
            )
            # Another request recorded for this run already is refused, and audited.
            with hook.new_broker() as broker:
                record = broker.workflow.save_request_record(record)
        return {
            "requestDigest": record.digest,
            "topic": record.topic,
            "subscription": record.subscription,
        }

    @task
    def authorize() -> None:
        """What can be checked before the scan: the requester's Pulsar role holds the skip
        permission on the topic, and the subscription is there and may skip chosen
        messages (Shared or Key_Shared)."""
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.steps import run_request_record
        from cursorops.core.domain.authz import Operation
        from cursorops.core.domain.errors import (
            SubscriptionNotFoundError,
            UnsupportedSubscriptionTypeError,
        )

        context = get_current_context()
        hook = CursorOpsHook()
        with hook.broker() as broker:
            request = run_request_record(broker, context)
        topic, wanted = request.topic, request.subscription
        with refusal_audited(context, SKIP, topic, wanted, "authorize"), hook.broker() as broker:
            info = broker.access.authorized_topic(request.role, Operation.SKIP, topic)
            found = [
                s
                for s in broker.admin.list_subscriptions(request.role, info.name)
                if s.name == wanted
            ]
            if not found:
                raise SubscriptionNotFoundError(f"Subscription {wanted} not found on {info.name}")
            if not found[0].type.allows_skip:
                raise UnsupportedSubscriptionTypeError(
                    f"Unsupported subscription type. Skipping messages needs a Shared or "
                    f"Key_Shared subscription; '{wanted}' is {found[0].type.value}"
                )

    @task
    def plan_matched_ids() -> dict[str, Any]:
        """The run's match list as an exact plan (over the limit: refused), chained to the
        run's request record; its preview and backlog."""
        from airflow.sdk.exceptions import AirflowFailException

        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.matching import over_limit, scan_answer
        from cursorops.airflow.outcomes import airflow_outcome
        from cursorops.airflow.plan import plan_in_run
        from cursorops.airflow.steps import run_request_record
        from cursorops.core.services.gating import SkipMatching
        from cursorops.spark.match_list import match_list_ids

        context = get_current_context()
        hook = CursorOpsHook()
        with hook.broker() as broker:
            request = run_request_record(broker, context)
        asked = request.arguments
        topic, subscription = request.topic, request.subscription
        with refusal_audited(context, SKIP, topic, subscription, "plan"):
            with airflow_outcome():
                found, matches = scan_answer(hook.config, request)
            refusal = over_limit(found["matches"], asked["limit"], asked["allowLarge"])
            if refusal:
                raise AirflowFailException(refusal)
            if not found["matches"]:
                raise AirflowFailException("The predicate matches no unacknowledged message")
            with hook.broker() as broker:
                arguments = SkipMatching(
                    topic=topic,
                    subscription=subscription,
                    predicate=asked["predicate"],
                    matches=tuple(match_list_ids(matches)),
                    reason=asked["reason"],
                    ticket=asked["ticket"],
                    request=request.digest,
                )
                return plan_in_run(broker, context, "skip-matching", arguments)

    # The Spark job gets the run's identity, rendered by Airflow from the run itself; it
    # reads the request from the store and writes only in the run's scratch folder.
    find = spark_job(
        "find_messages",
        "find_run_matches",
        [
            "--dag-id={{ dag_run.dag_id }}",
            "--run-id={{ dag_run.run_id }}",
            "--requester={{ dag_run.triggering_user_name }}",
        ],
    )
    plan = plan_matched_ids()
    validate_request() >> authorize() >> find >> plan
    approve_and_apply(SKIP, plan)


cursorops_skip_matching()

"""Skip the messages of a subscription that match a predicate, approved by a second person.

Trigger it with a topic, a subscription, a predicate (key, property, publish-time
window, still scheduled, delivery-time window, payload match, producer name, a
predicate document, or everything: a gated clear-backlog) and a reason. The
Airflow user who triggers it is the requester, acting as the Pulsar role
``CURSOROPS_ROLE_MAP`` maps them to (by default the same name).

Unlike the other gated DAGs, whose doors plan a request and start the run with its
digest, this one plans in a step of its own: its plan needs a Spark scan first. So it
is triggered with the request itself, and checks everything it can before the scan.

validate_request (the conf and its predicate) → authorize (the skip permission, the
subscription and its type) → find_messages (Spark: writes the match list under the
cursorops home) → plan_matched_ids (the exact plan, counts per partition, a sample, the
backlog before and after, stored as the run's plan record) → approve_skip (four eyes) →
apply_skip (the whole plan in one transaction) → record. More matches than ``limit``
(default 1,000,000) are refused unless ``allow_large``. Nothing is acknowledged
unless a permitted user other than the requester approved this very plan.
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
from cursorops.core.gating.operation import SKIP


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
    # multiple_outputs: the Spark job's arguments are single fields of the request.
    @task(retries=0, multiple_outputs=True)
    def validate_request() -> dict[str, Any]:
        """The conf and its predicate, checked; where the Spark job writes its match list."""
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.matching import parse_match_request
        from cursorops.airflow.outcomes import airflow_outcome
        from cursorops.airflow.runs import run_folder
        from cursorops.core.broker import wall_clock_ms

        context = get_current_context()
        conf = {k: v for k, v in context["params"].items() if k not in GATE_PARAMS}
        requester = context["dag_run"].triggering_user_name or ""
        topic, subscription = conf.get("topic"), conf.get("subscription")
        with refusal_audited(context, SKIP, topic, subscription, "validate"), airflow_outcome():
            request, predicate = parse_match_request(conf, wall_clock_ms())
        hook = CursorOpsHook()
        cfg = hook.config
        folder = run_folder(cfg, context["dag_run"])
        return {
            **request.model_dump(),
            "requester": requester,
            "role": hook.role(requester),
            "predicateJson": predicate,
            "ledgerRoot": str(cfg.ledger_root),
            "matchList": str(folder / "matches.parquet"),
            "summary": str(folder / "summary.json"),
        }

    @task
    def authorize(request: dict[str, Any]) -> None:
        """What can be checked before the scan: the requester's Pulsar role holds the skip
        permission on the topic, and the subscription is there and may skip chosen
        messages (Shared or Key_Shared)."""
        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.core.authz import Operation
        from cursorops.core.errors import (
            SubscriptionNotFoundError,
            UnsupportedSubscriptionTypeError,
        )

        context = get_current_context()
        hook = CursorOpsHook()
        role = hook.requester_role(context)
        topic, wanted = request["topic"], request["subscription"]
        with refusal_audited(context, SKIP, topic, wanted, "authorize"), hook.broker() as broker:
            info = broker.authorized_topic(role, Operation.SKIP, topic)
            found = [s for s in broker.list_subscriptions(role, info.name) if s.name == wanted]
            if not found:
                raise SubscriptionNotFoundError(f"Subscription {wanted} not found on {info.name}")
            if not found[0].type.allows_skip:
                raise UnsupportedSubscriptionTypeError(
                    f"Unsupported subscription type. Skipping messages needs a Shared or "
                    f"Key_Shared subscription; '{wanted}' is {found[0].type.value}"
                )

    @task
    def plan_matched_ids(request: dict[str, Any]) -> dict[str, Any]:
        """The match list as an exact plan (over the limit: refused); its preview and backlog."""
        import json

        from airflow.sdk.exceptions import AirflowFailException

        from cursorops.airflow.hooks import CursorOpsHook
        from cursorops.airflow.matching import over_limit
        from cursorops.airflow.plan import plan_in_run
        from cursorops.core.gating import SkipMatching
        from cursorops.spark.match_list import match_list_ids, read_match_list

        with open(request["summary"], encoding="utf-8") as source:
            found = json.load(source)
        context = get_current_context()
        topic, subscription = request["topic"], request["subscription"]
        with refusal_audited(context, SKIP, topic, subscription, "plan"):
            refusal = over_limit(int(found["matches"]), request["limit"], request["allow_large"])
            if refusal:
                raise AirflowFailException(refusal)
            if not found["matches"]:
                raise AirflowFailException("The predicate matches no unacknowledged message")
            with CursorOpsHook().broker() as broker:
                arguments = SkipMatching(
                    topic=topic,
                    subscription=subscription,
                    predicate=json.loads(request["predicateJson"]),
                    matches=tuple(match_list_ids(read_match_list(request["matchList"]))),
                    reason=request["reason"],
                    ticket=request.get("ticket"),
                )
                return plan_in_run(broker, context, "skip-matching", arguments)

    request = validate_request()
    find = spark_job(
        "find_messages",
        "find_messages",
        [
            request["topic"],
            "-s",
            request["subscription"],
            "--predicate",
            request["predicateJson"],
            "--role",
            request["role"],
            "--ledger-root",
            request["ledgerRoot"],
            "--output",
            request["matchList"],
            "--summary",
            request["summary"],
        ],
    )
    plan = plan_matched_ids(request)
    # The match list and the summary travel as files the Spark job writes, not as XCom.
    authorize(request) >> find >> plan
    approve_and_apply(SKIP, plan)


cursorops_skip_matching()

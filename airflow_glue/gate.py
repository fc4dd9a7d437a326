"""The four-eyes approval gate: one unmapped ``ApprovalOperator`` before every apply task.

At run time, before it waits, the gate assigns the approval to the permitted
approvers: the Airflow users (:func:`airflow_glue.environment.approver_candidates`)
whose Pulsar role holds the skip permission on the topic (the Broker's own
authorization), minus the requester (``dag_run.triggering_user_name``). Airflow
then refuses an answer from anyone else (403). An empty list would let anyone
with edit rights answer, so the gate fails instead. The list is never taken
from the run's conf, which the requester writes.

A Reject fails the gate (``fail_on_reject``), so every apply task ends
``upstream_failed``, mapped or not; so does a timeout (default 24 hours), since
the gate has no default answer: timing out is a rejection. The gate never
retries, so a refusal is never asked again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from core.broker import Broker

DEFAULT_RESPONSE_TIMEOUT = timedelta(hours=24)
TIMEOUT_PARAM = "approval_timeout_minutes"
"""The run's param that shortens or lengthens the wait (minutes); absent = the default."""


def may_skip(broker: Broker, role: str, topic: str) -> bool:
    """Whether ``role`` holds the skip permission on ``topic`` (the Broker decides)."""
    from core.authz import Operation
    from core.errors import NotAuthorizedError

    try:
        broker.authorized_topic(role, Operation.SKIP, topic)
    except NotAuthorizedError:
        return False
    return True


def permitted_approvers(
    broker: Broker, topic: str, requester: str | None, candidates: Iterable[str]
) -> list[str]:
    """Candidates, minus the requester, whose mapped Pulsar role may skip on ``topic``."""
    from airflow_glue.environment import pulsar_role

    return [
        user
        for user in sorted(set(candidates))
        if user != requester and may_skip(broker, pulsar_role(user), topic)
    ]


class FourEyesApprovalOperator(ApprovalOperator):
    """Approve / Reject, answerable only by a permitted user other than the requester."""

    def __init__(
        self,
        *,
        plan_task_id: str,
        response_timeout: timedelta | None = DEFAULT_RESPONSE_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(
            fail_on_reject=True, response_timeout=response_timeout, defaults=None, **kwargs
        )
        self.plan_task_id = plan_task_id

    def execute(self, context: Context) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_glue.environment import approver_candidates, config
        from airflow_glue.outcomes import airflow_outcome
        from core.broker import Broker

        requester = context["dag_run"].triggering_user_name
        if not requester:
            raise AirflowFailException("The run has no triggering user: nobody to keep apart")
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not plan:
            raise AirflowFailException(f"No plan from {self.plan_task_id}: nothing to approve")
        with airflow_outcome(), Broker(config()) as broker:
            approvers = permitted_approvers(broker, plan["topic"], requester, approver_candidates())
        if not approvers:
            raise AirflowFailException(
                f"No permitted approver other than {requester} may skip on {plan['topic']}: "
                "the request cannot be approved"
            )
        self.assigned_users = [{"id": user, "name": user} for user in approvers]
        minutes = (context.get("params") or {}).get(TIMEOUT_PARAM)
        if minutes:
            self.response_timeout = timedelta(minutes=float(minutes))
        self.subject = (
            f"Skip {plan['total']} message(s) on {plan['topic']} / {plan['subscription']}"
            f" (asked by {requester})"
        )
        self.body = (
            f"{plan['preview']}\n\n**Approvers:** {', '.join(approvers)} "
            f"(the requester {requester} may not approve). "
            f"No answer within {_readable(self.response_timeout)} counts as a rejection."
        )
        self.log.info("Approval assigned to %s; requester %s", approvers, requester)
        return super().execute(context)


def _readable(timeout: timedelta | None) -> str:
    """``24 h`` or ``90 min``, as a person reads a timeout (not ``1 day, 0:00:00``)."""
    if timeout is None:
        return "the timeout"
    minutes = round(timeout.total_seconds() / 60)
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"

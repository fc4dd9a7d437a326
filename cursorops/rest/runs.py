"""How the REST doors start the run of a pending request: two
:class:`~cursorops.core.gating.RunStarter`s.

Core stores the plan record bound to a run id it chose, then hands the run to the
door's starter, which starts it with a conf of the plan's digest only
(``{"plan_digest": ...}``), as the calling user, whose permission to trigger the
workflow Airflow's own auth manager decides.

- :class:`AirflowRuns`, inside Airflow's API server (the plugin's routes): the permission
  is asked of the auth manager before anything is planned, and the run is created in
  process (``trigger_dag``), as Airflow's REST route creates it, without a request to
  the API server itself.
- :class:`HttpRuns`, next to Airflow (``cursorops standalone``, another process): the run
  is started through Airflow's REST API with the caller's own token, which is where
  Airflow checks the permission (a refusal there closes the stored request as not
  started).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cursorops.core.errors import NotAuthorizedError, StoreError
from cursorops.core.gating import GATED_OPERATIONS, Pending, Run
from cursorops.core.gating.operation import RUN_DIGEST
from cursorops.rest.models import SkipTriggered

if TYPE_CHECKING:
    import httpx

TRIGGER_TIMEOUT_S = 30.0


def airflow_base_url() -> str:
    """Airflow's own address (``[api] base_url``), without a trailing slash."""
    from airflow.configuration import conf

    return (conf.get("api", "base_url", fallback="") or "http://127.0.0.1:8080").rstrip("/")


def first_gate(workflow: str) -> str:
    """The task id of ``workflow``'s first approval gate: where a 202's link opens."""
    step = next(entry.step for entry in GATED_OPERATIONS if entry.workflow == workflow)
    return f"approve_{step}"


def run_url(base: str, dag_id: str, run_id: str) -> str:
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def started(base: str, run: Run) -> Run:
    """``run`` with its link: the first approval gate's page in Airflow's UI."""
    gate = first_gate(run.dag_id)
    return Run(
        run.dag_id,
        run.run_id,
        f"{run_url(base, run.dag_id, run.run_id)}/tasks/{gate}/required_actions",
    )


def triggered(pending: Pending, base: str | None = None) -> SkipTriggered:
    """The 202 answer of a pending request: the run, its gate's link, the plan's digest."""
    run = pending.run
    return SkipTriggered(
        dag_id=run.dag_id,
        run_id=run.run_id,
        url=run.url or "",
        run_url=run_url(base or airflow_base_url(), run.dag_id, run.run_id),
        plan_digest=pending.record.digest,
    )


class AirflowRuns:
    """Starts runs inside Airflow's API server, as ``user`` (the route's Airflow user)."""

    def __init__(self, user: Any) -> None:
        self.user = user

    def authorize(self, workflow: str, requester: str) -> None:
        """The auth manager's answer to "may this user trigger ``workflow``", as Airflow's
        own trigger route asks it; and the workflow must be there."""
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import (
            DagAccessEntity,
            DagDetails,
        )
        from airflow.models.dag import DagModel

        if requester != self.user.get_name():
            raise NotAuthorizedError(
                f"A run is started as its requester ({requester}), not as {self.user.get_name()}"
            )
        allowed = get_auth_manager().is_authorized_dag(
            method="POST",
            access_entity=DagAccessEntity.RUN,
            details=DagDetails(id=workflow, team_name=DagModel.get_team_name(workflow)),
            user=self.user,
        )
        if not allowed:
            raise NotAuthorizedError(
                f"Airflow does not let {requester} trigger {workflow}: nothing requested"
            )
        if DagModel.get_current(workflow) is None:
            raise StoreError(f"Airflow has no DAG {workflow}: nothing requested")

    def start(self, run: Run, digest: str, requester: str) -> Run:
        from airflow.api.common.trigger_dag import trigger_dag
        from airflow.sdk.exceptions import AirflowException
        from airflow.utils.types import DagRunTriggeredByType

        try:
            trigger_dag(
                run.dag_id,
                triggered_by=DagRunTriggeredByType.REST_API,
                triggering_user_name=requester,
                run_id=run.run_id,
                conf={RUN_DIGEST: digest},
            )
        except (AirflowException, ValueError) as exc:
            raise StoreError(f"Airflow did not start {run.dag_id}: {exc}") from exc
        return started(airflow_base_url(), run)


class HttpRuns:
    """Starts runs through Airflow's REST API with the caller's own Airflow token, from a
    process other than Airflow's API server (``cursorops standalone``)."""

    def __init__(
        self,
        token: str | None,
        *,
        base_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.token = token
        self.base_url = base_url
        self.transport = transport

    def authorize(self, workflow: str, requester: str) -> None:
        """Only that there is a token to ask with: Airflow decides when the run starts."""
        if not self.token:
            raise NotAuthorizedError(
                f"Not authenticated to Airflow: {workflow} is started with the caller's token"
            )

    def start(self, run: Run, digest: str, requester: str) -> Run:
        import httpx

        base = self.base_url or airflow_base_url()
        try:
            with httpx.Client(
                base_url=base, timeout=TRIGGER_TIMEOUT_S, transport=self.transport
            ) as client:
                answer = client.post(
                    f"/api/v2/dags/{quote(run.dag_id, safe='')}/dagRuns",
                    json={
                        "dag_run_id": run.run_id,
                        "logical_date": None,
                        "conf": {RUN_DIGEST: digest},
                    },
                    headers={"Authorization": f"Bearer {self.token}"},
                )
        except httpx.HTTPError as exc:
            raise StoreError(
                f"Cannot reach Airflow at {base} to start {run.dag_id}: {exc}"
            ) from exc
        if answer.status_code in (401, 403):
            raise NotAuthorizedError(
                f"Airflow refused to start {run.dag_id} for {requester}: {_detail(answer)}"
            )
        if answer.status_code >= 300:
            raise StoreError(
                f"Airflow did not start {run.dag_id} ({answer.status_code}): {_detail(answer)}"
            )
        return started(base, run)


def _detail(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:200]
    return str(body)[:200]


__all__ = [
    "AirflowRuns",
    "HttpRuns",
    "airflow_base_url",
    "first_gate",
    "triggered",
]

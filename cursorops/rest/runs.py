"""How the REST doors start the run of a pending request, and the 202 that says so.

Core stores the plan record bound to a run id it chose, then hands the run to the
door's starter, which starts it with a conf of the plan's digest only
(``{"plan_digest": ...}``), as the calling user, whose permission to trigger the
workflow Airflow's own auth manager decides.

- ``AirflowRuns`` (:mod:`cursorops.airflow.rest_app`), inside Airflow's API server (the
  plugin's routes): the permission is asked of the auth manager before anything is
  planned, and the run is created in process.
- :class:`HttpRuns`, next to Airflow (``cursorops standalone``, another process): the run
  is started through Airflow's REST API with the caller's own token, which is where
  Airflow checks the permission (a refusal there closes the stored request as not
  started).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from fastapi import Request

from cursorops.core.domain.errors import NotAuthorizedError, StoreError
from cursorops.core.services.gating import GATED_OPERATIONS, Pending, Run
from cursorops.core.services.gating.operation import RUN_DIGEST
from cursorops.rest.models import SkipTriggered

if TYPE_CHECKING:
    import httpx

TRIGGER_TIMEOUT_S = 30.0


AIRFLOW_BASE_URL_ENV = "AIRFLOW__API__BASE_URL"
"""Where a standalone finds Airflow: the variable that sets Airflow's ``[api] base_url``."""
DEFAULT_AIRFLOW_URL = "http://127.0.0.1:8080"
AIRFLOW_TOKEN_COOKIE = "_token"
"""The cookie Airflow's UI keeps its token in (cookies ignore ports: a browser logged in
to Airflow on the same host sends it to the standalone too)."""


def airflow_base_url(environ: Mapping[str, str] | None = None) -> str:
    """Airflow's address as the environment names it (``AIRFLOW__API__BASE_URL``, which
    Airflow's own configuration reads first), without a trailing slash; Airflow's
    default when unset. Read without importing Airflow."""
    env = os.environ if environ is None else environ
    return (env.get(AIRFLOW_BASE_URL_ENV, "").strip() or DEFAULT_AIRFLOW_URL).rstrip("/")


def caller_token(request: Request) -> str | None:
    """The caller's own Airflow token: a bearer token, or Airflow's UI cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.cookies.get(AIRFLOW_TOKEN_COOKIE)


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


def triggered(pending: Pending) -> SkipTriggered:
    """The 202 answer of a pending request: the run, its gate's link, the plan's digest.
    The run's own link is its gate's without the task part (:func:`started`)."""
    run = pending.run
    gate = run.url or ""
    before, tasks, _ = gate.rpartition("/tasks/")
    return SkipTriggered(
        dag_id=run.dag_id,
        run_id=run.run_id,
        url=gate,
        run_url=before if tasks else gate,
        plan_digest=pending.record.digest,
    )


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
    "HttpRuns",
    "airflow_base_url",
    "caller_token",
    "first_gate",
    "started",
    "triggered",
]

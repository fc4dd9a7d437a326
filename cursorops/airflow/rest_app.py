"""cursorops's REST app as Airflow's API server mounts it: behind Airflow's login.

The app is :mod:`cursorops.rest`'s, the same the standalone serves; this module hands it
what only Airflow knows:

- who calls: Airflow's own ``get_user`` (a bearer token from ``/auth/token``, or the UI's
  ``_token`` cookie), so a route is exactly as protected as Airflow's REST API; the
  Airflow user acts as the Pulsar role :func:`cursorops.airflow.environment.pulsar_role`
  maps it to;
- what starts a gated request's run: :class:`AirflowRuns`, in process, as the caller.
"""

from __future__ import annotations

from typing import Annotated

from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI

from cursorops.airflow.environment import PLUGIN_PREFIX, pulsar_role
from cursorops.core.domain.errors import NotAuthorizedError, StoreError
from cursorops.core.services.gating import Run, RunStarter
from cursorops.core.services.gating.operation import RUN_DIGEST
from cursorops.rest import Principal
from cursorops.rest import create_app as create_rest_app
from cursorops.rest.runs import DEFAULT_AIRFLOW_URL, started

URL_PREFIX = PLUGIN_PREFIX
"""Where the plugin mounts the app in Airflow's API server."""

AirflowUser = Annotated[BaseUser, Depends(get_user)]


async def airflow_principal(user: AirflowUser) -> Principal:
    """The Airflow user, as the Pulsar role they act as."""
    return Principal(user.get_name(), pulsar_role(user.get_name()))


async def airflow_runs(user: AirflowUser) -> RunStarter:
    """Runs started inside Airflow's API server, as the calling user."""
    return AirflowRuns(user)


def create_app() -> FastAPI:
    """The REST app behind Airflow's login, for the plugin to mount at :data:`URL_PREFIX`."""
    return create_rest_app(airflow_principal, airflow_runs, login="Airflow's login")


def airflow_base_url() -> str:
    """Airflow's own address (``[api] base_url``), without a trailing slash."""
    from airflow.configuration import conf

    return (conf.get("api", "base_url", fallback="") or DEFAULT_AIRFLOW_URL).rstrip("/")


class AirflowRuns:
    """Starts runs inside Airflow's API server, as ``user`` (the route's Airflow user): the
    permission is asked of the auth manager before anything is planned, and the run is
    created in process (``trigger_dag``), as Airflow's REST route creates it, without a
    request to the API server itself."""

    def __init__(self, user: BaseUser) -> None:
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


__all__ = ["URL_PREFIX", "AirflowRuns", "airflow_principal", "airflow_runs", "create_app"]

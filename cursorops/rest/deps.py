"""What every route depends on: the Airflow user, their Pulsar role, the Broker.

The user comes from Airflow's own dependency (``get_user``: a bearer token, or
the UI's ``_token`` cookie), so a route is exactly as protected as Airflow's
REST API. The role is the one the DAGs use (:func:`cursorops.airflow.environment.pulsar_role`).
"""

from __future__ import annotations

import functools
import os
from typing import Annotated

from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, Request

from cursorops.airflow.environment import config, pulsar_role
from cursorops.core.broker import Broker
from cursorops.core.config import Config
from cursorops.core.gating import Caller, RunStarter

GetUser = Annotated[BaseUser, Depends(get_user)]


@functools.lru_cache(maxsize=4)
def _broker_for(cfg: Config) -> Broker:
    # One Broker per installation and process: it holds only connection pools.
    return Broker(cfg)


# The dependencies below are cheap and never block (a cached Broker, a name mapping):
# ``async`` runs them on the event loop, where a plain ``def`` would cost each request a
# hop to the thread pool and back per dependency.


async def broker() -> Broker:
    """The Broker of the installation this process's environment names (CURSOROPS_HOME...)."""
    return _broker_for(config(os.environ))


async def role(user: GetUser) -> str:
    """The Pulsar role the Airflow user acts as."""
    return pulsar_role(user.get_name())


def caller_token(request: Request) -> str | None:
    """The caller's own Airflow token, as :func:`get_user` accepted it."""
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.cookies.get(COOKIE_NAME_JWT_TOKEN)


BrokerDep = Annotated[Broker, Depends(broker)]
RoleDep = Annotated[str, Depends(role)]


async def caller(user: GetUser, role: RoleDep) -> Caller:
    """Who asks for a gated operation: the Airflow user, as their Pulsar role, over REST."""
    return Caller(role, user.get_name(), via="rest")


async def runs(user: GetUser) -> RunStarter:
    """What starts the run of a request that waits for approval: inside Airflow's API
    server, in process, as the calling user (:class:`cursorops.rest.runs.AirflowRuns`)."""
    from cursorops.rest.runs import AirflowRuns

    return AirflowRuns(user)


CallerDep = Annotated[Caller, Depends(caller)]
RunsDep = Annotated[RunStarter, Depends(runs)]

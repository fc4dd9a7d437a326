"""What every route depends on: who calls and as which Pulsar role, the Broker, and what
starts the run of a request that waits for approval.

Who calls and what starts a run are not this package's to decide: the door that serves
the app injects them (:func:`cursorops.rest.app.create_app`), as FastAPI dependencies
that take the place of :func:`principal` and :func:`runs` here.

- ``cursorops standalone`` (:mod:`cursorops.wire.web`): Pulsar's token, basic or
  certificate authentication, or none on loopback; runs started through Airflow's REST
  API with the caller's own token (:class:`cursorops.rest.runs.HttpRuns`).
- The Airflow plugin (:mod:`cursorops.airflow.rest_app`): Airflow's login, the Airflow
  user acting as the Pulsar role it maps to; runs started in process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Caller, RunStarter


@dataclass(frozen=True)
class Principal:
    """Who calls: ``name`` as the authenticating door knows them (an Airflow user, or a
    Pulsar role for the standalone), and the Pulsar ``role`` they act as."""

    name: str
    role: str


Authenticator = Callable[..., Principal | Awaitable[Principal]]
"""A FastAPI dependency that names the caller, or refuses (an HTTPException, 401)."""
RunStarterFactory = Callable[..., RunStarter | Awaitable[RunStarter]]
"""A FastAPI dependency that gives the request's
:class:`~cursorops.core.services.gating.RunStarter`."""


class NotInjected(RuntimeError):
    """The app was built without what the door must inject (a programming error)."""


async def principal(request: Request) -> Principal:
    """Replaced by the door's authenticator (:func:`cursorops.rest.app.create_app`)."""
    raise NotInjected("The REST app was built without an authenticator")


async def runs(request: Request) -> RunStarter:
    """Replaced by the door's run starter (:func:`cursorops.rest.app.create_app`)."""
    raise NotInjected("The REST app was built without a run starter")


@functools.lru_cache(maxsize=4)
def _broker_for(cfg: Config) -> Broker:
    # One Broker per installation and process: it holds only connection pools.
    return Broker(cfg)


# The dependencies below are cheap and never block (a cached Broker, a name mapping):
# ``async`` runs them on the event loop, where a plain ``def`` would cost each request a
# hop to the thread pool and back per dependency.


async def broker() -> Broker:
    """The Broker of the installation this process's environment names (CURSOROPS_HOME...),
    unless the door hands the app its own."""
    return _broker_for(Config.from_environ(os.environ))


PrincipalDep = Annotated[Principal, Depends(principal)]


async def role(who: PrincipalDep) -> str:
    """The Pulsar role the caller acts as."""
    return who.role


BrokerDep = Annotated[Broker, Depends(broker)]
RoleDep = Annotated[str, Depends(role)]


async def caller(who: PrincipalDep) -> Caller:
    """Who asks for a gated operation: the caller, as their Pulsar role, over REST."""
    return Caller(who.role, who.name, via="rest")


CallerDep = Annotated[Caller, Depends(caller)]
RunsDep = Annotated[RunStarter, Depends(runs)]


def inject(
    app: Any,
    authenticate: Authenticator,
    start_runs: RunStarterFactory,
    given_broker: Broker | None = None,
) -> None:
    """Put the door's authenticator, run starter and (when given) Broker in the app."""
    app.dependency_overrides[principal] = authenticate
    app.dependency_overrides[runs] = start_runs
    if given_broker is not None:

        async def its_broker() -> Broker:
            return given_broker

        app.state.broker = given_broker
        app.dependency_overrides[broker] = its_broker

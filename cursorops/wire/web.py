"""The standalone's admin REST app: the plugin's FastAPI app without Airflow's login.

The plugin's app authenticates every route through Airflow's ``get_user``; here
that dependency is the standalone's own: its role when authentication is off
(loopback, as Pulsar standalone), else the role the request's credentials name
as on the broker port (a bearer token, basic credentials, the client
certificate over https, or the anonymous role on loopback).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.api_fastapi.core_api.security import get_user
from fastapi import HTTPException, Request

from cursorops.core.broker import Broker
from cursorops.core.config import Config
from cursorops.core.gating import RunStarter
from cursorops.rest import deps
from cursorops.rest.app import create_app
from cursorops.rest.runs import HttpRuns
from cursorops.wire import admin
from cursorops.wire.auth import AuthenticationError
from cursorops.wire.authentication import Authentication, is_loopback
from cursorops.wire.listeners import BrokerUrls


class _StandaloneUser:
    """The user the REST app sees: the standalone's role."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name

    def get_id(self) -> str:
        return self.name


PEER_CN = "cursorops_peer_cn"
"""The key of the request state that holds the CN of the https client's certificate."""


def web_app(
    config: Config,
    role: str,
    authentication: Authentication | None,
    urls: Callable[[], BrokerUrls] | None = None,
) -> Any:
    """The admin REST app with its own Broker; the user is the standalone's role, or
    with authentication on the role the request's credentials name. ``urls``: what the
    HTTP lookup answers (None: no lookup paths)."""
    app = create_app()
    rest_broker = Broker(config)
    checks = authentication or Authentication(role)

    def user(request: Request) -> _StandaloneUser:
        if not checks.enabled:
            return _StandaloneUser(role)
        peer_cn = request.scope.get("state", {}).get(PEER_CN)
        client = request.client
        try:
            return _StandaloneUser(
                checks.http_role(
                    request.headers.get("authorization", ""),
                    peer_cn=peer_cn if isinstance(peer_cn, str) else None,
                    loopback=client is not None and is_loopback(client.host),
                )
            )
        except AuthenticationError as exc:
            raise HTTPException(401, str(exc)) from exc

    def request_role(request: Request) -> str:
        return user(request).get_name()

    app.dependency_overrides[get_user] = user
    app.dependency_overrides[deps.broker] = lambda: rest_broker
    app.dependency_overrides[deps.role] = request_role

    # A run of a request that waits for approval is started through Airflow's REST API
    # with the caller's own token: this process is not Airflow's API server.
    def runs(request: Request) -> RunStarter:
        return HttpRuns(deps.caller_token(request))

    app.dependency_overrides[deps.runs] = runs
    app.include_router(admin.router(rest_broker, request_role, role, urls))
    return app

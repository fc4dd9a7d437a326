"""The standalone's admin REST app: :mod:`cursorops.rest`'s app with Pulsar's authentication.

Who calls is the standalone's role when authentication is off (loopback, as Pulsar
standalone), else the role the request's credentials name as on the broker port (a
bearer token, basic credentials, the client certificate over https, or the anonymous
role on loopback). A gated request's run is started through Airflow's REST API with the
caller's own token (:class:`cursorops.rest.runs.HttpRuns`): this process is not
Airflow's API server, and imports nothing of Airflow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import HTTPException, Request

from cursorops.core.broker import Broker
from cursorops.core.config import Config
from cursorops.core.gating import RunStarter
from cursorops.rest import Principal, create_app
from cursorops.rest.runs import HttpRuns, caller_token
from cursorops.wire import admin
from cursorops.wire.auth import AuthenticationError
from cursorops.wire.authentication import Authentication, is_loopback
from cursorops.wire.listeners import BrokerUrls

PEER_CN = "cursorops_peer_cn"
"""The key of the request state that holds the CN of the https client's certificate."""


def web_app(
    config: Config,
    role: str,
    authentication: Authentication | None,
    urls: Callable[[], BrokerUrls] | None = None,
) -> Any:
    """The admin REST app with its own Broker; the caller is the standalone's role, or
    with authentication on the role the request's credentials name. ``urls``: what the
    HTTP lookup answers (None: no lookup paths)."""
    checks = authentication or Authentication(role)

    def request_role(request: Request) -> str:
        if not checks.enabled:
            return role
        peer_cn = request.scope.get("state", {}).get(PEER_CN)
        client = request.client
        try:
            return checks.http_role(
                request.headers.get("authorization", ""),
                peer_cn=peer_cn if isinstance(peer_cn, str) else None,
                loopback=client is not None and is_loopback(client.host),
            )
        except AuthenticationError as exc:
            raise HTTPException(401, str(exc)) from exc

    def principal(request: Request) -> Principal:
        name = request_role(request)
        return Principal(name, name)

    def runs(request: Request) -> RunStarter:
        return HttpRuns(caller_token(request))

    rest_broker = Broker(config)
    app = create_app(principal, runs, broker=rest_broker, login="Pulsar's authentication")
    app.include_router(admin.router(rest_broker, request_role, role, urls))
    return app

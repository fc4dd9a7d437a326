"""The standalone's admin REST app: the plugin's FastAPI app without Airflow's login.

The plugin's app authenticates every route through Airflow's ``get_user``; here
that dependency is the standalone's own: its role when authentication is off
(loopback, as Pulsar standalone), or the subject of the request's bearer token
when token authentication is on.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import get_user
from fastapi import HTTPException, Request

from core.broker import Broker
from core.config import Config
from cursorops_api import deps
from cursorops_api.app import create_app
from protocol import admin
from protocol.auth import AuthenticationError, TokenAuthenticator


class _StandaloneUser:
    """The user the REST app sees: the standalone's role."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name

    def get_id(self) -> str:
        return self.name


def web_app(config: Config, role: str, authenticator: TokenAuthenticator | None) -> Any:
    """The admin REST app with its own Broker; the user is the standalone's role, or
    with token authentication the subject of the request's bearer token."""
    app = create_app()
    rest_broker = Broker(config)

    def user(request: Request) -> _StandaloneUser:
        if authenticator is None:
            return _StandaloneUser(role)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            if scheme.lower() != "bearer":
                raise AuthenticationError("A bearer token is required")
            return _StandaloneUser(authenticator.role(token))
        except AuthenticationError as exc:
            raise HTTPException(401, str(exc)) from exc

    def request_role(request: Request) -> str:
        return user(request).get_name()

    app.dependency_overrides[get_user] = user
    app.dependency_overrides[deps.broker] = lambda: rest_broker
    app.dependency_overrides[deps.role] = request_role
    app.include_router(admin.router(rest_broker, request_role, role))
    return app

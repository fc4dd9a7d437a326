"""The standalone's admin REST app: :mod:`cursorops.rest`'s app with Pulsar's authentication.

Who calls is the standalone's role when authentication is off (loopback, as Pulsar
standalone), else the role the request's credentials name as on the broker port (a
bearer token, basic credentials, the client certificate over https, or the anonymous
role on loopback). A gated request's run is started through Airflow's REST API with the
caller's own token (:class:`cursorops.rest.runs.HttpRuns`): this process is not
Airflow's API server, and imports nothing of Airflow.

On the home's private Unix socket (:class:`SocketDoor`, :mod:`cursorops.core.domain.admin_socket`)
the operating system's user is the authentication: only this user can connect, and a
request acts as the role its ``X-Cursorops-Role`` header names (plain, or an RFC 8187
``UTF-8''`` value for any script; absent: the standalone's role), through the door
``cli``. A gated request there starts its run
through Airflow when the standalone's environment names Airflow
(``AIRFLOW__API__BASE_URL``), and is refused otherwise. None of this holds on TCP,
where the header means nothing.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException, Request

from cursorops.core.domain.admin_socket import ROLE_HEADER, STATUS_PATH, STOP_PATH
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.header_text import header_text
from cursorops.core.domain.ids.topic_name import label_problem
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Caller, RunStarter
from cursorops.core.services.gating.no_workflow import NoWorkflow
from cursorops.rest import Principal, create_app, deps
from cursorops.rest.runs import AIRFLOW_BASE_URL_ENV, HttpRuns, caller_token
from cursorops.wire import admin
from cursorops.wire.auth import AuthenticationError
from cursorops.wire.authentication import Authentication, is_loopback
from cursorops.wire.listeners import BrokerUrls

PEER_CN = "cursorops_peer_cn"
"""The key of the request state that holds the CN of the https client's certificate."""
ON_SOCKET = "cursorops_on_socket"
"""The key of the request state that says the request came on the home's private socket
(set by :class:`SocketDoor` only)."""
_PEER = struct.Struct("3i")


def on_socket(request: Request) -> bool:
    return request.scope.get("state", {}).get(ON_SOCKET) is True


def web_app(
    config: Config,
    role: str,
    authentication: Authentication | None,
    urls: Callable[[str], BrokerUrls] | None = None,
) -> Any:
    """The admin REST app with its own Broker; the caller is the standalone's role, or
    with authentication on the role the request's credentials name. ``urls``: what the
    HTTP lookup of a topic partition answers (None: no lookup paths)."""
    checks = authentication or Authentication(role)

    def request_role(request: Request) -> str:
        if on_socket(request):
            sent = request.headers.get(ROLE_HEADER)
            if sent is None:
                return role
            try:
                # Any script: an RFC 8187 value, as the reason and ticket headers.
                named = header_text(sent, ROLE_HEADER)
            except InvalidArgumentError as exc:
                raise HTTPException(401, str(exc)) from exc
            problem = label_problem(named)
            if problem is not None:
                raise HTTPException(401, f"{ROLE_HEADER}: {problem}")
            return named
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

    airflow_named = bool(os.environ.get(AIRFLOW_BASE_URL_ENV, "").strip())

    def runs(request: Request) -> RunStarter:
        if on_socket(request) and not airflow_named:
            return NoWorkflow()
        return HttpRuns(caller_token(request))

    async def caller(request: Request, who: deps.PrincipalDep) -> Caller:
        return Caller(who.role, who.name, via="cli" if on_socket(request) else "rest")

    rest_broker = Broker(config)
    app = create_app(principal, runs, broker=rest_broker, login="Pulsar's authentication")
    app.dependency_overrides[deps.caller] = caller
    app.include_router(admin.router(rest_broker, request_role, role, urls))
    return app


ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class SocketDoor:
    """The app as served on the home's private socket: every request is marked as come
    from this user (:data:`ON_SOCKET`), counted, and timed for the idle timeout; the
    status and stop paths are answered here, never by the app (nor on TCP)."""

    def __init__(
        self, app: ASGIApp, describe: Callable[[], dict[str, Any]], stop: Callable[[], None]
    ) -> None:
        self.app = app
        self.describe = describe
        self.stop = stop
        self.served = 0
        self.in_flight = 0
        self.last_request = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last request ended (0 while one is in flight)."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_request

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        # Asking for the status is not using the standalone: it does not keep it alive.
        if path == STATUS_PATH and scope["method"] == "GET":
            await _json(send, 200, {**self.describe(), "served": self.served})
            return
        if path == STOP_PATH and scope["method"] == "POST":
            await _json(send, 200, {"stopping": os.getpid()})
            self.stop()
            return
        self.served += 1
        self.in_flight += 1
        scope.setdefault("state", {})[ON_SOCKET] = True
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last_request = time.monotonic()


async def _json(send: Any, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket."""
    _pid, uid, _gid = _PEER.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER.size)
    )
    return int(uid)

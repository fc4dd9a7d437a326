"""The FastAPI app: Pulsar's admin v2 paths and the Cursors pages, errors as ``{"reason"}``.

One app for every door that serves it; the door injects who the caller is and what
starts a gated request's run (:mod:`cursorops.rest.deps`). Every route, the OpenAPI
document too, goes through the injected authenticator.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import Depends, FastAPI, Request

from cursorops.core.services.broker import Broker
from cursorops.rest import (
    deps,
    errors,
    operations,
    topics,
    ui,
)
from cursorops.rest.deps import Authenticator, PrincipalDep, RunStarterFactory
from cursorops.rest.heap import FreezeHeap
from cursorops.rest.limits import DEFAULT_MAX_BODY_BYTES, MAX_BODY_ENV, BodyLimit


def max_body_bytes() -> int:
    """The body cap: ``CURSOROPS_API_MAX_BODY_BYTES`` or :data:`DEFAULT_MAX_BODY_BYTES`."""
    text = os.environ.get(MAX_BODY_ENV, "").strip()
    return int(text) if text.isascii() and text.isdigit() else DEFAULT_MAX_BODY_BYTES


def create_app(
    authenticate: Authenticator,
    runs: RunStarterFactory,
    *,
    broker: Broker | None = None,
    login: str = "the caller's credentials",
) -> FastAPI:
    """The app, with the door's ``authenticate`` (who calls: a FastAPI dependency giving a
    :class:`~cursorops.rest.deps.Principal`), ``runs`` (a dependency giving the
    :class:`~cursorops.core.services.gating.RunStarter` of the request) and ``broker`` (None: the
    installation the environment names). ``login`` names the authentication in the
    app's description."""
    app = FastAPI(
        title="cursorops",
        description=f"Pulsar admin v2 paths for persistent topics, behind {login}.",
        version="1",
        # The docs routes ignore app-level dependencies: no public schema.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(deps.principal)],
    )
    deps.inject(app, authenticate, runs, broker)
    errors.install(app)

    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(FreezeHeap)
    app.include_router(operations.router())
    app.include_router(topics.router)
    app.include_router(ui.router)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request, _who: PrincipalDep) -> dict[str, Any]:
        """The OpenAPI document, for authenticated callers only."""
        document = dict(app.openapi())
        document["servers"] = [{"url": request.scope.get("root_path", "") or "/"}]
        return document

    return app

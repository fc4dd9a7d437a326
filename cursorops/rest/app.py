"""The FastAPI app: every route behind Airflow's login, errors as ``{"reason"}``."""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI, Request

from cursorops.airflow.environment import PLUGIN_PREFIX
from cursorops.rest import (
    compaction,
    errors,
    namespaces,
    policies,
    redrive,
    schemas,
    skip,
    topics,
    ui,
)
from cursorops.rest.deps import GetUser
from cursorops.rest.heap import FreezeHeap
from cursorops.rest.limits import DEFAULT_MAX_BODY_BYTES, MAX_BODY_ENV, BodyLimit

URL_PREFIX = PLUGIN_PREFIX
"""Where the plugin mounts the app in Airflow's API server."""


def max_body_bytes() -> int:
    """The body cap: ``CURSOROPS_API_MAX_BODY_BYTES`` or :data:`DEFAULT_MAX_BODY_BYTES`."""
    text = os.environ.get(MAX_BODY_ENV, "").strip()
    return int(text) if text.isascii() and text.isdigit() else DEFAULT_MAX_BODY_BYTES


def create_app() -> FastAPI:
    app = FastAPI(
        title="cursorops",
        description="Pulsar admin v2 paths for persistent topics, behind Airflow's login.",
        version="1",
        # The docs routes ignore app-level dependencies: no public schema.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(get_user)],
    )
    errors.install(app)

    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(FreezeHeap)
    app.include_router(namespaces.router)
    app.include_router(topics.router)
    app.include_router(skip.router)
    app.include_router(redrive.router)
    app.include_router(ui.router)
    app.include_router(policies.router)
    app.include_router(compaction.router)
    app.include_router(schemas.router)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request, _user: GetUser) -> dict[str, Any]:
        """The OpenAPI document, for logged-in users only."""
        document = dict(app.openapi())
        document["servers"] = [{"url": request.scope.get("root_path", "") or "/"}]
        return document

    return app

"""The HTTP edge of the error tree: one status per ``cursorops.core.domain.errors`` leaf,
``{"reason"}`` bodies.

Families: bad input 400, not found 404, conflict 409 (Pulsar's code path for
an unsupported subscription type), not authorized 403, a store failure 503.
One leaf differs from its family because Pulsar's REST API documents another
code: unsubscribing while consumers are connected is 412 (PreconditionFailed).
``tests/plugins/test_errors.py`` checks that every leaf has its status.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cursorops.core.domain.errors import (
    ConflictError,
    CursorOpsError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    OutcomeTable,
    StoreError,
    SubscriptionBusyError,
)

_TABLE = OutcomeTable(
    families={
        InvalidInputError: 400,
        NotFoundError: 404,
        ConflictError: 409,
        NotAuthorizedError: 403,
        StoreError: 503,
    },
    overrides={SubscriptionBusyError: 412},
    default=500,
)

STATUS: dict[type[CursorOpsError], int] = _TABLE.leaves()
"""HTTP status of every leaf of the error tree."""


def status_of(error: CursorOpsError) -> int:
    return _TABLE.of(error)


def reason(
    status: int, text: str, headers: dict[str, str] | None = None, error: str | None = None
) -> JSONResponse:
    """A Pulsar-style error response; ``error`` names the error's class in the error tree,
    so a client (the CLI) raises the same error the broker did."""
    body = {"reason": text} if error is None else {"reason": text, "error": error}
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as ``{"reason": ...}``."""

    @app.exception_handler(CursorOpsError)
    async def _cursorops(_request: Request, exc: CursorOpsError) -> JSONResponse:
        name = type(exc).__name__
        return reason(status_of(exc), str(exc) or name, error=name)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return reason(exc.status_code, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Pulsar answers malformed requests with 400, not FastAPI's 422.
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ())) or "request"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return reason(400, f"Invalid request: {where}: {first.get('msg')}{more}")

"""Why the caller asks, and their change ticket: what a gated request's door reads besides
its arguments, and the one answer every door gives a request that waits.

Where the namespace requires approval, the request is stored as a plan record and its
workflow's run started (:mod:`cursorops.rest.runs`); the answer is 202 with the run, its
first gate's link and the plan's digest. Nothing is acknowledged then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Query
from fastapi.responses import JSONResponse

from cursorops.core.domain.header_text import header_text
from cursorops.core.services.gating import Pending
from cursorops.rest.runs import triggered


@dataclass(frozen=True)
class ApprovalText:
    """Why the caller asks, and their change ticket: ``X-Cursorops-Reason`` and
    ``X-Cursorops-Ticket`` headers (RFC 8187 ``UTF-8''...`` values for text beyond ASCII:
    :mod:`cursorops.core.domain.header_text`), or the ``reason`` and ``ticket`` query parameters."""

    reason: str
    ticket: str | None


async def approval_text(  # async: no thread-pool hop for a few strings
    reason: Annotated[str | None, Query()] = None,
    ticket: Annotated[str | None, Query()] = None,
    x_cursorops_reason: Annotated[str | None, Header()] = None,
    x_cursorops_ticket: Annotated[str | None, Header()] = None,
) -> ApprovalText:
    """No length here: the limits count characters, as the person typed them, when the
    arguments are made (:class:`~cursorops.core.services.gating.operation.GatedArguments`), where
    an ``UTF-8''`` header spends up to 12 characters on one. What is read is bounded by
    the HTTP server's limit on a request's head."""
    if x_cursorops_reason:
        reason = header_text(x_cursorops_reason, "X-Cursorops-Reason")
    if x_cursorops_ticket:
        ticket = header_text(x_cursorops_ticket, "X-Cursorops-Ticket")
    return ApprovalText((reason or "").strip(), (ticket or "").strip() or None)


ApprovalTextDep = Annotated[ApprovalText, Depends(approval_text)]


def waiting(pending: Pending) -> JSONResponse:
    """202: the request waits for an approval in its run."""
    return JSONResponse(triggered(pending).model_dump(by_alias=True), status_code=202)

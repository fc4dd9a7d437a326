"""Gated operations on a namespace that requires approval: trigger the workflow as the caller.

The caller's own Airflow token is forwarded to Airflow's public REST API, so
the run's ``triggering_user_name`` is the caller and the DAG's four-eyes gate
sees who asked. Nothing is acknowledged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

import httpx
from fastapi import Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from core.errors import InvalidArgumentError
from core.ids.topic_name import TopicName
from cursorops_api.deps import caller_token
from cursorops_api.models import SkipTriggered

SKIP_DAG = "cursorops_skip_messages"
GATE = "approve_skip"
"""The run's first approval gate: where the 202's link opens."""
TRIGGER_TIMEOUT_S = 30.0


def airflow_base_url() -> str:
    """Airflow's own address (``[api] base_url``), without a trailing slash."""
    from airflow.configuration import conf

    return (conf.get("api", "base_url", fallback="") or "http://127.0.0.1:8080").rstrip("/")


@dataclass(frozen=True)
class ApprovalText:
    """Why the caller asks, and their change ticket: ``X-Cursorops-Reason`` and
    ``X-Cursorops-Ticket`` headers, or the ``reason`` and ``ticket`` query parameters."""

    reason: str | None
    ticket: str | None


async def approval_text(  # async: no thread-pool hop for a few strings
    reason: Annotated[str | None, Query(max_length=4096)] = None,
    ticket: Annotated[str | None, Query(max_length=256)] = None,
    x_cursorops_reason: Annotated[str | None, Header(max_length=4096)] = None,
    x_cursorops_ticket: Annotated[str | None, Header(max_length=256)] = None,
) -> ApprovalText:
    return ApprovalText(
        (x_cursorops_reason or reason or "").strip() or None,
        (x_cursorops_ticket or ticket or "").strip() or None,
    )


ApprovalTextDep = Annotated[ApprovalText, Depends(approval_text)]


def start_workflow(
    request: Request,
    name: TopicName,
    text: ApprovalText,
    what: str,
    dag_id: str,
    conf: Mapping[str, Any],
    gate: str = GATE,
) -> JSONResponse:
    """Where the namespace requires approval: start ``dag_id`` as the caller with ``conf``
    and the caller's reason (required) and ticket; 202 with the run and its gate's link.
    ``what`` names the operation in the refusal without a reason (``Skips``, ...)."""
    why = required_reason(name.namespace_name, text.reason, what)
    run = trigger_workflow(
        caller_token(request), dag_id, {**conf, "reason": why, "ticket": text.ticket}, gate=gate
    )
    return JSONResponse(run.model_dump(by_alias=True), status_code=202)


def trigger_workflow(
    token: str | None,
    dag_id: str,
    conf: Mapping[str, Any],
    *,
    gate: str = GATE,
    base_url: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> SkipTriggered:
    """Trigger the gated workflow ``dag_id`` with ``conf`` as the token's user; the run's id
    and the link to its first approval gate ``gate``."""
    if not token:
        raise HTTPException(401, "Not authenticated")
    base = base_url or airflow_base_url()
    try:
        with httpx.Client(base_url=base, timeout=TRIGGER_TIMEOUT_S, transport=transport) as client:
            answer = client.post(
                f"/api/v2/dags/{dag_id}/dagRuns",
                json={"logical_date": None, "conf": dict(conf)},
                headers={"Authorization": f"Bearer {token}"},
            )
    except httpx.HTTPError as exc:
        raise HTTPException(
            503, f"Cannot reach Airflow at {base} to trigger {dag_id}: {exc}"
        ) from exc
    if answer.status_code in (401, 403):
        raise HTTPException(
            403, f"Airflow refused to trigger {dag_id} for this user: {_detail(answer)}"
        )
    if answer.status_code == 404:
        raise HTTPException(503, f"Airflow has no DAG {dag_id}: {_detail(answer)}")
    if answer.status_code >= 300:
        raise HTTPException(
            503, f"Airflow failed to trigger {dag_id} ({answer.status_code}): {_detail(answer)}"
        )
    run_id = str(answer.json()["dag_run_id"])
    run_url = f"{base}/dags/{dag_id}/runs/{quote(run_id, safe='')}"
    return SkipTriggered(
        dag_id=dag_id,
        run_id=run_id,
        url=f"{run_url}/tasks/{gate}/required_actions",
        run_url=run_url,
    )


def required_reason(namespace: str, reason: str | None, what: str) -> str:
    """The caller's reason, required where the namespace requires approval."""
    why = (reason or "").strip()
    if not why:
        raise InvalidArgumentError(
            f"{what} on namespace {namespace} require approval: give a reason "
            "(X-Cursorops-Reason header or reason query parameter); nothing applied"
        )
    return why


def _detail(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:200]
    return str(body)[:200]

"""Gated operations on a namespace that requires approval: trigger the workflow as the caller.

The caller's own Airflow token is forwarded to Airflow's public REST API, so
the run's ``triggering_user_name`` is the caller and the DAG's four-eyes gate
sees who asked. Nothing is acknowledged here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import HTTPException

from core.errors import InvalidArgumentError
from core.ids.message_id import MessageId
from cursorops_api.models import SkipTriggered

SKIP_DAG = "cursorops_skip_messages"
GATE = "approve_skip"
"""The run's first approval gate: where the 202's link opens."""
TRIGGER_TIMEOUT_S = 30.0


def airflow_base_url() -> str:
    """Airflow's own address (``[api] base_url``), without a trailing slash."""
    from airflow.configuration import conf

    return (conf.get("api", "base_url", fallback="") or "http://127.0.0.1:8080").rstrip("/")


def trigger_skip(
    token: str | None,
    topic: str,
    subscription: str,
    ids: Sequence[MessageId],
    reason: str,
    ticket: str | None,
    *,
    base_url: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> SkipTriggered:
    """Trigger ``cursorops_skip_messages`` as the token's user; the run's id and UI link."""
    conf: Mapping[str, Any] = {
        "topic": topic,
        "subscription": subscription,
        # Ledger ids are unique across the store, so a triplet names its partition.
        "message_ids": [m.triplet() for m in ids],
        "reason": reason,
        "ticket": ticket,
    }
    return trigger_workflow(token, SKIP_DAG, conf, base_url=base_url, transport=transport)


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

"""The "Cursors" pages inside Airflow, and the two reads they need beyond Pulsar's paths.

The page is one HTML document with a small vanilla script and style sheet
(``ui_static/``): no CDN, nothing built. It is served by the REST app, so the
app-level authenticator the door injects guards it like every route (anonymous:
401); inside Airflow's plugin iframe the ``_token`` cookie goes along. Every figure
the page shows comes from this app's JSON (same origin, the caller's cookie)
or from Airflow's own REST API (pending approvals), never from a second
computation in the page.

The cursorops extensions (not Pulsar paths, tagged as such):

- ``.../subscription/{sub}/backlogHistory``: the backlog audit DAG's rows;
- ``.../auditLog``: the topic's audit records (skips, skip requests);
- ``.../openRequests``: requests planned and never closed.

Message content (keys, properties, payloads, a predicate's content conditions) is
shown only to a caller whose role may peek on the topic (:mod:`cursorops.core.domain.content`); the
others read its size or count (the radar needs consume, which may peek).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from cursorops.core.domain.content import shown
from cursorops.rest.deps import BrokerDep, RoleDep
from cursorops.rest.paths import SUBSCRIPTION, TOPIC, base_of, topic_name
from cursorops.rest.topics import _ERRORS, Namespace, Subscription, Tenant, Topic

router = APIRouter(tags=["cursorops extensions"])

STATIC = Path(__file__).resolve().parent / "ui_static"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
"""The only files served besides the page: a fixed list, no path from the request."""
MAX_HISTORY = 10_000
MAX_AUDIT = 1_000


@router.get("/ui", include_in_schema=False)
def page() -> FileResponse:
    """The Cursors page (Airflow's nav entry points here)."""
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=_NO_STORE)


@router.get("/ui/static/{asset}", include_in_schema=False)
def asset(asset: str) -> FileResponse:
    if asset not in ASSETS:
        raise HTTPException(404, f"No such asset '{asset}'")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers=_NO_STORE)


# Pages carry live figures and sit behind a login: never cached.
_NO_STORE = {"Cache-Control": "no-store"}


@router.get(SUBSCRIPTION + "/backlogHistory", responses=_ERRORS)
def backlog_history(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    since_ms: Annotated[int | None, Query(alias="sinceMs", ge=0, le=2**63 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY)] = 1_000,
) -> list[dict[str, object]]:
    """The subscription's backlog history as the backlog audit DAG recorded it, oldest
    first: ``atMs`` (epoch ms, UTC), ``messages``, ``entries`` (cursorops extension)."""
    name = topic_name(tenant, namespace, topic)
    samples = broker.analysis.backlog_history(
        role, base_of(name), subscription, since_ms=since_ms, limit=limit
    )
    return [sample.to_json() for sample in samples]


@router.get(SUBSCRIPTION + "/poisonRadar", responses=_ERRORS)
def poison_radar(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    min_redeliveries: Annotated[int, Query(alias="minRedeliveries", ge=1, le=1_000_000)] = 3,
    min_age_seconds: Annotated[int, Query(alias="minAgeSeconds", ge=0, le=10**9)] = 600,
    max_listed: Annotated[int, Query(alias="maxListed", ge=0, le=1_000)] = 50,
) -> dict[str, Any]:
    """Messages stuck at the subscription's head now: redelivered at least
    ``minRedeliveries`` times, or unacknowledged for ``minAgeSeconds`` behind a later
    acknowledged message; with a prefilled skip-messages request of those
    listed (cursorops extension; the backlog audit runs the same radar)."""
    from cursorops.core.domain.analysis.poison_radar import RadarLimits

    name = topic_name(tenant, namespace, topic)
    limits = RadarLimits(min_redeliveries, min_age_seconds, max_listed)
    [radar] = broker.analysis.poison_radar(role, base_of(name), subscription, limits)
    return radar.to_json()


@router.get(TOPIC + "/auditLog", responses=_ERRORS)
def audit_log(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    kind: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT)] = 100,
) -> list[dict[str, Any]]:
    """The topic's newest audit records, newest first: ``skip`` (what was acknowledged,
    by which role, through which door) and ``skip-request`` (who asked, why, who
    approved, the outcome) (cursorops extension)."""
    name = topic_name(tenant, namespace, topic)
    records = broker.workflow.audit_log(role, base_of(name), kind=kind, limit=limit)
    content = broker.access.may_read_content(role, [base_of(name)])
    return [
        {
            "id": r.id,
            "atMs": r.at_ms,
            "kind": r.kind,
            "topic": r.topic,
            "subscription": r.subscription,
            "role": r.role,
            "detail": shown(r.detail, content),
        }
        for r in records
    ]


@router.get("/planRecords/{dag_id}/{run_id}", responses=_ERRORS)
def plan_record(
    dag_id: Annotated[str, PathParam(min_length=1, max_length=250)],
    run_id: Annotated[str, PathParam(min_length=1, max_length=250)],
    broker: BrokerDep,
    role: RoleDep,
) -> dict[str, Any]:
    """The current plan record of a workflow run, as the approver reads it: the same text as
    the approval gate's, with keys, properties and payload excerpts only when the caller's
    role may peek on every topic of the plan (cursorops extension)."""
    from cursorops.core.domain.errors import NotFoundError
    from cursorops.core.services.gating.approval_text import preview_markdown, subject
    from cursorops.core.services.gating.registry import topics_of
    from cursorops.core.services.gating.staleness import STALE_ADVICE, stale_reason

    record = broker.workflow.current_plan_record(role, dag_id, run_id)
    if record is None:
        raise NotFoundError(f"Run {run_id} of {dag_id} has no plan record")
    content = broker.access.may_read_content(role, topics_of(record))
    # What the gate itself would say: applied already, or an approval given to another plan
    # of the run or expired (the current record is the run's newest, so never re-planned).
    answers = broker.workflow.approval_answers(dag_id, run_id)
    why = stale_reason(record, record, None, answers, broker.clock())
    stale = None if why is None else f"{why} {STALE_ADVICE}"
    return {
        "planDigest": record.digest,
        "topic": record.topic,
        "subscription": record.subscription,
        "requester": record.binding.requester,
        "messages": record.messages,
        "requiredApprovals": record.required_approvals,
        "applied": record.applied_at_ms is not None,
        "subject": subject(record),
        "preview": preview_markdown(record, content=content, stale=stale),
        "contentShown": content,
        "stale": stale,
    }

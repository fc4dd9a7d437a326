"""Airflow's API server refuses an answer to a cursorops approval gate that no longer waits.

Airflow 3.3.2 writes any first answer to a task's HITL record (``PATCH
/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/{map_index}/hitlDetails``,
the route the web UI answers through too), and resumes the task only if it still waits.
A gate that ended unanswered (its run forced green or red, the gate marked by hand, timed
out, skipped) thus takes a late Approve with 200, and nothing ever reads it: its run's
closing record already says nothing was applied. The approver must learn that, so this
root middleware answers such a request 409 before Airflow writes anything.

It acts only when all of these hold, and passes every other request on untouched (its
body unread, streamed as it came, but for an ended gate's, read to see the answer):

- the request matches the route whose endpoint is Airflow's ``update_hitl_detail``, as
  Airflow's own router matches it (so any prefix, root path or map index Airflow accepts);
- the caller is who Airflow would let write that answer (its ``get_user`` and its
  ``PUT`` access to the DAG's HITL details): anyone else learns nothing here and gets
  Airflow's own 401 or 403;
- the task is a :class:`~cursorops.airflow.operators.gate.FourEyesApprovalOperator` in
  the serialized DAG version it ran with, whatever the DAG's id (other HITL tasks are
  left alone);
- its HITL record holds no answer (an answered gate gets Airflow's own 409), and the task
  is in a finished state (:data:`ENDED`). Other states pass: Airflow resumes a task still
  parked (``awaiting_input``, ``deferred``), a running gate may be about to park and read
  the answer, and one up for retry takes the answer Airflow holds;
- the answer is not a lone Reject: a late Reject asks for what happened (nothing applied),
  so Airflow records it and no longer lists the gate as waiting for an answer.

The check and Airflow's write are separate transactions: an answer racing the very moment
its gate ends may still be written, and is then read by nothing, as before.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import bearer_scheme, get_user, requires_access_dag
from fastapi import HTTPException
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

ENDED = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
"""Task states Airflow never resumes from: an answer written then is read by nothing (a
cleared gate never asks again, and its run's request is already closed)."""
GATE = ("cursorops.airflow.operators.gate", "FourEyesApprovalOperator")
"""The gate's module and class, as Airflow serializes them (``_task_module``, ``task_type``)."""
_MAP_INDEX = TypeAdapter(int)


def refusal(state: str) -> str:
    """What the approver reads when their answer comes after the gate ended ``state``."""
    return (
        f"This approval gate no longer waits: it ended ({state}) without an answer and "
        "nothing was applied for it; the answer is not recorded. Make a new request."
    )


class LateAnswers:
    """ASGI middleware (``fastapi_root_middlewares``): a late answer to an ended gate → 409."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "PATCH":
            params = answer_params(scope)
            if params is not None:
                state = await ended_gate(scope, params)
                if state is not None:
                    body = await _read_body(receive)
                    if not _only_reject(body):
                        log.info("Refused a late answer to %s: the gate ended %s", params, state)
                        response = JSONResponse({"detail": refusal(state)}, status_code=409)
                        await response(scope, receive, send)
                        return
                    # A late Reject asks for nothing to be applied, which is what happened:
                    # Airflow records it, and its list of unanswered gates is cleared.
                    receive = _replay(body, receive)
        await self.app(scope, receive, send)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed on first, whole."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _only_reject(body: bytes) -> bool:
    """Whether the answer chooses Reject and nothing else."""
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    try:
        chosen = json.loads(body).get("chosen_options")
    except (ValueError, AttributeError):
        return False
    return isinstance(chosen, list) and chosen == [ApprovalOperator.REJECT]


def answer_params(scope: Scope) -> dict[str, Any] | None:
    """The path parameters when the request is an answer to a task's HITL record, as
    Airflow's router would route it (``map_index`` an int, as FastAPI validates it)."""
    # Here, not at import: the plugin loads in every Airflow process, and importing this
    # route loads Airflow's whole public API, which only the API server has loaded already.
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail

    for route in scope["app"].routes:
        if isinstance(route, APIRoute) and route.endpoint is update_hitl_detail:
            match, child = route.matches(scope)
            if match is Match.FULL:
                params = dict(child["path_params"])
                try:
                    params["map_index"] = _MAP_INDEX.validate_python(params.get("map_index", -1))
                except ValidationError:
                    return None  # Airflow answers 422
                return params
    return None


async def ended_gate(scope: Scope, params: dict[str, Any]) -> str | None:
    """The state of the gate the request answers, when it is a cursorops gate that ended
    unanswered and the caller may write its answer; else None (Airflow decides)."""
    request = Request({**scope, "path_params": params})
    try:
        user = await get_user(request, None, await bearer_scheme(request))
    except HTTPException:
        return None
    return await run_in_threadpool(_ended_gate, request, user, params)


def _ended_gate(request: Request, user: BaseUser, params: dict[str, Any]) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from sqlalchemy.orm import joinedload

    try:
        requires_access_dag("PUT", DagAccessEntity.HITL_DETAIL)(request, user)
    except HTTPException:
        return None
    dag_id, task_id = params["dag_id"], params["task_id"]
    with create_session(scoped=False) as session:
        ti = session.scalar(
            select(TaskInstance)
            .where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == params["dag_run_id"],
                TaskInstance.task_id == task_id,
                TaskInstance.map_index == params["map_index"],
            )
            .options(joinedload(TaskInstance.hitl_detail))
        )
        if ti is None or ti.hitl_detail is None or ti.hitl_detail.response_received:
            return None
        state = None if ti.state is None else str(ti.state)
        if state not in ENDED:
            return None
        dag_bag = request.app.state.dag_bag
        dag = (
            dag_bag.get_dag(ti.dag_version_id, session)
            if ti.dag_version_id is not None
            else dag_bag.get_latest_version_of_dag(dag_id, session=session)
        )
        task = None if dag is None else dag.task_dict.get(task_id)
        if task is None or (getattr(task, "_task_module", None), task.task_type) != GATE:
            return None
        return state

"""``skipByMessageIds`` (PIP-423), ``skip/{numMessages}`` and ``skip_all`` (clear-backlog),
and ``undoSkip``, which takes an applied skip back: each one request
(``Broker.request``), applied at once, or, on a namespace that requires approval,
stored as a plan record and handed to its workflow's run as the caller (202)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Path, Query, Response
from fastapi.responses import JSONResponse

from cursorops.core.broker import PlannedRequest
from cursorops.core.gating import (
    ClearBacklog,
    GatedArguments,
    Pending,
    SkipHead,
    SkipMessages,
    UndoSkip,
)
from cursorops.core.skipping.skip_payload import parse_payload
from cursorops.rest.approval import ApprovalTextDep, waiting
from cursorops.rest.deps import BrokerDep, CallerDep, RunsDep
from cursorops.rest.limits import MAX_SKIP_IDS
from cursorops.rest.models import SkipTriggered
from cursorops.rest.paths import SUBSCRIPTION, topic_name
from cursorops.rest.topics import _ERRORS, Namespace, Subscription, Tenant, Topic
from cursorops.rest.turns import Turns

router = APIRouter(tags=["persistent topic"])

SKIPS_AT_ONCE = 8
"""Skips one process runs at once; the others wait their turn before any work. A skip
locks the cursors of the partitions it touches, and the lock holders need the CPU: many
more skips in flight than a topic's partitions can take only compete with the holders for
the process's one interpreter lock. Those in flight that need the same cursors are written
together (core/broker/combining.py), so 8 rather than 4: bigger batches, less CPU per skip
(docs/decisions/, "REST under load"). Turns are taken in the order requests came."""
_skip_turns = Turns(SKIPS_AT_ONCE)

SKIP_ID_HEADER = "X-Cursorops-Skip-Id"
"""The applied skip's id on the 204 of ``skipByMessageIds``: the id ``undoSkip`` takes."""

SKIP_BODY_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "array", "items": {"type": "string"}, "description": "base64 MessageIdData"},
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["byteArray", "messageId"]},
                "messageIds": {"type": "array"},
            },
            "required": ["messageIds"],
        },
    ]
}


@router.post(
    SUBSCRIPTION + "/skipByMessageIds",
    status_code=204,
    responses={
        **_ERRORS,
        202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
        409: {"description": "Unsupported subscription type (Exclusive, Failover)"},
        413: {"description": "Request body too large"},
    },
)
def skip_by_message_ids(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    caller: CallerDep,
    runs: RunsDep,
    body: Annotated[list[Any] | dict[str, Any], Body(json_schema_extra=SKIP_BODY_SCHEMA)],
    text: ApprovalTextDep,
    preview: Annotated[bool, Query()] = False,
) -> Response:
    """Acknowledge exactly the given messages of a Shared or Key_Shared subscription.

    Every id is checked first (all or nothing); the 204 carries the skip's id in
    ``X-Cursorops-Skip-Id``. Where the namespace requires approval, nothing is
    acknowledged: the skip is planned once and stored, its workflow started as the
    caller with the reason (``X-Cursorops-Reason`` or ``reason``, required there) and
    ticket, and the answer is 202 with the run.

    ``preview=true`` (cursorops extension): 200 with the plan the request would apply or
    send for approval (its counts, the exact backlog before and after per partition, the
    ids) and whether it waits for an approval; nothing is changed or stored.
    """
    listed = body.get("messageIds") if isinstance(body, dict) else body
    if isinstance(listed, list) and len(listed) > MAX_SKIP_IDS:
        raise HTTPException(
            413, f"Too many message ids: {len(listed)}; at most {MAX_SKIP_IDS} per call"
        )
    name = topic_name(tenant, namespace, topic)
    arguments = SkipMessages(
        topic=str(name),
        subscription=subscription,
        ids=tuple(parse_payload(body)),
        reason=text.reason,
        ticket=text.ticket,
    )
    if preview:
        return JSONResponse(
            skip_preview(broker.preview_request("skip-messages", caller, arguments))
        )
    with _skip_turns:
        result = broker.request("skip-messages", caller, arguments, runs)
    if isinstance(result, Pending):
        return waiting(result)
    # Pulsar answers 204 with no body: the skip id (what undoSkip takes) is a header.
    return Response(status_code=204, headers={SKIP_ID_HEADER: str(result.outcome["skipId"])})


def skip_preview(preview: PlannedRequest) -> dict[str, Any]:
    """A skip's preview as JSON: what it would acknowledge, with no message content (the
    ids and counts only)."""
    plan = preview.planned.plan
    document = preview.planned.document
    return {
        "operation": "skip-messages",
        "topic": plan.topic,
        "subscription": plan.subscription,
        "approvalRequired": preview.approval_required,
        "planId": plan.plan_id,
        "ids": len(plan),
        "messages": plan.messages,
        "alreadyAcknowledged": document["alreadyAcknowledged"],
        "backlog": document["backlog"],
        "messageIds": [
            {
                "messageId": item.message_id.triplet(),
                "topicPartition": item.topic_partition,
                "partition": item.partition,
                "alreadyAcknowledged": item.already_acknowledged,
            }
            for item in plan.items
        ],
    }


def _skip_head(
    broker: BrokerDep, caller: CallerDep, runs: RunsDep, arguments: GatedArguments
) -> Response:
    operation = "clear-backlog" if isinstance(arguments, ClearBacklog) else "skip-head"
    with _skip_turns:
        result = broker.request(operation, caller, arguments, runs)
    return waiting(result) if isinstance(result, Pending) else Response(status_code=204)


_HEAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
}


@router.post(SUBSCRIPTION + "/skip/{numMessages}", status_code=204, responses=_HEAD_RESPONSES)
def skip_messages_count(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    numMessages: Annotated[int, Path(ge=1, le=2**62)],  # noqa: N803  (Pulsar's name)
    broker: BrokerDep,
    caller: CallerDep,
    runs: RunsDep,
    text: ApprovalTextDep,
) -> Response:
    """Skip the first ``numMessages`` messages of each partition (a batch counts its
    messages, where Pulsar counts entries)."""
    name = str(topic_name(tenant, namespace, topic))
    arguments = SkipHead(
        topic=name,
        subscription=subscription,
        messages=numMessages,
        reason=text.reason,
        ticket=text.ticket,
    )
    return _skip_head(broker, caller, runs, arguments)


@router.post(SUBSCRIPTION + "/skip_all", status_code=204, responses=_HEAD_RESPONSES)
def skip_all_messages(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    caller: CallerDep,
    runs: RunsDep,
    text: ApprovalTextDep,
) -> Response:
    """Clear the subscription's backlog: every message unacknowledged now."""
    name = str(topic_name(tenant, namespace, topic))
    arguments = ClearBacklog(
        topic=name, subscription=subscription, reason=text.reason, ticket=text.ticket
    )
    return _skip_head(broker, caller, runs, arguments)


@router.post(
    SUBSCRIPTION + "/undoSkip/{skipId}",
    responses={
        **_ERRORS,
        202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
        404: {"description": "Topic, subscription or skip not found"},
        409: {"description": "The skip was undone already"},
    },
)
def undo_skip(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    skip_id: Annotated[int, Path(alias="skipId", ge=1, le=2**63 - 1)],
    broker: BrokerDep,
    caller: CallerDep,
    runs: RunsDep,
    text: ApprovalTextDep,
) -> Any:
    """Unacknowledge exactly what skip ``skipId`` acknowledged (those still acknowledged),
    once; the answer lists them. Needs the permission the skip needed. Every message must
    still be on a retained ledger (400 otherwise, nothing undone). Where the namespace
    requires approval, the undo is stored as a plan record and the ``cursorops_undo_skip``
    workflow started as the caller (202)."""
    name = str(topic_name(tenant, namespace, topic))
    arguments = UndoSkip(
        topic=name,
        subscription=subscription,
        skip_id=skip_id,
        reason=text.reason,
        ticket=text.ticket,
    )
    result = broker.request("undo-skip", caller, arguments, runs)
    return waiting(result) if isinstance(result, Pending) else dict(result.outcome)

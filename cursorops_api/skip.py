"""``skipByMessageIds`` (PIP-423), ``skip/{numMessages}`` and ``skip_all`` (clear-backlog),
and ``undoSkip``, which takes an applied skip back: applied at once, or, on a namespace
that requires approval, handed to the ``cursorops_skip_messages``, ``cursorops_skip_head``
or ``cursorops_undo_skip`` workflow as the caller (202)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Path, Request, Response

from core.errors import ApprovalRequiredError, InvalidArgumentError
from core.ids.topic_name import TopicName
from core.skipping.skip_payload import parse_payload
from cursorops_api.approval import (
    SKIP_DAG,
    ApprovalText,
    ApprovalTextDep,
    required_reason,
    start_workflow,
)
from cursorops_api.deps import BrokerDep, RoleDep
from cursorops_api.limits import MAX_SKIP_IDS
from cursorops_api.models import SkipTriggered
from cursorops_api.paths import SUBSCRIPTION, base_of, topic_name
from cursorops_api.topics import _ERRORS, Namespace, Subscription, Tenant, Topic
from cursorops_api.turns import Turns

router = APIRouter(tags=["persistent topic"])

SKIPS_AT_ONCE = 8
"""Skips one process runs at once; the others wait their turn before any work. A skip
locks the cursors of the partitions it touches, and the lock holders need the CPU: many
more skips in flight than a topic's partitions can take only compete with the holders for
the process's one interpreter lock. Those in flight that need the same cursors are written
together (core/broker/combining.py), so 8 rather than 4: bigger batches, less CPU per skip
(docs/decisions.md, "REST under load"). Turns are taken in the order requests came."""
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
    request: Request,
    broker: BrokerDep,
    role: RoleDep,
    body: Annotated[list[Any] | dict[str, Any], Body(json_schema_extra=SKIP_BODY_SCHEMA)],
    text: ApprovalTextDep,
) -> Response:
    """Acknowledge exactly the given messages of a Shared or Key_Shared subscription.

    Every id is checked first (all or nothing); the 204 carries the skip's id in
    ``X-Cursorops-Skip-Id``. Where the namespace requires approval, nothing is
    acknowledged: the skip workflow is triggered as the
    caller, with the reason (``X-Cursorops-Reason`` or ``reason``, required there)
    and ticket, and the answer is 202 with the run.
    """
    listed = body.get("messageIds") if isinstance(body, dict) else body
    if isinstance(listed, list) and len(listed) > MAX_SKIP_IDS:
        raise HTTPException(
            413, f"Too many message ids: {len(listed)}; at most {MAX_SKIP_IDS} per call"
        )
    ids = parse_payload(body)
    name = topic_name(tenant, namespace, topic)
    try:
        # The one skip path: authorized, validated and applied with its audit record.
        with _skip_turns:
            outcome = broker.skip_messages(role, name, subscription, ids, via="rest")
    except ApprovalRequiredError:
        pass
    else:
        # Pulsar answers 204 with no body: the skip id (what undoSkip takes) is a header.
        return Response(status_code=204, headers={SKIP_ID_HEADER: str(outcome.skip_id)})
    # A namespace that requires approval: the ids are checked now (all or nothing), and the
    # workflow is started as the caller.
    base = base_of(name)
    plan = broker.plan_skip(role, base, subscription, ids)
    if name.is_partition:
        plan.check_only_on(str(name))
    conf = {
        "topic": base,
        "subscription": subscription,
        # Ledger ids are unique across the store, so a triplet names its partition.
        "message_ids": [m.triplet() for m in ids],
    }
    return start_workflow(request, name, text, "Skips", SKIP_DAG, conf)


HEAD_DAG = "cursorops_skip_head"


def _skip_head(
    name: TopicName,
    subscription: str,
    limit: int | None,
    request: Request,
    broker: BrokerDep,
    role: str,
    text: ApprovalText,
) -> Response:
    try:
        # Authorized, chosen and applied with its audit record, in one call.
        with _skip_turns:
            broker.skip_head(role, name, subscription, limit, via="rest")
    except ApprovalRequiredError:
        pass
    else:
        return Response(status_code=204)
    plan = broker.plan_skip_head(role, name, subscription, limit)
    required_reason(name.namespace_name, text.reason, "Skips")
    if not len(plan):
        raise InvalidArgumentError(
            f"Subscription {subscription} of {name} has no backlog: nothing to skip"
        )
    conf = {"topic": str(name), "subscription": subscription, "messages": limit}
    return start_workflow(request, name, text, "Skips", HEAD_DAG, conf)


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
    request: Request,
    broker: BrokerDep,
    role: RoleDep,
    text: ApprovalTextDep,
) -> Response:
    """Skip the first ``numMessages`` messages of each partition (a batch counts its
    messages, where Pulsar counts entries)."""
    return _skip_head(
        topic_name(tenant, namespace, topic),
        subscription,
        numMessages,
        request,
        broker,
        role,
        text,
    )


@router.post(SUBSCRIPTION + "/skip_all", status_code=204, responses=_HEAD_RESPONSES)
def skip_all_messages(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    request: Request,
    broker: BrokerDep,
    role: RoleDep,
    text: ApprovalTextDep,
) -> Response:
    """Clear the subscription's backlog: every message unacknowledged now."""
    return _skip_head(
        topic_name(tenant, namespace, topic),
        subscription,
        None,
        request,
        broker,
        role,
        text,
    )


UNDO_DAG = "cursorops_undo_skip"


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
    request: Request,
    broker: BrokerDep,
    role: RoleDep,
    text: ApprovalTextDep,
) -> Any:
    """Unacknowledge exactly what skip ``skipId`` acknowledged (those still acknowledged),
    once; the answer lists them. Needs the permission the skip needed. Every message must
    still be on a retained ledger (400 otherwise, nothing undone). Where the namespace
    requires approval, the ``cursorops_undo_skip`` workflow is started as the caller (202)."""
    name = topic_name(tenant, namespace, topic)
    plan = broker.plan_undo_skip(role, str(name), subscription, skip_id)
    try:
        return broker.apply_undo_skip(role, plan, via="rest").to_json()
    except ApprovalRequiredError:
        pass
    conf = {"topic": str(name), "subscription": subscription, "skip_id": skip_id}
    return start_workflow(
        request, name, text, "Undoing skips", UNDO_DAG, conf, gate="approve_undo_skip"
    )

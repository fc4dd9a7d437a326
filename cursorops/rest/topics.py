"""Pulsar admin v2 routes of one persistent topic and its subscriptions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Response

from cursorops.core.domain.authz import Operation
from cursorops.rest.deps import BrokerDep, RoleDep
from cursorops.rest.paths import SUBSCRIPTION, TOPIC, topic_name
from cursorops.rest.results import message_response

router = APIRouter(tags=["persistent topic"])

_INT64_MAX = 2**63 - 1
MAX_PEEK_POSITION = 100_000
"""Peeking the n-th message reads the n before it: n is capped."""

Tenant = Annotated[str, Path(min_length=1)]
Namespace = Annotated[str, Path(min_length=1)]
Topic = Annotated[str, Path(min_length=1)]
Subscription = Annotated[str, Path(min_length=1)]

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Topic or subscription not found"},
    503: {"description": "The stores failed"},
}


def _not_partitioned(broker: BrokerDep, role: str, name: str, what: str) -> None:
    """Pulsar refuses some reads on a partitioned topic as a whole: 405."""
    info = broker.access.authorized_topic(role, Operation.PEEK_MESSAGES, name)
    if info.partitions:
        raise HTTPException(
            405,
            f"{what} on a partitioned topic is not allowed: name one partition "
            f"('{info.name}-partition-0')",
        )


@router.get(TOPIC + "/subscriptions", responses=_ERRORS)
def subscriptions(
    tenant: Tenant, namespace: Namespace, topic: Topic, broker: BrokerDep, role: RoleDep
) -> list[str]:
    """The names of the topic's subscriptions."""
    name = topic_name(tenant, namespace, topic)
    return [sub.name for sub in broker.admin.list_subscriptions(role, str(name))]


@router.get(
    SUBSCRIPTION + "/position/{message_position}",
    response_class=Response,
    responses={
        **_ERRORS,
        200: {"content": {"application/octet-stream": {}}, "description": "The message"},
        405: {"description": "Peek on a partitioned topic as a whole"},
    },
)
def peek_nth_message(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    message_position: Annotated[int, Path(ge=1, le=MAX_PEEK_POSITION)],
) -> Response:
    """The ``message_position``-th unacknowledged message (1-based), delayed ones included."""
    name = topic_name(tenant, namespace, topic)
    if not name.is_partition:
        _not_partitioned(broker, role, str(name), "Peek messages")
    messages = broker.reading.peek_messages(role, str(name), subscription, message_position)
    if len(messages) < message_position:
        raise HTTPException(404, f"Message not found: the backlog has {len(messages)} messages")
    return message_response(messages[-1])


@router.get(
    TOPIC + "/examinemessage",
    response_class=Response,
    responses={
        **_ERRORS,
        200: {"content": {"application/octet-stream": {}}, "description": "The message"},
        405: {"description": "Examine on a partitioned topic as a whole"},
    },
)
def examine_message(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    initial_position: Annotated[
        Literal["earliest", "latest"], Query(alias="initialPosition")
    ] = "latest",
    message_position: Annotated[int, Query(alias="messagePosition", ge=1, le=_INT64_MAX)] = 1,
) -> Response:
    """The ``messagePosition``-th entry from the earliest or latest one, acknowledged or
    not; its first message, and its batch size in ``X-Pulsar-num-batch-message``."""
    name = topic_name(tenant, namespace, topic)
    if not name.is_partition:
        _not_partitioned(broker, role, str(name), "Examine messages")
    message = broker.reading.examine_message(role, str(name), initial_position, message_position)
    return message_response(message)

"""Pulsar admin v2 routes of one persistent topic and its subscriptions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException, Path, Query, Response

from cursorops.core.authz import Operation
from cursorops.core.errors import InvalidArgumentError, TopicNotFoundError
from cursorops.core.gating import Pending, Unsubscribe
from cursorops.core.ids.position import Position
from cursorops.core.subscription import SubscriptionType
from cursorops.rest.approval import ApprovalTextDep, waiting
from cursorops.rest.deps import BrokerDep, CallerDep, RoleDep, RunsDep
from cursorops.rest.models import MessageIdBody, SkipTriggered
from cursorops.rest.paths import SUBSCRIPTION, TOPIC, base_of, topic_name
from cursorops.rest.results import message_response, pulsar_json

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
    info = broker.authorized_topic(role, Operation.PEEK_MESSAGES, name)
    if info.partitions:
        raise HTTPException(
            405,
            f"{what} on a partitioned topic is not allowed: name one partition "
            f"('{info.name}-partition-0')",
        )


_DELETE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    412: {"description": "Topic has active producers/subscriptions"},
}


@router.delete(TOPIC, status_code=204, responses=_DELETE_RESPONSES)
def delete_topic(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    force: bool = False,
) -> Response:
    """Delete a non-partitioned topic with its subscriptions and messages (tenant admins);
    412 while consumers are connected unless ``force``. Where the namespace requires
    approval, 403 while it has subscriptions: each is unsubscribed through its workflow
    first."""
    name = topic_name(tenant, namespace, topic)
    broker.delete_topic(role, name, partitioned=False, force=force, via="rest")
    return Response(status_code=204)


@router.delete(TOPIC + "/partitions", status_code=204, responses=_DELETE_RESPONSES)
def delete_partitioned_topic(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    force: bool = False,
) -> Response:
    """Delete a partitioned topic, every partition, as :func:`delete_topic` does."""
    name = topic_name(tenant, namespace, topic)
    broker.delete_topic(role, name, partitioned=True, force=force, via="rest")
    return Response(status_code=204)


@router.get(TOPIC + "/partitions", responses=_ERRORS)
def partitioned_metadata(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    checkAllowAutoCreation: bool = False,  # noqa: N803 (Pulsar's query parameter)
) -> dict[str, int]:
    """The topic's partition count (0: not partitioned). With ``checkAllowAutoCreation``
    (a client's HTTP lookup) a missing topic is 0 as well: it is created on first use."""
    name = topic_name(tenant, namespace, topic)
    try:
        info = broker.authorized_topic(role, Operation.LOOKUP, base_of(name))
    except TopicNotFoundError:
        if checkAllowAutoCreation:
            return {"partitions": 0}
        raise
    return {"partitions": info.partitions}


@router.get(TOPIC + "/stats", responses=_ERRORS)
def stats(
    tenant: Tenant, namespace: Namespace, topic: Topic, broker: BrokerDep, role: RoleDep
) -> dict[str, Any]:
    """Topic (or one partition's) stats; each subscription's ``msgBacklog`` is exact, in
    messages."""
    name = topic_name(tenant, namespace, topic)
    result: dict[str, Any] = pulsar_json(broker.topic_stats(role, str(name)))
    return result


@router.get(TOPIC + "/partitioned-stats", responses=_ERRORS)
def partitioned_stats(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    broker: BrokerDep,
    role: RoleDep,
    per_partition: Annotated[bool, Query(alias="perPartition")] = True,
) -> dict[str, Any]:
    """The whole partitioned topic's stats, and each partition's (``perPartition``)."""
    name = topic_name(tenant, namespace, topic)
    if name.is_partition:
        raise InvalidArgumentError(f"'{name}' names a partition; give the topic '{name.base}'")
    whole: dict[str, Any] = pulsar_json(broker.topic_stats(role, str(name)))
    count = int(whole.get("partitions") or 0)
    if count == 0:
        raise TopicNotFoundError(f"Partitioned Topic not found: {name} has zero partitions")
    out = {**whole, "metadata": {"partitions": count}, "partitions": {}}
    if per_partition:
        out["partitions"] = {
            str(name.partition(i)): pulsar_json(broker.topic_stats(role, str(name.partition(i))))
            for i in range(count)
        }
    return out


@router.get(TOPIC + "/subscriptions", responses=_ERRORS)
def subscriptions(
    tenant: Tenant, namespace: Namespace, topic: Topic, broker: BrokerDep, role: RoleDep
) -> list[str]:
    """The names of the topic's subscriptions."""
    name = topic_name(tenant, namespace, topic)
    return [sub.name for sub in broker.list_subscriptions(role, str(name))]


@router.put(
    SUBSCRIPTION,
    status_code=204,
    responses={**_ERRORS, 409: {"description": "Subscription already exists"}},
)
def create_subscription(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    start: Annotated[MessageIdBody | None, Body()] = None,
    replicated: bool = False,
    subscription_type: Annotated[
        Literal["Exclusive", "Shared", "Failover", "Key_Shared"], Query(alias="subscriptionType")
    ] = "Exclusive",
) -> Response:
    """Create a subscription at latest (no body), or at a message id (Pulsar's
    ``MessageIdImpl``: ``(-1,-1)`` earliest, ``(2^63-1, 2^63-1)`` latest). Where the
    namespace requires approval, a name with history comes back at latest only (403)."""
    if replicated:
        raise InvalidArgumentError("Replicated subscriptions are not supported: one cluster")
    position: str | Position = "latest"
    if start is not None:
        pair = (start.ledger_id, start.entry_id)
        if pair == (-1, -1):
            position = "earliest"
        elif pair != (_INT64_MAX, _INT64_MAX):
            if start.ledger_id < 0 or start.entry_id < 0:
                raise InvalidArgumentError(
                    f"Invalid message id {start.ledger_id}:{start.entry_id}: "
                    "(-1, -1) is earliest, otherwise both must be >= 0"
                )
            position = Position(start.ledger_id, start.entry_id)
    name = topic_name(tenant, namespace, topic)
    broker.create_subscription(
        role,
        str(name),
        subscription,
        SubscriptionType(subscription_type),
        initial_position=position,
    )
    return Response(status_code=204)


@router.delete(
    SUBSCRIPTION,
    status_code=204,
    responses={
        **_ERRORS,
        202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
        412: {"description": "Subscription has active connected consumers"},
    },
)
def delete_subscription(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    caller: CallerDep,
    runs: RunsDep,
    text: ApprovalTextDep,
    force: bool = False,
) -> Response:
    """Unsubscribe; refused (412) while consumers are connected, unless ``force``. Where
    the namespace requires approval, the unsubscribe is stored as a plan record and the
    ``cursorops_unsubscribe`` workflow started as the caller (202), with the reason."""
    name = str(topic_name(tenant, namespace, topic))
    arguments = Unsubscribe(
        topic=name, subscription=subscription, force=force, reason=text.reason, ticket=text.ticket
    )
    result = broker.request("unsubscribe", caller, arguments, runs)
    return waiting(result) if isinstance(result, Pending) else Response(status_code=204)


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
    messages = broker.peek_messages(role, str(name), subscription, message_position)
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
    message = broker.examine_message(role, str(name), initial_position, message_position)
    return message_response(message)

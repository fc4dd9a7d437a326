"""Topics and their subscriptions: create, list, delete, stats, subscribe, unsubscribe and
peek, on Pulsar's admin v2 paths where Pulsar has one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cursorops.operations.declaration import (
    NAMESPACE,
    SUBSCRIPTION,
    SUBSCRIPTION_PATH,
    TOPIC,
    TOPIC_PATH,
    Call,
    Param,
    operation,
)

if TYPE_CHECKING:
    from cursorops.core.domain.ids.position import Position
    from cursorops.core.services.gating import Pending

INT64_MAX = 2**63 - 1
MAX_PEEK = 100_000
"""Peeking n messages reads the n first of the backlog: n is capped."""
LIST_PATH = "/admin/v2/persistent/{tenant}/{namespace}"
FORCE = Param(
    "force",
    where="query",
    kind=bool,
    flags=("-f", "--force"),
    default=False,
    help="delete even while consumers are connected",
)


def _topic(values: Mapping[str, Any]) -> str:
    """The command's topic, as the broker names it (``persistent://...``)."""
    from cursorops.core.domain.ids.topic_name import TopicName

    return str(TopicName.parse(values["topic"]))


# -- topics ----------------------------------------------------------------------


@operation(
    "topics",
    "create",
    method="PUT",
    path=TOPIC_PATH,
    params=(TOPIC,),
    help="create a non-partitioned topic",
    status=204,
    responses={409: "This topic already exists"},
    render=lambda _, v: [f"Created topic {_topic(v)}"],
    document=lambda _, v: {"topic": _topic(v), "partitions": 0},
)
def create_topic(call: Call, topic: str) -> None:
    """Create a non-partitioned topic (tenant admins). Pulsar's optional properties body
    is not read."""
    call.broker.admin.create_topic(call.role, topic, 0)


@operation(
    "topics",
    "create-partitioned-topic",
    method="PUT",
    path=TOPIC_PATH + "/partitions",
    params=(
        TOPIC,
        Param(
            "partitions",
            where="body",
            kind=int,
            flags=("-p", "--partitions"),
            whole_body=True,
            help="number of partitions",
        ),
    ),
    help="create a partitioned topic",
    status=204,
    responses={409: "This topic already exists"},
    render=lambda _, v: [
        f"Created partitioned topic {_topic(v)} with {v['partitions']} partitions"
    ],
    document=lambda _, v: {"topic": _topic(v), "partitions": v["partitions"]},
)
def create_partitioned_topic(call: Call, topic: str, partitions: int) -> None:
    """Create a partitioned topic of ``partitions`` partitions, the body a bare number as
    in Pulsar (tenant admins)."""
    from cursorops.core.domain.errors import InvalidArgumentError

    if partitions < 1:
        raise InvalidArgumentError(f"Invalid number of partitions {partitions}: must be at least 1")
    call.broker.admin.create_topic(call.role, topic, partitions)


def _listed(names: list[str]) -> list[tuple[str, int]]:
    """Pulsar's list (each partition, each non-partitioned topic) → each topic once, with
    its partition count (0: not partitioned), in the list's order."""
    from cursorops.core.domain.ids.topic_name import TopicName

    counts: dict[str, int] = {}
    for text in names:
        name = TopicName.parse(text)
        if name.is_partition:
            base = str(name.base)
            counts[base] = counts.get(base, 0) + 1
        else:
            counts.setdefault(str(name), 0)
    return list(counts.items())


@operation(
    "topics",
    "list",
    method="GET",
    path=LIST_PATH,
    params=(NAMESPACE,),
    help="list the topics of TENANT/NAMESPACE",
    render=lambda answer, _: [name for name, _ in _listed(answer)],
    document=lambda answer, _: [
        {"topic": name, "partitions": count} for name, count in _listed(answer)
    ],
)
def list_topics(call: Call, namespace: str) -> list[str]:
    """The namespace's topics as Pulsar lists them: each partition of a partitioned topic,
    and each non-partitioned topic (the CLI prints each topic once)."""
    return [
        name
        for info in call.broker.admin.list_topics(call.role, namespace)
        for name in info.partition_names()
    ]


@operation(
    "topics",
    "list-partitioned-topics",
    method="GET",
    path=LIST_PATH + "/partitioned",
    params=(NAMESPACE,),
    help="list the partitioned topics of TENANT/NAMESPACE",
)
def list_partitioned_topics(call: Call, namespace: str) -> list[str]:
    """The namespace's partitioned topics."""
    return [
        info.name for info in call.broker.admin.list_topics(call.role, namespace) if info.partitions
    ]


_DELETED = {412: "Topic has active producers/subscriptions"}


@operation(
    "topics",
    "delete",
    method="DELETE",
    path=TOPIC_PATH,
    params=(TOPIC, FORCE),
    help="delete a non-partitioned topic with its subscriptions and messages (tenant admins)",
    responses=_DELETED,
    render=lambda _, v: [f"Deleted topic {_topic(v)}"],
    document=lambda _, v: {"topic": _topic(v), "deleted": True},
)
def delete_topic(call: Call, topic: str, force: bool) -> None:
    """Delete a non-partitioned topic with its subscriptions and messages (tenant admins);
    412 while consumers are connected unless ``force``. Where the namespace requires
    approval, 403 while it has subscriptions: each is unsubscribed through its workflow
    first."""
    call.broker.deletion.delete_topic(
        call.role, topic, partitioned=False, force=force, via=call.caller.via
    )


@operation(
    "topics",
    "delete-partitioned-topic",
    method="DELETE",
    path=TOPIC_PATH + "/partitions",
    params=(TOPIC, FORCE),
    help="delete a partitioned topic with its subscriptions and messages (tenant admins)",
    responses=_DELETED,
    render=lambda _, v: [f"Deleted partitioned topic {_topic(v)}"],
    document=lambda _, v: {"topic": _topic(v), "deleted": True},
)
def delete_partitioned_topic(call: Call, topic: str, force: bool) -> None:
    """Delete a partitioned topic, every partition, as ``topics delete`` does."""
    call.broker.deletion.delete_topic(
        call.role, topic, partitioned=True, force=force, via=call.caller.via
    )


@operation(
    "topics",
    "get-partitioned-topic-metadata",
    method="GET",
    path=TOPIC_PATH + "/partitions",
    params=(
        TOPIC,
        Param(
            "check_auto_creation",
            where="query",
            kind=bool,
            wire="checkAllowAutoCreation",
            default=False,
            cli=False,
        ),
    ),
    help="the topic's partition count (0: not partitioned)",
)
def partitioned_metadata(call: Call, topic: str, check_auto_creation: bool) -> dict[str, int]:
    """The topic's partition count (0: not partitioned). With ``checkAllowAutoCreation``
    (a client's HTTP lookup) a missing topic is 0 as well: it is created on first use."""
    from cursorops.core.domain.authz import Operation
    from cursorops.core.domain.errors import TopicNotFoundError
    from cursorops.core.domain.ids.topic_name import TopicName

    name = TopicName.parse(topic)
    base = str(name.base) if name.is_partition else str(name)
    try:
        info = call.broker.access.authorized_topic(call.role, Operation.LOOKUP, base)
    except TopicNotFoundError:
        if check_auto_creation:
            return {"partitions": 0}
        raise
    return {"partitions": info.partitions}


# -- stats -----------------------------------------------------------------------


def _stats_lines(answer: Any, _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import stats_lines

    return stats_lines(answer)


@operation(
    "topics",
    "stats",
    method="GET",
    path=TOPIC_PATH + "/stats",
    params=(TOPIC,),
    help="topic stats (of one partition given its name); msgBacklog is exact messages",
    render=_stats_lines,
)
def stats(call: Call, topic: str) -> dict[str, Any]:
    """Topic (or one partition's) stats; each subscription's ``msgBacklog`` is exact, in
    messages."""
    found: dict[str, Any] = call.broker.analysis.topic_stats(call.role, topic).to_pulsar_json()
    return found


@operation(
    "topics",
    "partitioned-stats",
    method="GET",
    path=TOPIC_PATH + "/partitioned-stats",
    params=(
        TOPIC,
        Param(
            "per_partition", where="query", kind=bool, wire="perPartition", default=True, cli=False
        ),
        Param(
            "each_partition",
            where="query",
            kind=bool,
            flags=("--per-partition",),
            default=False,
            help="also each partition's stats",
            sent_as=lambda each, _: {"perPartition": each},
        ),
    ),
    help="a partitioned topic's stats, the sum over its partitions",
)
def partitioned_stats(call: Call, topic: str, per_partition: bool) -> dict[str, Any]:
    """The whole partitioned topic's stats, and each partition's (``perPartition``)."""
    from cursorops.core.domain.errors import InvalidArgumentError, TopicNotFoundError
    from cursorops.core.domain.ids.topic_name import TopicName

    name = TopicName.parse(topic)
    if name.is_partition:
        raise InvalidArgumentError(f"'{name}' names a partition; give the topic '{name.base}'")
    whole: dict[str, Any] = call.broker.analysis.topic_stats(call.role, str(name)).to_pulsar_json()
    count = int(whole.get("partitions") or 0)
    if count == 0:
        raise TopicNotFoundError(f"Partitioned Topic not found: {name} has zero partitions")
    out = {**whole, "metadata": {"partitions": count}, "partitions": {}}
    if per_partition:
        out["partitions"] = {
            str(name.partition(i)): call.broker.analysis.topic_stats(
                call.role, str(name.partition(i))
            ).to_pulsar_json()
            for i in range(count)
        }
    return out


# -- subscriptions ---------------------------------------------------------------


@operation(
    "topics",
    "subscriptions",
    method="GET",
    path=TOPIC_PATH + "/subscriptionDetails",
    params=(TOPIC,),
    help="list a topic's subscriptions",
    render=lambda answer, _: (
        [f"{s['subscription']}  ({s['type']})" for s in answer] or ["No subscriptions"]
    ),
)
def subscription_details(call: Call, topic: str) -> list[dict[str, Any]]:
    """The topic's subscriptions with their type and properties (Pulsar's
    ``/subscriptions`` lists their names only). A partition's are its topic's."""
    from cursorops.core.domain.ids.topic_name import TopicName

    name = TopicName.parse(topic)
    return [
        {"subscription": s.name, "type": s.type.value, "properties": dict(s.properties)}
        for s in call.broker.admin.list_subscriptions(call.role, str(name.base))
    ]


def _type_value(text: str) -> str:
    from cursorops.core.domain.subscription import SubscriptionType

    return SubscriptionType.parse(text).value


def _start(values: Mapping[str, Any]) -> str | Position:
    """The CLI's ``--messageId``: latest, earliest or the entry it names."""
    from cursorops.cli.values import parse_position
    from cursorops.core.domain.ids.topic_name import TopicName

    text = str(values["message_id"])
    named = text.strip().lower()
    if named in ("latest", "earliest"):
        return named
    return parse_position(text, "--messageId", TopicName.parse(values["topic"]).partition_index)


def _start_fields(_: object, values: Mapping[str, Any]) -> dict[str, Any]:
    start = _start(values)
    if start == "latest":
        return {}
    if start == "earliest":
        return {"ledgerId": -1, "entryId": -1}
    assert not isinstance(start, str)
    return {"ledgerId": start.ledger_id, "entryId": start.entry_id}


def _created(values: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "topic": _topic(values),
        "subscription": values["subscription"],
        "type": _type_value(values["type"]),
        "initialPosition": str(_start(values)),
        "properties": dict(values["properties"]),
    }


def _created_lines(_: Any, values: Mapping[str, Any]) -> list[str]:
    c = _created(values)
    return [
        f"Created {c['type']} subscription {c['subscription']} on {c['topic']} "
        f"at {c['initialPosition']}"
    ]


@operation(
    "topics",
    "create-subscription",
    method="PUT",
    path=SUBSCRIPTION_PATH,
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "type",
            where="query",
            flags=("--type",),
            default="Exclusive",
            help="Exclusive (default), Shared, Failover or Key_Shared",
            sent_as=lambda text, _: {"subscriptionType": _type_value(text)},
        ),
        Param(
            "subscription_type",
            where="query",
            wire="subscriptionType",
            default="Exclusive",
            choices=("Exclusive", "Shared", "Failover", "Key_Shared"),
            cli=False,
        ),
        Param("replicated", where="query", kind=bool, default=False, cli=False),
        Param(
            "message_id",
            where="body",
            flags=("-m", "--messageId"),
            default="latest",
            help="initial position: latest (default, as pulsar-admin), earliest, or "
            "ledgerId:entryId (or any message id form naming a whole entry), the first entry "
            "delivered (non-partitioned topics)",
            sent_as=_start_fields,
        ),
        Param("ledger_id", where="body", kind=int, wire="ledgerId", default=None, cli=False),
        Param("entry_id", where="body", kind=int, wire="entryId", default=None, cli=False),
        Param(
            "partition_index",
            where="body",
            kind=int,
            wire="partitionIndex",
            default=None,
            cli=False,
        ),
        Param("batch_index", where="body", kind=int, wire="batchIndex", default=None, cli=False),
        Param("excluded", where="body", kind=bool, wire="isExcluded", default=False, cli=False),
        Param(
            "properties",
            where="body",
            kind=dict,
            flags=("-p", "--property"),
            default={},
            help="subscription property; repeatable",
            limit=1024,
        ),
    ),
    help="create a subscription",
    status=204,
    responses={409: "Subscription already exists"},
    render=_created_lines,
    document=lambda _, v: _created(v),
)
def create_subscription(
    call: Call,
    topic: str,
    subscription: str,
    subscription_type: str,
    replicated: bool,
    ledger_id: int | None,
    entry_id: int | None,
    partition_index: int | None,
    batch_index: int | None,
    excluded: bool,
    properties: dict[str, str],
) -> None:
    """Create a subscription at latest (no body), or at a message id (Pulsar's
    ``ResetCursorData``: ``(-1,-1)`` earliest, ``(2^63-1, 2^63-1)`` latest, a whole
    entry), with its ``properties``. Where the namespace requires approval, a name with
    history comes back at latest only (403)."""
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.domain.ids.position import Position
    from cursorops.core.domain.subscription import SubscriptionType

    if replicated:
        raise InvalidArgumentError("Replicated subscriptions are not supported: one cluster")
    position: str | Position = "latest"
    if (ledger_id is None) != (entry_id is None):
        raise InvalidArgumentError("A message id needs both ledgerId and entryId")
    if ledger_id is not None and entry_id is not None:
        pair = (ledger_id, entry_id)
        if pair == (-1, -1):
            position = "earliest"
        elif pair != (INT64_MAX, INT64_MAX):
            if not (0 <= ledger_id <= INT64_MAX and 0 <= entry_id <= INT64_MAX):
                raise InvalidArgumentError(
                    f"Invalid message id {ledger_id}:{entry_id}: "
                    "(-1, -1) is earliest, otherwise both must be >= 0"
                )
            position = Position(ledger_id, entry_id)
    if partition_index is not None and not -1 <= partition_index < 2**31:
        raise InvalidArgumentError(f"Invalid partitionIndex {partition_index}")
    if batch_index not in (None, -1) or excluded:
        raise InvalidArgumentError(
            "A subscription starts at a whole entry: batchIndex must be -1 and isExcluded false"
        )
    call.broker.admin.create_subscription(
        call.role,
        topic,
        subscription,
        SubscriptionType(subscription_type),
        properties,
        initial_position=position,
    )


def _unsubscribed(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"topic": _topic(values), "subscription": values["subscription"], "deleted": True}


@operation(
    "topics",
    "unsubscribe",
    method="DELETE",
    path=SUBSCRIPTION_PATH,
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "force",
            where="query",
            kind=bool,
            flags=("-f", "--force"),
            default=False,
            help="delete even while consumers are connected (as pulsar-admin's -f)",
        ),
    ),
    help="delete a subscription and its cursor",
    gated=True,
    responses={412: "Subscription has active connected consumers"},
    render=lambda _, v: [f"Deleted subscription {v['subscription']} of {_topic(v)}"],
    document=lambda _, v: _unsubscribed(v),
)
def unsubscribe(call: Call, topic: str, subscription: str, force: bool) -> Pending | None:
    """Unsubscribe; refused (412) while consumers are connected, unless ``force``. Where
    the namespace requires approval, the unsubscribe is stored as a plan record and the
    ``cursorops_unsubscribe`` workflow started as the caller (202), with the reason."""
    from cursorops.core.services.gating import Pending, Unsubscribe

    arguments = Unsubscribe(
        topic=topic, subscription=subscription, force=force, reason=call.reason, ticket=call.ticket
    )
    result = call.broker.request("unsubscribe", call.caller, arguments, call.runs)
    return result if isinstance(result, Pending) else None


def _only_clear(clear: bool, values: Mapping[str, Any]) -> dict[str, Any]:
    from cursorops.core.domain.errors import InvalidArgumentError

    if clear == bool(values["properties"]):
        raise InvalidArgumentError("Give either -p/--property KEY=VALUE (repeatable) or --clear")
    return {}


def _properties_lines(_: Any, v: Mapping[str, Any]) -> list[str]:
    shown = ", ".join(f"{k}={x}" for k, x in sorted(v["properties"].items())) or "none"
    return [f"Subscription {v['subscription']} of {_topic(v)} now has properties: {shown}"]


@operation(
    "topics",
    "update-subscription-properties",
    method="PUT",
    path=SUBSCRIPTION_PATH + "/properties",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "properties",
            where="body",
            kind=dict,
            flags=("-p", "--property"),
            whole_body=True,
            default={},
            help="the new properties, replacing all old ones; repeatable",
            limit=1024,
        ),
        Param(
            "clear",
            where="body",
            kind=bool,
            flags=("-c", "--clear"),
            default=False,
            help="remove every property",
            sent_as=_only_clear,
        ),
    ),
    help="replace a subscription's properties (entry filters are validated)",
    status=204,
    render=_properties_lines,
    document=lambda _, v: {
        "topic": _topic(v),
        "subscription": v["subscription"],
        "properties": dict(v["properties"]),
    },
)
def update_subscription_properties(
    call: Call, topic: str, subscription: str, properties: dict[str, str]
) -> None:
    """Replace the subscription's properties with the body's (a JSON object of strings;
    ``{}`` removes them all). Entry filter properties are validated first."""
    call.broker.admin.update_subscription_properties(call.role, topic, subscription, properties)


# -- messages --------------------------------------------------------------------


def _peek_lines(answer: Any, _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import message_line

    return [message_line(doc) for doc in answer] or ["No unacknowledged messages"]


@operation(
    "topics",
    "peek-messages",
    method="GET",
    path=SUBSCRIPTION_PATH + "/peekMessages",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "count",
            kind=int,
            flags=("-n", "--count"),
            default=1,
            help="messages to peek (default 1)",
        ),
    ),
    help="show the next unacknowledged messages",
    render=_peek_lines,
)
def peek_messages(call: Call, topic: str, subscription: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` unacknowledged messages (delayed ones included), a chunked
    message once; each as JSON, its payload as text or base64 (Pulsar's
    ``/position/{n}`` answers one message's bytes)."""
    from cursorops.cli import output
    from cursorops.core.domain.errors import InvalidArgumentError

    if not 1 <= count <= MAX_PEEK:
        raise InvalidArgumentError(f"Invalid count {count}: must be between 1 and {MAX_PEEK:,}")
    messages = call.broker.reading.peek_messages(call.role, topic, subscription, count)
    return [output.message_json(m) for m in output.whole_messages(messages)]

"""Policies of a namespace and of a topic: deduplication and the schema compatibility
strategy, and topic compaction, on Pulsar's admin v2 paths.

A boolean policy's POST body is a bare boolean, as Pulsar's; a GET answers the policy
set there, ``null`` when none is (the broker's default applies).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import (
    NAMESPACE,
    TOPIC,
    TOPIC_PATH,
    Call,
    Param,
    base_topic,
    operation,
)

NAMESPACE_PATH = "/admin/v2/namespaces/{tenant}/{namespace}"
STRATEGIES = (
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)

_ENABLED = Param(
    "enabled",
    where="body",
    kind=bool,
    whole_body=True,
    flags=("--enable", "-e"),
    negation=("--disable", "-d"),
    help="turn deduplication on (--disable: off)",
)


def _policy_line(what: str) -> Any:
    def lines(answer: Any, values: Mapping[str, Any]) -> list[str]:
        subject = values.get("namespace") or values.get("topic")
        if answer is None:
            return [f"{what} of {subject}: not set (the default applies)"]
        return [f"{what} of {subject}: {'enabled' if answer is True else answer}"]

    return lines


# -- deduplication ------------------------------------------------------------------


@operation(
    "namespaces",
    "get-deduplication",
    method="GET",
    path=NAMESPACE_PATH + "/deduplication",
    params=(NAMESPACE,),
    help="the namespace's deduplication policy (tenant admins)",
    render=_policy_line("Deduplication"),
)
def namespace_deduplication(call: Call, namespace: str) -> bool | None:
    """The namespace's deduplication policy (tenant admins); ``null`` when none is set."""
    return call.broker.policies.deduplication_policy(call.role, namespace)


@operation(
    "namespaces",
    "set-deduplication",
    method="POST",
    path=NAMESPACE_PATH + "/deduplication",
    params=(NAMESPACE, _ENABLED),
    help="turn deduplication on or off for the namespace's topics (tenant admins)",
    render=lambda _, v: [
        f"Deduplication on {v['namespace']} {'enabled' if v['enabled'] else 'disabled'}"
    ],
    document=lambda _, v: {"namespace": v["namespace"], "deduplicationEnabled": v["enabled"]},
)
def set_namespace_deduplication(call: Call, namespace: str, enabled: bool) -> None:
    """Turn deduplication on or off for the namespace's topics (tenant admins)."""
    call.broker.policies.set_deduplication(call.role, namespace, enabled)


@operation(
    "namespaces",
    "remove-deduplication",
    method="DELETE",
    path=NAMESPACE_PATH + "/deduplication",
    params=(NAMESPACE,),
    help="remove the namespace's deduplication policy (the broker's default, off, applies)",
    render=lambda _, v: [f"Deduplication policy of {v['namespace']} removed"],
    document=lambda _, v: {"namespace": v["namespace"], "deduplicationEnabled": None},
)
def remove_namespace_deduplication(call: Call, namespace: str) -> None:
    """Back to the broker's default."""
    call.broker.policies.set_deduplication(call.role, namespace, None)


@operation(
    "topics",
    "get-deduplication",
    method="GET",
    path=TOPIC_PATH + "/deduplicationEnabled",
    params=(TOPIC,),
    help="the topic's own deduplication policy",
    render=_policy_line("Deduplication"),
)
def topic_deduplication(call: Call, topic: str) -> bool | None:
    """The topic's own deduplication policy (a partition answers for its topic); ``null``
    when none is set (its namespace's applies)."""
    return call.broker.policies.deduplication_policy(call.role, base_topic(topic))


@operation(
    "topics",
    "set-deduplication",
    method="POST",
    path=TOPIC_PATH + "/deduplicationEnabled",
    params=(TOPIC, _ENABLED),
    help="turn deduplication on or off for the topic, over its namespace's policy",
    render=lambda _, v: [
        f"Deduplication on {v['topic']} {'enabled' if v['enabled'] else 'disabled'}"
    ],
    document=lambda _, v: {"topic": v["topic"], "deduplicationEnabled": v["enabled"]},
)
def set_topic_deduplication(call: Call, topic: str, enabled: bool) -> None:
    """Turn deduplication on or off for the topic, over its namespace's policy."""
    call.broker.policies.set_deduplication(call.role, base_topic(topic), enabled)


@operation(
    "topics",
    "remove-deduplication",
    method="DELETE",
    path=TOPIC_PATH + "/deduplicationEnabled",
    params=(TOPIC,),
    help="remove the topic's deduplication policy (its namespace's applies)",
    render=lambda _, v: [f"Deduplication policy of {v['topic']} removed"],
    document=lambda _, v: {"topic": v["topic"], "deduplicationEnabled": None},
)
def remove_topic_deduplication(call: Call, topic: str) -> None:
    """Back to the namespace's policy."""
    call.broker.policies.set_deduplication(call.role, base_topic(topic), None)


# -- schema compatibility strategy ----------------------------------------------------


@operation(
    "namespaces",
    "get-schema-compatibility-strategy",
    method="GET",
    path=NAMESPACE_PATH + "/schemaCompatibilityStrategy",
    params=(NAMESPACE,),
    help="the strategy new schemas of the namespace's topics are checked under",
    render=lambda answer, v: [f"{answer}"],
)
def schema_compatibility_strategy(call: Call, namespace: str) -> str:
    """The namespace's strategy; ``UNDEFINED`` when none is set (FULL applies)."""
    return call.broker.schemas.strategy_policy(call.role, namespace) or "UNDEFINED"


@operation(
    "namespaces",
    "set-schema-compatibility-strategy",
    method="PUT",
    path=NAMESPACE_PATH + "/schemaCompatibilityStrategy",
    params=(
        NAMESPACE,
        Param(
            "strategy",
            where="body",
            whole_body=True,
            flags=("-c", "--compatibility"),
            choices=STRATEGIES,
            help="the strategy",
            limit=32,
        ),
    ),
    help="set the strategy new schemas of the namespace's topics are checked under",
    render=lambda _, v: [f"Schemas of {v['namespace']} are now checked {v['strategy']}"],
    document=lambda _, v: {"namespace": v["namespace"], "strategy": v["strategy"]},
)
def set_schema_compatibility_strategy(call: Call, namespace: str, strategy: str) -> None:
    """Set the strategy new schemas of the namespace's topics are checked under."""
    call.broker.schemas.set_strategy(call.role, namespace, strategy)


@operation(
    "namespaces",
    "remove-schema-compatibility-strategy",
    method="DELETE",
    path=NAMESPACE_PATH + "/schemaCompatibilityStrategy",
    params=(NAMESPACE,),
    help="remove the namespace's strategy (FULL applies)",
    render=lambda _, v: [f"Schemas of {v['namespace']} are checked FULL (the default)"],
    document=lambda _, v: {"namespace": v["namespace"], "strategy": None},
)
def remove_schema_compatibility_strategy(call: Call, namespace: str) -> None:
    """Back to the default (FULL)."""
    call.broker.schemas.set_strategy(call.role, namespace, None)


# -- compaction ----------------------------------------------------------------------


@operation(
    "topics",
    "compact",
    method="PUT",
    path=TOPIC_PATH + "/compaction",
    params=(TOPIC,),
    help="compact the topic through its last message (tenant admins)",
    render=lambda _, v: [f"Compacted {v['topic']}"],
    document=lambda _, v: {"topic": v["topic"], "compacted": True},
)
def compact(call: Call, topic: str) -> None:
    """Compact the topic through its last message (tenant admins). Done when it answers."""
    call.broker.compaction.compact(call.role, topic)


@operation(
    "topics",
    "compaction-status",
    method="GET",
    path=TOPIC_PATH + "/compaction",
    params=(TOPIC,),
    help="whether the topic was compacted",
    render=lambda answer, v: [f"Compaction of {v['topic']}: {answer['status']}"],
)
def compaction_status(call: Call, topic: str) -> dict[str, str]:
    """Pulsar's ``LongRunningProcessStatus``: ``NOT_RUN`` or ``SUCCESS``."""
    return {"status": call.broker.compaction.compaction_status(call.role, topic), "lastError": ""}

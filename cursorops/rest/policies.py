"""Pulsar admin v2 routes of the deduplication policy (of a namespace and of a topic) and
of a namespace's schema compatibility strategy.

The body of a POST is a bare boolean, as Pulsar's boolean policies; a GET answers
the policy set there, ``null`` when none is (the broker's default, off, applies).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response
from pydantic import StrictBool

from cursorops.rest.deps import BrokerDep, RoleDep
from cursorops.rest.paths import TOPIC, base_of, topic_name

router = APIRouter(tags=["policies"])

Name = Annotated[str, Path(min_length=1)]
NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}/deduplication"
STRATEGY = "/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy"
TOPIC_DEDUPLICATION = TOPIC + "/deduplicationEnabled"

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Namespace or topic not found"},
    503: {"description": "The stores failed"},
}


@router.get(NAMESPACE, responses=_ERRORS)
def namespace_deduplication(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> bool | None:
    """The namespace's deduplication policy (tenant admins)."""
    return broker.deduplication_policy(role, f"{tenant}/{namespace}")


@router.post(NAMESPACE, status_code=204, responses=_ERRORS)
def set_namespace_deduplication(
    tenant: Name,
    namespace: Name,
    broker: BrokerDep,
    role: RoleDep,
    enabled: Annotated[StrictBool, Body()],
) -> Response:
    """Turn deduplication on or off for the namespace's topics (tenant admins)."""
    broker.set_deduplication(role, f"{tenant}/{namespace}", enabled)
    return Response(status_code=204)


@router.delete(NAMESPACE, status_code=204, responses=_ERRORS)
def remove_namespace_deduplication(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> Response:
    """Back to the broker's default."""
    broker.set_deduplication(role, f"{tenant}/{namespace}", None)
    return Response(status_code=204)


@router.get(TOPIC_DEDUPLICATION, responses=_ERRORS)
def topic_deduplication(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> bool | None:
    """The topic's own deduplication policy (a partition answers for its topic)."""
    return broker.deduplication_policy(role, base_of(topic_name(tenant, namespace, topic)))


@router.post(TOPIC_DEDUPLICATION, status_code=204, responses=_ERRORS)
def set_topic_deduplication(
    tenant: Name,
    namespace: Name,
    topic: Name,
    broker: BrokerDep,
    role: RoleDep,
    enabled: Annotated[StrictBool, Body()],
) -> Response:
    """Turn deduplication on or off for the topic, over its namespace's policy."""
    broker.set_deduplication(role, base_of(topic_name(tenant, namespace, topic)), enabled)
    return Response(status_code=204)


@router.delete(TOPIC_DEDUPLICATION, status_code=204, responses=_ERRORS)
def remove_topic_deduplication(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> Response:
    """Back to the namespace's policy."""
    broker.set_deduplication(role, base_of(topic_name(tenant, namespace, topic)), None)
    return Response(status_code=204)


@router.get(STRATEGY, responses=_ERRORS)
def schema_compatibility_strategy(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> str:
    """The namespace's strategy; ``UNDEFINED`` when none is set (FULL applies)."""
    return broker.strategy_policy(role, f"{tenant}/{namespace}") or "UNDEFINED"


@router.put(STRATEGY, status_code=204, responses=_ERRORS)
def set_schema_compatibility_strategy(
    tenant: Name,
    namespace: Name,
    broker: BrokerDep,
    role: RoleDep,
    strategy: Annotated[str, Body(max_length=32)],
) -> Response:
    """Set the strategy new schemas of the namespace's topics are checked under."""
    broker.set_strategy(role, f"{tenant}/{namespace}", strategy)
    return Response(status_code=204)


@router.delete(STRATEGY, status_code=204, responses=_ERRORS)
def remove_schema_compatibility_strategy(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> Response:
    """Back to the default (FULL)."""
    broker.set_strategy(role, f"{tenant}/{namespace}", None)
    return Response(status_code=204)

"""Pulsar admin v2 routes that list a namespace's topics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from cursorops.rest.deps import BrokerDep, RoleDep

router = APIRouter(tags=["tenants and namespaces"])

Name = Annotated[str, Path(min_length=1)]

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Tenant or namespace not found"},
    503: {"description": "The stores failed"},
}


@router.get("/admin/v2/persistent/{tenant}/{namespace}", responses=_ERRORS)
def topics(tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep) -> list[str]:
    """The namespace's topics as Pulsar lists them: each partition of a partitioned topic,
    and each non-partitioned topic."""
    return [
        name
        for info in broker.list_topics(role, f"{tenant}/{namespace}")
        for name in info.partition_names()
    ]


@router.get("/admin/v2/persistent/{tenant}/{namespace}/partitioned", responses=_ERRORS)
def partitioned_topics(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> list[str]:
    """The namespace's partitioned topics."""
    return [
        info.name for info in broker.list_topics(role, f"{tenant}/{namespace}") if info.partitions
    ]

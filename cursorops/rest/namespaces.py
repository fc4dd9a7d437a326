"""Pulsar admin v2 routes of tenants and namespaces, their auto-creation of topics, and
cursorops's skip-approval policy."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from cursorops.rest.deps import BrokerDep, RoleDep

router = APIRouter(tags=["tenants and namespaces"])

Name = Annotated[str, Path(min_length=1)]

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Tenant or namespace not found"},
    503: {"description": "The stores failed"},
}


@router.get("/admin/v2/tenants", responses=_ERRORS)
def tenants(broker: BrokerDep, role: RoleDep) -> list[str]:
    """Every tenant (superusers only, as in Pulsar)."""
    return broker.list_tenants(role)


@router.delete(
    "/admin/v2/tenants/{tenant}",
    status_code=204,
    responses={**_ERRORS, 409: {"description": "The tenant still has active namespaces"}},
)
def delete_tenant(tenant: Name, broker: BrokerDep, role: RoleDep) -> Response:
    """Delete a tenant that has no namespace left (superusers only, as in Pulsar)."""
    broker.delete_tenant(role, tenant)
    return Response(status_code=204)


@router.delete(
    "/admin/v2/namespaces/{tenant}/{namespace}",
    status_code=204,
    responses={**_ERRORS, 409: {"description": "Cannot delete non empty namespace"}},
)
def delete_namespace(tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep) -> Response:
    """Delete a namespace that has no topic left (its tenant's admins), with its
    permissions and policies. Pulsar's ``force`` is not taken: delete the topics first."""
    broker.delete_namespace(role, f"{tenant}/{namespace}")
    return Response(status_code=204)


class AutoTopicCreation(BaseModel):
    """Pulsar's ``AutoTopicCreationOverride``; only non-partitioned topics are created."""

    model_config = ConfigDict(extra="forbid")
    allow: StrictBool = Field(alias="allowAutoTopicCreation")
    topic_type: Literal["non-partitioned"] = Field("non-partitioned", alias="topicType")


AUTO_TOPIC_CREATION = "/admin/v2/namespaces/{tenant}/{namespace}/autoTopicCreation"


@router.post(AUTO_TOPIC_CREATION, status_code=204, responses=_ERRORS)
def set_auto_topic_creation(
    tenant: Name,
    namespace: Name,
    broker: BrokerDep,
    role: RoleDep,
    body: Annotated[AutoTopicCreation, Body()],
) -> Response:
    """Whether producing to or subscribing on a missing topic creates it (tenant admins);
    the default, without this policy, is that it does."""
    broker.set_auto_topic_creation(role, f"{tenant}/{namespace}", body.allow)
    return Response(status_code=204)


@router.delete(AUTO_TOPIC_CREATION, status_code=204, responses=_ERRORS)
def remove_auto_topic_creation(
    tenant: Name, namespace: Name, broker: BrokerDep, role: RoleDep
) -> Response:
    """Remove the namespace's policy: missing topics are created on use again."""
    broker.set_auto_topic_creation(role, f"{tenant}/{namespace}", None)
    return Response(status_code=204)


@router.get("/admin/v2/namespaces/{tenant}", responses=_ERRORS)
def namespaces(tenant: Name, broker: BrokerDep, role: RoleDep) -> list[str]:
    """The tenant's namespaces, ``tenant/namespace`` (its admins and superusers)."""
    return broker.list_namespaces(role, tenant)


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


@router.post(
    "/admin/v2/namespaces/{tenant}/{namespace}/permissions/{role_name}",
    status_code=204,
    responses=_ERRORS,
)
def grant_permission(
    tenant: Name,
    namespace: Name,
    role_name: Name,
    broker: BrokerDep,
    role: RoleDep,
    actions: Annotated[list[str], Body(max_length=16)],
) -> Response:
    """Grant ``actions`` (``produce``, ``consume``, ...) on the namespace to a role,
    replacing what it had (tenant admins)."""
    broker.grant_permission(role, f"{tenant}/{namespace}", role_name, actions)
    return Response(status_code=204)


@router.post(
    "/admin/v2/namespaces/{tenant}/{namespace}/skipApproval", status_code=204, responses=_ERRORS
)
def set_skip_approval(
    tenant: Name,
    namespace: Name,
    broker: BrokerDep,
    role: RoleDep,
    required: Annotated[StrictBool, Body()],
) -> Response:
    """cursorops's policy: ``true`` makes every skip on the namespace wait for an approval
    in Airflow (tenant admins). The body is a bare boolean, as Pulsar's boolean policies."""
    broker.set_namespace_policy(role, f"{tenant}/{namespace}", skip_requires_approval=required)
    return Response(status_code=204)

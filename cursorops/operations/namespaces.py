"""Tenants and namespaces: Pulsar's admin v2 paths, their auto-creation of topics, and
cursorops's approval policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import NAMESPACE, TENANT, Call, Param, operation

NAMESPACE_PATH = "/admin/v2/namespaces/{tenant}/{namespace}"


def _tenant_delete_document(_: Any, values: Mapping[str, Any]) -> object:
    return {"tenant": values["tenant"], "deleted": True}


@operation(
    "tenants",
    "create",
    method="PUT",
    path="/admin/v2/tenants/{tenant}",
    params=(
        TENANT,
        Param(
            "admin_roles",
            where="body",
            kind=list,
            flags=("-r", "--admin-roles"),
            wire="adminRoles",
            default=[],
            help="comma-separated admin roles of the tenant",
            limit=64,
        ),
        Param(
            "allowed_clusters",
            where="body",
            kind=list,
            wire="allowedClusters",
            default=[],
            cli=False,
            limit=64,
        ),
    ),
    help="create a tenant (superusers)",
    status=204,
    responses={409: "Tenant already exists"},
    render=lambda _, v: [
        f"Created tenant {v['tenant']}"
        + (f" (admin roles: {', '.join(v['admin_roles'])})" if v["admin_roles"] else "")
    ],
    document=lambda _, v: {"tenant": v["tenant"], "adminRoles": sorted(v["admin_roles"])},
)
def create_tenant(
    call: Call, tenant: str, admin_roles: list[str], allowed_clusters: list[str]
) -> None:
    """Create a tenant with its admin roles (superusers only, as in Pulsar). Clusters are
    taken as Pulsar sends them and not used: this is one cluster."""
    call.broker.admin.create_tenant(call.role, tenant, admin_roles)


@operation(
    "tenants",
    "list",
    method="GET",
    path="/admin/v2/tenants",
    help="list tenants (superusers)",
)
def list_tenants(call: Call) -> list[str]:
    """Every tenant (superusers only, as in Pulsar)."""
    return call.broker.admin.list_tenants(call.role)


@operation(
    "tenants",
    "delete",
    method="DELETE",
    path="/admin/v2/tenants/{tenant}",
    params=(TENANT,),
    help="delete a tenant that has no namespace (superusers)",
    responses={409: "The tenant still has active namespaces"},
    render=lambda _, v: [f"Deleted tenant {v['tenant']}"],
    document=_tenant_delete_document,
)
def delete_tenant(call: Call, tenant: str) -> None:
    """Delete a tenant that has no namespace left (superusers only, as in Pulsar)."""
    call.broker.deletion.delete_tenant(call.role, tenant)


@operation(
    "namespaces",
    "create",
    method="PUT",
    path=NAMESPACE_PATH,
    params=(NAMESPACE,),
    help="create TENANT/NAMESPACE",
    responses={409: "Namespace already exists"},
    render=lambda _, v: [f"Created namespace {v['namespace']}"],
    document=lambda _, v: {"namespace": v["namespace"]},
)
def create_namespace(call: Call, namespace: str) -> None:
    """Create a namespace (its tenant's admins)."""
    call.broker.admin.create_namespace(call.role, namespace)


@operation(
    "namespaces",
    "list",
    method="GET",
    path="/admin/v2/namespaces/{tenant}",
    params=(TENANT,),
    help="list the namespaces of TENANT",
)
def list_namespaces(call: Call, tenant: str) -> list[str]:
    """The tenant's namespaces, ``tenant/namespace`` (its admins and superusers)."""
    return call.broker.admin.list_namespaces(call.role, tenant)


@operation(
    "namespaces",
    "delete",
    method="DELETE",
    path=NAMESPACE_PATH,
    params=(NAMESPACE,),
    help="delete TENANT/NAMESPACE once it has no topic",
    responses={409: "Cannot delete non empty namespace"},
    render=lambda _, v: [f"Deleted namespace {v['namespace']}"],
    document=lambda _, v: {"namespace": v["namespace"], "deleted": True},
)
def delete_namespace(call: Call, namespace: str) -> None:
    """Delete a namespace that has no topic left (its tenant's admins), with its
    permissions and policies. Pulsar's ``force`` is not taken: delete the topics first."""
    call.broker.deletion.delete_namespace(call.role, namespace)


@operation(
    "namespaces",
    "set-auto-topic-creation",
    method="POST",
    path=NAMESPACE_PATH + "/autoTopicCreation",
    params=(
        NAMESPACE,
        Param(
            "allowed",
            where="body",
            kind=bool,
            wire="allowAutoTopicCreation",
            flags=("--enable",),
            negation=("--disable",),
            help="create a missing topic on use (--disable: only topics create creates)",
        ),
        Param(
            "topic_type",
            where="body",
            wire="topicType",
            default="non-partitioned",
            choices=("non-partitioned",),
            cli=False,
        ),
    ),
    help="whether produce and subscribe create a missing topic (default: they do)",
    render=lambda _, v: [
        f"Missing topics of {v['namespace']} are now "
        + ("created on first use" if v["allowed"] else "created with topics create only")
    ],
    document=lambda _, v: {"namespace": v["namespace"], "allowAutoTopicCreation": v["allowed"]},
)
def set_auto_topic_creation(call: Call, namespace: str, allowed: bool, topic_type: str) -> None:
    """Whether producing to or subscribing on a missing topic creates it (tenant admins);
    the default, without this policy, is that it does. Only non-partitioned topics are
    created (Pulsar's ``AutoTopicCreationOverride``)."""
    call.broker.policies.set_auto_topic_creation(call.role, namespace, allowed)


@operation(
    "namespaces",
    "remove-auto-topic-creation",
    method="DELETE",
    path=NAMESPACE_PATH + "/autoTopicCreation",
    params=(NAMESPACE,),
    help="remove the namespace's auto-creation policy: missing topics are created on use",
    render=lambda _, v: [f"Missing topics of {v['namespace']} are created on first use"],
    document=lambda _, v: {"namespace": v["namespace"], "allowAutoTopicCreation": None},
)
def remove_auto_topic_creation(call: Call, namespace: str) -> None:
    """Remove the namespace's policy: missing topics are created on use again."""
    call.broker.policies.set_auto_topic_creation(call.role, namespace, None)


@operation(
    "namespaces",
    "grant-permission",
    method="POST",
    path=NAMESPACE_PATH + "/permissions/{role_name}",
    params=(
        NAMESPACE,
        Param(
            "grantee",
            where="path",
            wire="role_name",
            flags=("--role",),
            help="the role to grant to",
        ),
        Param(
            "actions",
            where="body",
            kind=list,
            flags=("--actions",),
            whole_body=True,
            help="comma-separated: produce,consume",
            limit=16,
        ),
    ),
    help="grant produce and/or consume to a role",
    render=lambda _, v: [
        f"Granted {','.join(sorted(set(v['actions'])))} on {v['namespace']} to role {v['grantee']}"
    ],
    document=lambda _, v: {
        "namespace": v["namespace"],
        "role": v["grantee"],
        "actions": sorted(set(v["actions"])),
    },
)
def grant_permission(call: Call, namespace: str, grantee: str, actions: list[str]) -> None:
    """Grant ``actions`` (``produce``, ``consume``, ...) on the namespace to a role,
    replacing what it had (tenant admins)."""
    call.broker.admin.grant_permission(call.role, namespace, grantee, actions)


@operation(
    "namespaces",
    "set-skip-approval",
    method="POST",
    path=NAMESPACE_PATH + "/skipApproval",
    params=(
        NAMESPACE,
        Param(
            "required",
            where="body",
            kind=bool,
            whole_body=True,
            flags=("--enable",),
            negation=("--disable",),
            help="require approval (--disable: apply at once)",
        ),
    ),
    help="whether skips on the namespace wait for an approval in Airflow (tenant admins)",
    render=lambda _, v: [
        f"Skips on {v['namespace']} now "
        + ("need an approval in Airflow" if v["required"] else "apply at once")
    ],
    document=lambda _, v: {"namespace": v["namespace"], "skipRequiresApproval": v["required"]},
)
def set_skip_approval(call: Call, namespace: str, required: bool) -> None:
    """cursorops's policy: ``true`` makes every skip on the namespace wait for an approval
    in Airflow (tenant admins). The body is a bare boolean, as Pulsar's boolean policies."""
    call.broker.admin.set_namespace_policy(call.role, namespace, skip_requires_approval=required)


def _quorum_lines(_: Any, v: Mapping[str, Any]) -> list[str]:
    said = (
        f"plans of more than {v['above']} message(s) need {v['approvals']} distinct approvers"
        if v["above"] is not None
        else "every plan needs one approver"
    )
    return [f"On {v['namespace']}, {said} (none of them the requester)"]


@operation(
    "namespaces",
    "set-approval-quorum",
    method="POST",
    path=NAMESPACE_PATH + "/approvalQuorum",
    params=(
        NAMESPACE,
        Param(
            "above",
            where="body",
            kind=int,
            wire="largeAboveMessages",
            flags=("--above",),
            default=None,
            metavar="MESSAGES",
            help="plans of more messages than this need --approvals (omit: every plan needs one)",
        ),
        Param(
            "approvals",
            where="body",
            kind=int,
            flags=("--approvals",),
            default=2,
            help="approvers a large plan needs (1-3)",
        ),
    ),
    help="how many distinct approvers a large plan needs on the namespace (tenant admins)",
    render=_quorum_lines,
    document=lambda _, v: {
        "namespace": v["namespace"],
        "largeAboveMessages": v["above"],
        "approvals": v["approvals"],
    },
)
def set_approval_quorum(call: Call, namespace: str, above: int | None, approvals: int) -> None:
    """How many distinct approvers, none of them the requester, a plan of more than
    ``largeAboveMessages`` messages needs (tenant admins); without ``largeAboveMessages``
    every plan needs one."""
    call.broker.admin.set_approval_quorum(
        call.role, namespace, large_above_messages=above, approvals=approvals
    )

"""Authorization, with Pulsar's model (``PulsarAuthorizationProvider``).

Every Broker operation is one of Pulsar's ``TopicOperation``,
``NamespaceOperation`` or ``TenantOperation`` values, checked with the rule
``PulsarAuthorizationProvider`` applies to it:

- Superusers may do everything.
- Tenant admins may do everything inside their tenant, except what only
  superusers may do (creating and listing tenants).
- Otherwise the role's namespace grant decides (:data:`ACTIONS`):

  - ``produce`` allows PRODUCE;
  - ``consume`` allows CONSUME, SUBSCRIBE, UNSUBSCRIBE, GET_SUBSCRIPTIONS, SKIP,
    PEEK_MESSAGES, RESET_CURSOR (``allowTopicOperationAsync``: all ``canConsume``);
    analyze-backlog is CONSUME there (``internalAnalyzeSubscriptionBacklog``);
  - either allows LOOKUP, GET_STATS (``canLookup``) and GET_TOPICS
    (``allowConsumeOrProduceOps``);
  - ``functions``, ``sources``, ``sinks`` and ``packages`` allow none of these;
  - CREATE_TOPIC, DELETE_TOPIC, CREATE_NAMESPACE, DELETE_NAMESPACE,
    GRANT_PERMISSION and SET_NAMESPACE_POLICY need a tenant admin;
  - CREATE_TENANT, DELETE_TENANT, LIST_TENANTS and LIST_BROKERS need a superuser.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from cursorops.core.domain.errors import NotAuthorizedError

ACTIONS = frozenset({"produce", "consume", "functions", "sources", "sinks", "packages"})
"""Pulsar's ``AuthAction`` values: what a namespace grant may hold."""


class Operation(StrEnum):
    # TopicOperation
    LOOKUP = "lookup"
    GET_STATS = "get-stats"
    PRODUCE = "produce"
    CONSUME = "consume"
    SUBSCRIBE = "subscribe"
    UNSUBSCRIBE = "unsubscribe"
    GET_SUBSCRIPTIONS = "get-subscriptions"
    SKIP = "skip"
    PEEK_MESSAGES = "peek-messages"
    RESET_CURSOR = "reset-cursor"
    # NamespaceOperation
    GET_TOPICS = "get-topics"
    CREATE_TOPIC = "create-topic"
    DELETE_TOPIC = "delete-topic"
    GRANT_PERMISSION = "grant-permission"
    # TenantOperation
    CREATE_NAMESPACE = "create-namespace"
    DELETE_NAMESPACE = "delete-namespace"
    # NamespaceOperation on a cursorops policy (Pulsar's namespace policies: tenant admins)
    SET_NAMESPACE_POLICY = "set-namespace-policy"
    # Superuser only (Pulsar's validateSuperUserAccess)
    CREATE_TENANT = "create-tenant"
    DELETE_TENANT = "delete-tenant"
    LIST_TENANTS = "list-tenants"
    LIST_BROKERS = "list-brokers"


_LOOKUP = frozenset({"produce", "consume"})
_CONSUME = frozenset({"consume"})
_TENANT_ADMIN_ONLY: frozenset[str] = frozenset()

GRANTS_ALLOWING: dict[Operation, frozenset[str]] = {
    Operation.LOOKUP: _LOOKUP,
    Operation.GET_STATS: _LOOKUP,
    Operation.GET_TOPICS: _LOOKUP,
    Operation.PRODUCE: frozenset({"produce"}),
    Operation.CONSUME: _CONSUME,
    Operation.SUBSCRIBE: _CONSUME,
    Operation.UNSUBSCRIBE: _CONSUME,
    Operation.GET_SUBSCRIPTIONS: _CONSUME,
    Operation.SKIP: _CONSUME,
    Operation.PEEK_MESSAGES: _CONSUME,
    Operation.RESET_CURSOR: _CONSUME,
    Operation.CREATE_TOPIC: _TENANT_ADMIN_ONLY,
    Operation.DELETE_TOPIC: _TENANT_ADMIN_ONLY,
    Operation.DELETE_NAMESPACE: _TENANT_ADMIN_ONLY,
    Operation.GRANT_PERMISSION: _TENANT_ADMIN_ONLY,
    Operation.CREATE_NAMESPACE: _TENANT_ADMIN_ONLY,
    Operation.SET_NAMESPACE_POLICY: _TENANT_ADMIN_ONLY,
}
"""Operation -> the grant actions any one of which allows it (besides admins)."""

SUPERUSER_ONLY = frozenset(
    {
        Operation.CREATE_TENANT,
        Operation.DELETE_TENANT,
        Operation.LIST_TENANTS,
        Operation.LIST_BROKERS,
    }
)


def is_allowed(
    role: str,
    operation: Operation,
    *,
    superusers: Iterable[str],
    tenant_admins: Iterable[str] = (),
    granted_actions: Iterable[str] = (),
) -> bool:
    if role in frozenset(superusers):
        return True
    if operation in SUPERUSER_ONLY:
        return False
    if role in frozenset(tenant_admins):
        return True
    return bool(GRANTS_ALLOWING[operation] & frozenset(granted_actions))


def check(
    role: str,
    operation: Operation,
    resource: str,
    *,
    superusers: Iterable[str],
    tenant_admins: Iterable[str] = (),
    granted_actions: Iterable[str] = (),
) -> None:
    """Raise NotAuthorizedError unless ``role`` may perform ``operation`` on ``resource``."""
    if not role:
        raise NotAuthorizedError(f"No role given: {operation.value} on {resource} needs one")
    if not is_allowed(
        role,
        operation,
        superusers=superusers,
        tenant_admins=tenant_admins,
        granted_actions=granted_actions,
    ):
        if operation in SUPERUSER_ONLY:
            raise NotAuthorizedError(f"Role '{role}' is not a superuser: {resource} needs one")
        raise NotAuthorizedError(
            f"Role '{role}' is not authorized to {operation.value} on {resource}"
        )

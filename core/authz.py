"""Authorization, with Pulsar's model (``PulsarAuthorizationProvider``).

- Superusers may do everything.
- Tenant admins may do everything inside their tenant.
- Otherwise namespace grants decide: ``produce`` allows PRODUCE; ``consume``
  allows CONSUME and SKIP (Pulsar's ``TopicOperation.SKIP`` is checked with
  ``canConsume``); either allows LOOKUP (stats, peek, analyze-backlog).
- Creating a tenant is for superusers; namespace, topic, subscription and grant
  administration is for superusers and the tenant's admins.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from core.errors import NotAuthorizedError


class Operation(StrEnum):
    PRODUCE = "produce"
    CONSUME = "consume"
    SKIP = "skip"
    LOOKUP = "lookup"
    ADMIN_TENANT = "admin-tenant"
    """Create or change what is inside a tenant (namespaces, topics, grants, subscriptions)."""
    SUPERUSER = "superuser"
    """Create tenants."""


_GRANTS_ALLOWING: dict[Operation, frozenset[str]] = {
    Operation.PRODUCE: frozenset({"produce"}),
    Operation.CONSUME: frozenset({"consume"}),
    Operation.SKIP: frozenset({"consume"}),
    Operation.LOOKUP: frozenset({"produce", "consume"}),
}

ACTIONS = frozenset({"produce", "consume"})


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
    if operation is Operation.SUPERUSER:
        return False
    if role in frozenset(tenant_admins):
        return True
    allowing = _GRANTS_ALLOWING.get(operation)
    return allowing is not None and bool(allowing & frozenset(granted_actions))


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
        if operation is Operation.SUPERUSER:
            raise NotAuthorizedError(f"Role '{role}' is not a superuser: {resource} needs one")
        raise NotAuthorizedError(
            f"Role '{role}' is not authorized to {operation.value} on {resource}"
        )

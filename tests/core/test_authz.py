"""Pulsar's authorization model, including TopicOperation.SKIP."""

from __future__ import annotations

import pytest

from core.authz import Operation, check, is_allowed
from core.errors import NotAuthorizedError

SUPER = frozenset({"root"})


@pytest.mark.parametrize(
    "operation,granted,allowed",
    [
        (Operation.SKIP, {"consume"}, True),
        (Operation.SKIP, {"produce"}, False),
        (Operation.SKIP, set(), False),
        (Operation.CONSUME, {"consume"}, True),
        (Operation.PRODUCE, {"consume"}, False),
        (Operation.PRODUCE, {"produce"}, True),
        (Operation.LOOKUP, {"produce"}, True),
        (Operation.LOOKUP, {"consume"}, True),
        (Operation.LOOKUP, set(), False),
        (Operation.ADMIN_TENANT, {"produce", "consume"}, False),
        (Operation.SUPERUSER, {"produce", "consume"}, False),
    ],
)
def test_namespace_grants(operation: Operation, granted: set[str], allowed: bool) -> None:
    assert is_allowed("app", operation, superusers=SUPER, granted_actions=granted) is allowed


@pytest.mark.parametrize("operation", list(Operation))
def test_superuser_may_do_everything(operation: Operation) -> None:
    assert is_allowed("root", operation, superusers=SUPER)


@pytest.mark.parametrize("operation", [op for op in Operation if op is not Operation.SUPERUSER])
def test_tenant_admin_may_do_everything_in_the_tenant(operation: Operation) -> None:
    assert is_allowed("boss", operation, superusers=SUPER, tenant_admins={"boss"})
    assert not is_allowed("boss", Operation.SUPERUSER, superusers=SUPER, tenant_admins={"boss"})


def test_check_names_role_operation_and_resource() -> None:
    with pytest.raises(NotAuthorizedError, match="Role 'app' is not authorized to skip on t"):
        check("app", Operation.SKIP, "t", superusers=SUPER, granted_actions={"produce"})
    with pytest.raises(NotAuthorizedError, match="No role given"):
        check("", Operation.SKIP, "t", superusers=SUPER)


def test_superuser_refusal_says_so() -> None:
    with pytest.raises(NotAuthorizedError, match="'app' is not a superuser: creating tenant t"):
        check("app", Operation.SUPERUSER, "creating tenant t", superusers=SUPER)

"""The authorization decision and the approval refusal, through ``Broker.access``."""

from __future__ import annotations

import pytest

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    NotAuthorizedError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker

from .conftest import TOPIC


def test_a_superuser_passes_before_anything_is_looked_up(broker: Broker) -> None:
    broker.access.check("admin", Operation.CREATE_TENANT, "nowhere", "creating tenant nowhere")


def test_an_unknown_tenant_is_a_refusal_not_a_not_found(broker: Broker) -> None:
    with pytest.raises(NotAuthorizedError, match="not authorized to consume"):
        broker.access.check("ops", Operation.CONSUME, "nowhere", "x", "nowhere/ns")


def test_a_grant_on_the_namespace_allows_its_actions(broker: Broker, ids: list[MessageId]) -> None:
    with pytest.raises(NotAuthorizedError):
        broker.access.authorized_topic("ops", Operation.CONSUME, TOPIC)
    broker.admin.grant_permission("admin", "acme/ops", "ops", ["consume"])
    assert broker.access.authorized_topic("ops", Operation.CONSUME, TOPIC).name == TOPIC
    with pytest.raises(NotAuthorizedError):
        broker.access.authorized_topic("ops", Operation.PRODUCE, TOPIC)


def test_a_tenant_admin_may_administer_its_tenant_only(broker: Broker) -> None:
    broker.access.check("acme-admin", Operation.CREATE_NAMESPACE, "acme", "namespace acme/x")
    broker.admin.create_tenant("admin", "other")
    with pytest.raises(NotAuthorizedError):
        broker.access.check("acme-admin", Operation.CREATE_NAMESPACE, "other", "namespace o/x")


def test_a_partition_is_refused_where_a_topic_is_asked(
    broker: Broker, ids: list[MessageId]
) -> None:
    with pytest.raises(InvalidArgumentError, match="names a partition"):
        broker.access.authorized_topic("admin", Operation.CONSUME, f"{TOPIC}-partition-0")


def test_the_approval_refusal_follows_the_namespace_policy(
    broker: Broker, ids: list[MessageId]
) -> None:
    info = broker.access.authorized_topic("admin", Operation.SKIP, TOPIC)
    broker.access.refuse_without_approval(info, "skips")
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    info = broker.access.authorized_topic("admin", Operation.SKIP, TOPIC)
    with pytest.raises(ApprovalRequiredError, match="acme/ops requires .* approval for skips"):
        broker.access.refuse_without_approval(info, "skips")

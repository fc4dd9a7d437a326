"""The protocol edge maps every leaf of the error tree, with the codes the official client
reads."""

from __future__ import annotations

import pulsar
import pytest

from cursorops.core.domain import errors as core_errors
from cursorops.core.domain.errors import leaf_classes
from cursorops.wire.commands import ServerError
from cursorops.wire.errors import CODES, server_error


def test_every_error_leaf_has_a_protocol_code() -> None:
    missing = [leaf.__name__ for leaf in leaf_classes() if leaf not in CODES]
    assert missing == []
    assert ServerError.UnknownError not in CODES.values()


def test_the_codes_the_client_acts_on() -> None:
    assert server_error(core_errors.ConsumerBusyError("x")) == ServerError.ConsumerBusy
    assert server_error(core_errors.TopicNotFoundError("x")) == ServerError.TopicNotFound
    assert server_error(core_errors.SubscriptionNotFoundError.of("t", "s")) == (
        ServerError.SubscriptionNotFound
    )
    assert server_error(core_errors.InvalidTopicNameError("x")) == ServerError.InvalidTopicName
    assert server_error(core_errors.IncompatibleSchemaError("x")) == ServerError.IncompatibleSchema
    assert server_error(core_errors.ApprovalRequiredError("x")) == ServerError.AuthorizationError
    assert server_error(core_errors.MetadataStoreError("x")) == ServerError.PersistenceError
    assert server_error(core_errors.NotEmptyError("x")) == ServerError.NotAllowedError
    assert server_error(core_errors.TenantNotFoundError("x")) == ServerError.TopicNotFound
    assert server_error(core_errors.NamespaceNotFoundError("x")) == ServerError.TopicNotFound


@pytest.mark.slow
@pytest.mark.parametrize(
    "topic",
    ["persistent://no-such-tenant/default/t", "public/no-such-namespace/t", "nobody/nothing/t"],
)
def test_a_missing_tenant_or_namespace_is_topic_not_found(
    client: pulsar.Client, topic: str
) -> None:
    """What Pulsar's own client tests expect of a producer on a missing tenant, with
    authentication off (the standalone's default)."""
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(topic, "s")
    assert server_error(ValueError("not ours")) == ServerError.UnknownError

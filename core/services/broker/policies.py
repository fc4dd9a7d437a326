"""Pulsar's deduplication policy of a namespace or a topic, and a namespace's
auto-creation of topics.

As Pulsar's ``brokerDeduplicationEnabled`` (false by default): a topic's policy
wins over its namespace's, which wins over the default. As Pulsar's
``allowAutoTopicCreation`` (true by default, a non-partitioned topic): a namespace's
``set-auto-topic-creation`` wins over the default.
"""

from __future__ import annotations

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.store.metadata import MetadataStore

DEDUPLICATION_POLICY = "deduplication_enabled"
DEFAULT_DEDUPLICATION = False
AUTO_TOPIC_CREATION_POLICY = "auto_topic_creation"
DEFAULT_AUTO_TOPIC_CREATION = True


def allows_auto_topic_creation(metadata: MetadataStore, namespace: str) -> bool:
    """Whether a missing topic of ``namespace`` is created on first use (produce,
    subscribe): the namespace's policy, else the default. No role check."""
    value = metadata.broker_policy(namespace, AUTO_TOPIC_CREATION_POLICY)
    return DEFAULT_AUTO_TOPIC_CREATION if value is None else bool(value)


class Policies(Collaborator):
    """Deduplication, set per namespace and per topic."""

    def _namespace_admin(self, role: str, namespace: str) -> None:
        tenant, _, local = namespace.partition("/")
        if not tenant or not local or "/" in local:
            raise InvalidArgumentError(f"Invalid namespace {namespace!r}: expected tenant/name")
        self.access.check(
            role, Operation.SET_NAMESPACE_POLICY, tenant, f"namespace {namespace}", namespace
        )
        self.metadata.get_namespace(namespace)

    def set_deduplication(self, role: str, scope: str, enabled: bool | None) -> None:
        """Set deduplication on a namespace (``tenant/ns``) or a topic; None removes it."""
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidArgumentError("Deduplication is true or false")
        if "://" in scope:
            name = TopicName.parse(scope)
            self._namespace_admin(role, name.namespace_name)
            self.metadata.get_topic(str(name.base))
            scope = str(name.base)
        else:
            self._namespace_admin(role, scope)
        self.metadata.set_broker_policy(scope, DEDUPLICATION_POLICY, enabled)

    def deduplication_policy(self, role: str, scope: str) -> bool | None:
        """The policy set on a namespace or a topic itself; None when it is not set."""
        if "://" in scope:
            name = TopicName.parse(scope)
            self.access.authorized_topic(role, Operation.LOOKUP, name.base)
            scope = str(name.base)
        else:
            self._namespace_admin(role, scope)
        value = self.metadata.broker_policy(scope, DEDUPLICATION_POLICY)
        return None if value is None else bool(value)

    def deduplication(self, topic: str) -> bool:
        """Whether ``topic`` (or a partition of it) deduplicates: its policy, its
        namespace's, or the default. No role check: the broker asks for its own use."""
        name = TopicName.parse(topic)
        for scope in (str(name.base), name.namespace_name):
            value = self.metadata.broker_policy(scope, DEDUPLICATION_POLICY)
            if value is not None:
                return bool(value)
        return DEFAULT_DEDUPLICATION

    def set_auto_topic_creation(self, role: str, namespace: str, allowed: bool | None) -> None:
        """Whether a missing topic of ``namespace`` is created on first use (tenant admins);
        None removes the namespace's policy (back to the default, allowed)."""
        if allowed is not None and not isinstance(allowed, bool):
            raise InvalidArgumentError("Auto topic creation is true or false")
        self._namespace_admin(role, namespace)
        self.metadata.set_broker_policy(namespace, AUTO_TOPIC_CREATION_POLICY, allowed)

    def auto_topic_creation_policy(self, role: str, namespace: str) -> bool | None:
        """The namespace's own auto-creation policy; None when it is not set."""
        self._namespace_admin(role, namespace)
        value = self.metadata.broker_policy(namespace, AUTO_TOPIC_CREATION_POLICY)
        return None if value is None else bool(value)

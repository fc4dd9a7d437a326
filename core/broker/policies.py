"""Pulsar's deduplication policy of a namespace or a topic.

As Pulsar's ``brokerDeduplicationEnabled`` (false by default): a topic's policy
wins over its namespace's, which wins over the default.
"""

from __future__ import annotations

from cursorops.core.authz import Operation
from cursorops.core.broker.context import Collaborator
from cursorops.core.errors import InvalidArgumentError
from cursorops.core.ids.topic_name import TopicName

DEDUPLICATION_POLICY = "deduplication_enabled"
DEFAULT_DEDUPLICATION = False


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

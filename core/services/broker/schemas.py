"""The schema registry: a topic's schema versions, added under its compatibility strategy.

As Pulsar's ``SchemaRegistryService``: a schema identical (type and definition)
to a version since the last deletion is that version; any other is checked
against the stored versions under the topic's strategy (Pulsar's default, FULL,
unless a namespace or topic policy says otherwise) and added as the next
version. A deletion is a version of its own; versions go on counting after it.
The schema is the topic's, not a partition's: every partition shares it.
"""

from __future__ import annotations

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    AlreadyExistsError,
    IncompatibleSchemaError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import EARLIEST
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.schemas.compatibility import (
    DEFAULT_STRATEGY,
    CompatibilityStrategy,
    check_compatible,
    validate,
)
from cursorops.core.domain.schemas.schema_info import SchemaInfo
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.store.schema_versions import StoredSchema

STRATEGY_POLICY = "schema_compatibility_strategy"
_WRITE_ATTEMPTS = 5
"""Versions another process adds meanwhile are read again this many times at most."""


def schema_id(name: TopicName) -> str:
    """Pulsar's schema name: ``tenant/namespace/topic``, without domain nor partition."""
    return f"{name.tenant}/{name.namespace}/{name.base.local_name}"


def _live(history: list[StoredSchema]) -> list[StoredSchema]:
    """The versions since the last deletion, oldest first."""
    live: list[StoredSchema] = []
    for stored in history:
        live = [] if stored.deleted else [*live, stored]
    return live


class Schemas(Collaborator):
    """Schema versions per topic, and the compatibility strategy that admits new ones."""

    def _authorized(self, role: str, operation: Operation, topic: str) -> TopicName:
        name = TopicName.parse(topic)
        self.access.check(role, operation, name.tenant, str(name.base), name.namespace_name)
        return name

    def strategy(self, name: TopicName) -> CompatibilityStrategy:
        """The topic's policy, else its namespace's, else Pulsar's default (FULL)."""
        for scope in (str(name.base), name.namespace_name):
            value = self.metadata.broker_policy(scope, STRATEGY_POLICY)
            if value is not None:
                return CompatibilityStrategy(value)
        return DEFAULT_STRATEGY

    def set_strategy(self, role: str, namespace: str, strategy: str | None) -> None:
        """Set a namespace's compatibility strategy (None: back to the default)."""
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.SET_NAMESPACE_POLICY, tenant, namespace, namespace)
        self.metadata.get_namespace(namespace)
        if strategy is not None:
            try:
                strategy = CompatibilityStrategy(strategy).value
            except ValueError:
                raise InvalidArgumentError(f"Unknown compatibility strategy {strategy!r}") from None
        self.metadata.set_broker_policy(namespace, STRATEGY_POLICY, strategy)

    def strategy_policy(self, role: str, namespace: str) -> str | None:
        """The compatibility strategy set on a namespace; None when none is (FULL applies)."""
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.SET_NAMESPACE_POLICY, tenant, namespace, namespace)
        self.metadata.get_namespace(namespace)
        value = self.metadata.broker_policy(namespace, STRATEGY_POLICY)
        return None if value is None else str(value)

    def get_schema(
        self, role: str, topic: str, version: int | None = None
    ) -> tuple[int, SchemaInfo] | None:
        """The latest version (or ``version``) and its schema; None when there is none
        (no schema, deleted, or no such version)."""
        name = self._authorized(role, Operation.LOOKUP, topic)
        history = self.metadata.schema_history(schema_id(name))
        if version is None:
            found = history[-1] if history else None
        else:
            found = next((s for s in history if s.version == version), None)
        if found is None or found.deleted:
            return None
        return found.version, found.info

    def schema_versions(self, role: str, topic: str) -> list[tuple[int, SchemaInfo, int]]:
        """Every live version: (version, schema, created at, ms), oldest first."""
        name = self._authorized(role, Operation.LOOKUP, topic)
        live = _live(self.metadata.schema_history(schema_id(name)))
        return [(s.version, s.info, s.created_at_ms) for s in live]

    def put_schema(self, role: str, topic: str, info: SchemaInfo) -> int:
        """The version of ``info``: an identical live one, or a new one if compatible.

        Raises IncompatibleSchemaError when the strategy refuses it.
        """
        name = self._authorized(role, Operation.PRODUCE, topic)
        validate(info)
        key = schema_id(name)
        strategy = self.strategy(name)
        for _ in range(_WRITE_ATTEMPTS):
            history = self.metadata.schema_history(key)
            live = _live(history)
            same = next((s for s in live if s.info.same_definition(info)), None)
            if same is not None:
                return same.version
            check_compatible(info, [s.info for s in live], strategy)
            version = history[-1].version + 1 if history else 0
            try:
                self.metadata.add_schema_version(
                    key, version, info, deleted=False, now_ms=self.clock()
                )
            except AlreadyExistsError:
                continue
            return version
        raise AlreadyExistsError(f"Schema {key} kept changing while a version was added")

    def check_consumer_schema(self, role: str, topic: str, info: SchemaInfo) -> None:
        """A consumer's schema: added when the topic is idle (no schema, no entries), else
        it must read the latest version (Pulsar checks consumers BACKWARD, or against
        every version under a transitive strategy)."""
        name = self._authorized(role, Operation.CONSUME, topic)
        validate(info)
        strategy = self.strategy(name)
        live = _live(self.metadata.schema_history(schema_id(name)))
        if not live:
            if self._has_entries(name):
                raise IncompatibleSchemaError("Topic does not have schema to check")
            self.put_schema(role, topic, info)
            return
        if any(s.info.same_definition(info) for s in live):
            return
        if strategy is CompatibilityStrategy.ALWAYS_COMPATIBLE:
            return
        transitive = strategy in (
            CompatibilityStrategy.BACKWARD_TRANSITIVE,
            CompatibilityStrategy.FULL_TRANSITIVE,
            CompatibilityStrategy.FORWARD_TRANSITIVE,
        )
        check_compatible(
            info,
            [s.info for s in live],
            CompatibilityStrategy.BACKWARD_TRANSITIVE
            if transitive
            else CompatibilityStrategy.BACKWARD,
        )

    def delete_schema(self, role: str, topic: str) -> int | None:
        """Delete the topic's schema (a deletion version); its version, None when none."""
        name = TopicName.parse(topic)
        self.access.check(
            role,
            Operation.SET_NAMESPACE_POLICY,
            name.tenant,
            name.namespace_name,
            name.namespace_name,
        )
        key = schema_id(name)
        for _ in range(_WRITE_ATTEMPTS):
            history = self.metadata.schema_history(key)
            if not history or history[-1].deleted:
                return None
            version = history[-1].version + 1
            empty = SchemaInfo(history[-1].info.type, b"", {})
            try:
                self.metadata.add_schema_version(
                    key, version, empty, deleted=True, now_ms=self.clock()
                )
            except AlreadyExistsError:
                continue
            return version
        raise AlreadyExistsError(f"Schema {key} kept changing while it was deleted")

    def _has_entries(self, name: TopicName) -> bool:
        base = name.base
        try:
            partitions = self.metadata.get_topic(str(base)).partitions
        except TopicNotFoundError:
            return False
        names = [str(base.partition(i)) for i in range(partitions)] if partitions else [str(base)]
        return any(self.context.layout(n).last_position != EARLIEST for n in names)

"""Reads of several aggregates in one read transaction.

:meth:`MetadataStore.reading <cursorops.core.store.metadata.MetadataStore.reading>` opens one;
the caller reads what its operation needs (a skip: the subscription, every
partition's ledgers, the segments of the partitions its ids are on) in one
snapshot and as few statements, instead of a transaction per look-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, literal, select
from sqlalchemy.engine import Connection

from cursorops.core.domain.errors import (
    NamespaceNotFoundError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.topic_name import label_problem
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.checks import canonical_topic, check_label, check_name, split_namespace
from cursorops.core.store.tables import (
    LedgerRow,
    NamespacePolicyRow,
    NamespaceRow,
    PermissionRow,
    SegmentRow,
    SubscriptionRow,
    TenantRow,
    TopicPartitionRow,
    TopicRow,
)
from cursorops.core.store.values import LedgerInfo, SegmentInfo, SubscriptionInfo, TopicInfo


class ReadView:
    """Look-ups inside one open transaction, on its connection.

    Every look-up selects columns and runs on the connection itself: a request pays the
    statement, not an ORM session and its execution layer (no mapped row is loaded)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def access(
        self, tenant: str, namespace: str | None, role: str
    ) -> tuple[frozenset[str], frozenset[str]]:
        """What may authorize ``role``: the tenant's admin roles and the role's grant on
        ``namespace`` (empty when None), in ONE statement. Raises TenantNotFoundError, and
        NamespaceNotFoundError for a namespace that does not exist."""
        check_name("tenant", tenant)
        if namespace is None:
            row = self._connection.execute(_tenant_admins_query(), {"tenant": tenant}).one_or_none()
            if row is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            return frozenset(row[0]), frozenset()
        return self.access_and_topic(tenant, namespace, role, None)[:2]

    def access_and_topic(
        self, tenant: str, namespace: str, role: str, topic: str | None
    ) -> tuple[frozenset[str], frozenset[str], TopicInfo | None]:
        """:meth:`access`, and canonical ``topic`` as :meth:`topic` reads it (None when it
        does not exist, or is not asked), in ONE statement. The caller decides the
        authorization before it says whether the topic exists."""
        check_name("tenant", tenant)
        split_namespace(namespace)
        # A role no grant can name (control characters, lone surrogates) has none; it is
        # never sent to the database, whose driver may refuse to encode it.
        asked = role if label_problem(role) is None else ""
        values: dict[str, object] = {"tenant": tenant, "namespace": namespace, "role": asked}
        if topic is not None:
            values["topic"] = canonical_topic(topic)
        query = _access_query(with_topic=topic is not None)
        row = self._connection.execute(query, values).one_or_none()
        if row is None:
            raise TenantNotFoundError(f"Tenant '{tenant}' not found")
        if row[1] is None:
            raise NamespaceNotFoundError(f"Namespace '{namespace}' not found")
        info = None
        if topic is not None and row[3] is not None:
            info = TopicInfo(row[3], row[4], approval_required=bool(row[5]))
        return frozenset(row[0]), frozenset(row[2] or ()), info

    def topic(self, topic: str) -> TopicInfo:
        """The topic, with its namespace's approval flag read in the same statement."""
        name = canonical_topic(topic)
        found = self._connection.execute(_topic_by_name(), {"topic": name}).one_or_none()
        if found is None:
            raise TopicNotFoundError(f"Topic '{name}' not found")
        return TopicInfo(found[0], found[1], approval_required=bool(found[2]))

    def subscription(self, topic: str, name: str) -> SubscriptionInfo:
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        row = self._connection.execute(
            _subscription_query(), {"topic": topic_name, "name": name}
        ).one_or_none()
        if row is None:
            raise SubscriptionNotFoundError.of(topic_name, name)
        return SubscriptionInfo(row[0], row[1], SubscriptionType(row[2]), dict(row[3]))

    def subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        """The topic's subscriptions, by name (none for a topic that does not exist)."""
        topic_name = canonical_topic(topic)
        row = SubscriptionRow
        query = (
            select(row.topic, row.name, row.type, row.properties)
            .where(row.topic == topic_name)
            .order_by(row.name)
        )
        return [
            SubscriptionInfo(topic, name, SubscriptionType(kind), dict(properties))
            for topic, name, kind, properties in self._connection.execute(query)
        ]

    def ledgers_of(self, topic_partitions: Sequence[str]) -> dict[str, list[LedgerInfo]]:
        """Each partition's ledgers, ordered by ledger id, in ONE statement."""
        names = [canonical_topic(name) for name in topic_partitions]
        found: dict[str, list[LedgerInfo]] = {}
        for name, ledger_id, entries, messages in self._connection.execute(
            _ledgers_query(), {"names": names}
        ):
            ledgers = found.setdefault(name, [])
            if ledger_id is not None:
                ledgers.append(LedgerInfo(ledger_id, name, entries, messages))
        missing = [name for name in names if name not in found]
        if missing:
            raise TopicNotFoundError(f"Topic partition '{missing[0]}' not found")
        return {name: found[name] for name in names}

    def segments_of(self, topic_partitions: Sequence[str]) -> dict[str, list[SegmentInfo]]:
        """Each partition's committed segments, ordered by ``(ledger_id, first_entry)``, in
        ONE statement. The partitions are known to exist (read by :meth:`ledgers_of`)."""
        names = [canonical_topic(name) for name in topic_partitions]
        found: dict[str, list[SegmentInfo]] = {name: [] for name in names}
        if not names:
            return found
        rows = self._connection.execute(_segments_query(), {"names": names})
        for name, ledger_id, first_entry, last_entry, messages, path in rows:
            found[name].append(SegmentInfo(ledger_id, first_entry, last_entry, messages, path))
        return found


# The statements a skip runs on every request, built once each (bound parameters): a
# request pays their execution, not building and keying them again.


@cache
def _tenant_admins_query() -> Select[list[str]]:
    return select(TenantRow.admin_roles).where(TenantRow.name == bindparam("tenant"))


@cache
def _access_query(*, with_topic: bool) -> Select[Any]:
    """:meth:`ReadView.access_and_topic`'s statement (bound parameters ``tenant``,
    ``namespace``, ``role`` and, ``with_topic``, ``topic``)."""
    exists = select(NamespaceRow.name).where(NamespaceRow.name == bindparam("namespace"))
    grant = select(PermissionRow.actions).where(
        PermissionRow.namespace == bindparam("namespace"), PermissionRow.role == bindparam("role")
    )
    columns: list[Any] = [TenantRow.admin_roles, exists.scalar_subquery(), grant.scalar_subquery()]
    tenant = TenantRow.name == bindparam("tenant")
    if not with_topic:
        return select(*columns).where(tenant)
    found = _topic_query(bindparam("topic")).subquery()
    columns += [found.c.name, found.c.partitions, found.c.skip_requires_approval]
    return select(*columns).outerjoin(found, literal(True)).where(tenant)


@cache
def _topic_by_name() -> Select[str, int, bool]:
    return _topic_query(bindparam("topic"))


def _topic_query(name: Any) -> Select[str, int, bool]:
    """A topic's name, partitions and its namespace's approval flag."""
    return (
        select(TopicRow.name, TopicRow.partitions, NamespacePolicyRow.skip_requires_approval)
        .outerjoin(NamespacePolicyRow, NamespacePolicyRow.namespace == TopicRow.namespace)
        .where(TopicRow.name == name)
    )


@cache
def _subscription_query() -> Select[str, str, str, dict[str, str]]:
    # Columns, not the mapped row: a look-up per skip, without the ORM's identity map.
    row = SubscriptionRow
    return select(row.topic, row.name, row.type, row.properties).where(
        row.topic == bindparam("topic"), row.name == bindparam("name")
    )


@cache
def _ledgers_query() -> Select[str, int, int, int]:
    # The outer join keeps a partition without ledgers and tells a missing one apart.
    return (
        select(TopicPartitionRow.name, LedgerRow.ledger_id, LedgerRow.entries, LedgerRow.messages)
        .outerjoin(LedgerRow, LedgerRow.topic_partition == TopicPartitionRow.name)
        .where(TopicPartitionRow.name.in_(bindparam("names", expanding=True)))
        .order_by(TopicPartitionRow.name, LedgerRow.ledger_id)
    )


@cache
def _segments_query() -> Select[str, int, int, int, int, str]:
    return (
        select(
            LedgerRow.topic_partition,
            SegmentRow.ledger_id,
            SegmentRow.first_entry,
            SegmentRow.last_entry,
            SegmentRow.messages,
            SegmentRow.path,
        )
        .join(LedgerRow, LedgerRow.ledger_id == SegmentRow.ledger_id)
        .where(LedgerRow.topic_partition.in_(bindparam("names", expanding=True)))
        .order_by(LedgerRow.topic_partition, SegmentRow.ledger_id, SegmentRow.first_entry)
    )


def subscription_info(row: SubscriptionRow) -> SubscriptionInfo:
    return SubscriptionInfo(row.topic, row.name, SubscriptionType(row.type), dict(row.properties))


def ledger_info(row: LedgerRow) -> LedgerInfo:
    return LedgerInfo(row.ledger_id, row.topic_partition, row.entries, row.messages)


__all__ = ["ReadView", "ledger_info", "subscription_info"]

"""Tenants, namespaces, permissions, topics, subscriptions and cursorops's namespace policies.

A part of :class:`~cursorops.core.store.metadata.MetadataStore` (the aggregates of tenancy and
administration); each method is one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import (
    delete,
    select,
)
from sqlalchemy.orm import Session

from cursorops.core.domain.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidTopicNameError,
    NamespaceNotFoundError,
    NotEmptyError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.topic_name import (
    TopicName,
)
from cursorops.core.domain.plans.plan_record import MAX_APPROVALS, ApprovalPolicy
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.checks import (
    canonical_topic,
    check_bytes,
    check_int,
    check_label,
    check_name,
    check_roles,
    check_string_map,
    check_text,
    split_namespace,
)
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.read_view import subscription_info
from cursorops.core.store.store_base import StoreBase
from cursorops.core.store.tables import (
    ApprovalPolicyRow,
    BrokerPolicyRow,
    NamespacePolicyRow,
    NamespaceRow,
    PermissionRow,
    SubscriptionRow,
    TenantRow,
    TopicPartitionRow,
    TopicRow,
)
from cursorops.core.store.values import (
    PERMISSION_ACTIONS,
    NamespaceInfo,
    SubscriptionInfo,
    TenantInfo,
    TopicInfo,
)

UNSUBSCRIBE = Ticket.ungated("unsubscribe")
"""What a deletion of a subscription is, unless its caller says otherwise."""


class Tenancy(StoreBase):
    """Tenancy and administration records of the metadata store."""

    # Tenants and namespaces.

    def create_tenant(self, name: str, admin_roles: Iterable[str] = ()) -> TenantInfo:
        check_name("tenant", name)
        roles = check_roles("admin roles", admin_roles)
        message = f"Tenant '{name}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, name) is not None:
                raise AlreadyExistsError(message)
            session.add(TenantRow(name=name, admin_roles=sorted(roles)))
        return TenantInfo(name, roles)

    def get_tenant(self, name: str) -> TenantInfo:
        check_name("tenant", name)
        with self._session(write=False) as session:
            row = session.get(TenantRow, name)
            if row is None:
                raise TenantNotFoundError(f"Tenant '{name}' not found")
            return TenantInfo(row.name, frozenset(row.admin_roles))

    def list_tenants(self) -> list[str]:
        with self._session(write=False) as session:
            return list(session.scalars(select(TenantRow.name).order_by(TenantRow.name)))

    def delete_tenant(self, name: str) -> None:
        """Delete a tenant that has no namespace left (NotEmptyError otherwise, as Pulsar's
        409 "The tenant still has active namespaces")."""
        check_name("tenant", name)
        with self._session(write=True) as session:
            if session.get(TenantRow, name) is None:
                raise TenantNotFoundError(f"Tenant '{name}' not found")
            left = list(
                session.scalars(
                    select(NamespaceRow.name)
                    .where(NamespaceRow.tenant == name)
                    .order_by(NamespaceRow.name)
                    .limit(4)
                )
            )
            if left:
                raise NotEmptyError(
                    f"The tenant still has active namespaces: {_listed(left)}; delete them first"
                )
            session.execute(delete(TenantRow).where(TenantRow.name == name))

    def create_namespace(self, namespace: str) -> NamespaceInfo:
        """Create ``tenant/namespace``; the tenant must exist."""
        tenant, _ = split_namespace(namespace)
        message = f"Namespace '{namespace}' already exists"
        with self._session(write=True, conflict=message) as session:
            if session.get(TenantRow, tenant) is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            if session.get(NamespaceRow, namespace) is not None:
                raise AlreadyExistsError(message)
            session.add(NamespaceRow(name=namespace, tenant=tenant))
        return NamespaceInfo(namespace, {})

    def get_namespace(self, namespace: str) -> NamespaceInfo:
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            rows = session.scalars(
                select(PermissionRow).where(PermissionRow.namespace == namespace)
            )
            permissions = {row.role: frozenset(row.actions) for row in rows}
            return NamespaceInfo(namespace, permissions)

    def list_namespaces(self, tenant: str) -> list[str]:
        with self._session(write=False) as session:
            if session.get(TenantRow, tenant) is None:
                raise TenantNotFoundError(f"Tenant '{tenant}' not found")
            query = select(NamespaceRow.name).where(NamespaceRow.tenant == tenant)
            return list(session.scalars(query.order_by(NamespaceRow.name)))

    def delete_namespace(self, namespace: str) -> None:
        """Delete a namespace that has no topic left, with its permissions and policies
        (NotEmptyError otherwise, as Pulsar's 409 "Cannot delete non empty namespace")."""
        split_namespace(namespace)
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            left = list(
                session.scalars(
                    select(TopicRow.name)
                    .where(TopicRow.namespace == namespace)
                    .order_by(TopicRow.name)
                    .limit(4)
                )
            )
            if left:
                raise NotEmptyError(
                    f"Cannot delete non empty namespace {namespace}: it has topics "
                    f"{_listed(left)}; delete them first (topics delete)"
                )
            session.execute(delete(BrokerPolicyRow).where(BrokerPolicyRow.scope == namespace))
            session.execute(delete(NamespaceRow).where(NamespaceRow.name == namespace))

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``actions`` to ``role``, replacing what the role had (like Pulsar)."""
        check_label("role", role)
        if isinstance(actions, str):
            raise InvalidArgumentError(
                f"Invalid actions {actions!r}: expected a collection such as ['consume']"
            )
        wanted = frozenset(actions)
        unknown = wanted - PERMISSION_ACTIONS
        if unknown or not wanted:
            allowed = ", ".join(sorted(PERMISSION_ACTIONS))
            shown = sorted(unknown, key=str) if unknown else "none"
            raise InvalidArgumentError(f"Invalid actions {shown}: grant one or more of {allowed}")
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(PermissionRow, (namespace, role))
            if row is None:
                session.add(PermissionRow(namespace=namespace, role=role, actions=sorted(wanted)))
            else:
                row.actions = sorted(wanted)

    def revoke_permission(self, namespace: str, role: str) -> None:
        """Remove every action granted to ``role``; a role without a grant is a no-op."""
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            session.execute(
                delete(PermissionRow).where(
                    PermissionRow.namespace == namespace, PermissionRow.role == role
                )
            )

    @staticmethod
    def _require_namespace(session: Session, namespace: str) -> None:
        if session.get(NamespaceRow, namespace) is None:
            raise NamespaceNotFoundError(f"Namespace '{namespace}' not found")

    # Topics.

    def create_topic(self, topic: str, partitions: int) -> TopicInfo:
        """Create a topic: ``partitions`` 0 = non-partitioned, else the partition count."""
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidTopicNameError(
                f"Invalid topic name '{name}': a topic name must not name a partition "
                "(-partition-N)"
            )
        check_int("partition count", partitions, 0)
        info = TopicInfo(str(name), partitions)
        message = f"Topic '{info.name}' already exists"
        with self._session(write=True, conflict=message) as session:
            self._require_namespace(session, name.namespace_name)
            if session.get(TopicRow, info.name) is not None:
                raise AlreadyExistsError(message)
            session.add(
                TopicRow(name=info.name, namespace=name.namespace_name, partitions=partitions)
            )
            session.flush()
            session.add_all(
                TopicPartitionRow(name=partition, topic=info.name, partition=index)
                for index, partition in enumerate(info.partition_names())
            )
        return info

    def get_topic(self, topic: str) -> TopicInfo:
        """The topic, with its namespace's approval flag read in the same statement."""
        with self.reading() as view:
            return view.topic(topic)

    def list_topics(self, namespace: str) -> list[TopicInfo]:
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            query = select(TopicRow).where(TopicRow.namespace == namespace).order_by(TopicRow.name)
            return [TopicInfo(row.name, row.partitions) for row in session.scalars(query)]

    @staticmethod
    def _require_topic(session: Session, name: str) -> TopicInfo:
        row = session.get(TopicRow, name)
        if row is None:
            raise TopicNotFoundError(f"Topic '{name}' not found")
        return TopicInfo(row.name, row.partitions)

    # Subscriptions.

    def create_subscription(
        self,
        topic: str,
        name: str,
        type: SubscriptionType,
        properties: Mapping[str, str],
        initial_snapshots: Mapping[str, bytes],
    ) -> SubscriptionInfo:
        """Create a subscription and its cursor on every partition, in one transaction.

        ``initial_snapshots`` maps each of the topic's partition names
        (:meth:`TopicInfo.partition_names`) to the encoded initial cursor state.
        """
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        if not isinstance(type, SubscriptionType):
            type = SubscriptionType.parse(check_text("subscription type", type))
        props = check_string_map("subscription properties", properties)
        if not isinstance(initial_snapshots, Mapping):
            raise InvalidArgumentError("Invalid initial snapshots: expected a mapping")
        snapshots = {
            canonical_topic(partition): check_bytes(f"initial snapshot of {partition}", snapshot)
            for partition, snapshot in initial_snapshots.items()
        }
        # Through the cursor door: a subscription's cursors are created with it.
        with self.cursor_transaction() as work:
            expected = work.partitions_of(topic_name)
            if sorted(snapshots) != sorted(expected) or len(initial_snapshots) != len(expected):
                raise InvalidArgumentError(
                    f"Initial snapshots must be given for exactly the partitions {expected}, "
                    f"got {sorted(initial_snapshots)}"
                )
            # A new cursor, no existing one moved. Where the namespace requires approval,
            # the Broker creates one anywhere but at latest only under a name without history.
            work.create_subscription(
                topic_name,
                name,
                type.value,
                props,
                {p: snapshots[p] for p in expected},
                ticket=Ticket.not_a_move("a new subscription's cursors"),
            )
        return SubscriptionInfo(topic_name, name, type, props)

    def get_subscription(self, topic: str, name: str) -> SubscriptionInfo:
        with self.reading() as view:
            return view.subscription(topic, name)

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        topic_name = canonical_topic(topic)
        with self._session(write=False) as session:
            self._require_topic(session, topic_name)
            query = (
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name)
                .order_by(SubscriptionRow.name)
            )
            return [subscription_info(row) for row in session.scalars(query)]

    def delete_subscription(self, topic: str, name: str, *, ticket: Ticket = UNSUBSCRIBE) -> None:
        """Delete the subscription with its cursors and their journals, through the cursor
        door (:meth:`~cursorops.core.store.cursor_door.CursorTransaction.remove_subscription`),
        as ``ticket`` entitles it: by default an unsubscribe, refused where the namespace
        requires approval."""
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        with self.cursor_transaction() as work:
            work.remove_subscription(topic_name, name, ticket=ticket)

    def update_subscription_properties(
        self, topic: str, name: str, properties: Mapping[str, str]
    ) -> SubscriptionInfo:
        """Replace the subscription's properties with ``properties`` (empty clears them)."""
        topic_name = canonical_topic(topic)
        check_label("subscription name", name)
        props = check_string_map("subscription properties", properties)
        with self._session(write=True) as session:
            row = session.scalars(
                select(SubscriptionRow)
                .where(SubscriptionRow.topic == topic_name, SubscriptionRow.name == name)
                .with_for_update()
            ).one_or_none()
            if row is None:
                raise SubscriptionNotFoundError.of(topic_name, name)
            row.properties = props
            return subscription_info(row)

    def access(
        self, tenant: str, namespace: str | None, role: str
    ) -> tuple[frozenset[str], frozenset[str]]:
        """:meth:`ReadView.access <cursorops.core.store.read_view.ReadView.access>` in its own
        read."""
        with self.reading() as view:
            return view.access(tenant, namespace, role)

    # Namespace policies of cursorops (not Pulsar's): whether skips need an approval.

    def set_skip_requires_approval(self, namespace: str, required: bool) -> None:
        """Record whether skips on ``namespace`` must go through an approval workflow."""
        split_namespace(namespace)
        if not isinstance(required, bool):
            raise InvalidArgumentError(f"Invalid skip approval flag {required!r}: expected a bool")
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(NamespacePolicyRow, namespace)
            if row is None:
                row = NamespacePolicyRow(namespace=namespace, skip_requires_approval=required)
                session.add(row)
            else:
                row.skip_requires_approval = required

    def set_approval_quorum(
        self, namespace: str, large_above_messages: int | None, large_approvals: int
    ) -> None:
        """Plans of more than ``large_above_messages`` messages need ``large_approvals``
        distinct approvers on ``namespace`` (None: every plan needs one)."""
        split_namespace(namespace)
        if large_above_messages is not None:
            check_int("large plan size", large_above_messages, 0)
        if isinstance(large_approvals, bool) or large_approvals not in range(1, MAX_APPROVALS + 1):
            raise InvalidArgumentError(
                f"Invalid number of approvals {large_approvals!r}: expected 1 to {MAX_APPROVALS}"
            )
        with self._session(write=True) as session:
            self._require_namespace(session, namespace)
            row = session.get(ApprovalPolicyRow, namespace)
            if row is None:
                session.add(
                    ApprovalPolicyRow(
                        namespace=namespace,
                        large_above_messages=large_above_messages,
                        large_approvals=large_approvals,
                    )
                )
            else:
                row.large_above_messages = large_above_messages
                row.large_approvals = large_approvals

    def approval_policy(self, namespace: str) -> ApprovalPolicy:
        """The namespace's approval policy (the defaults when never set)."""
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            flag = session.get(NamespacePolicyRow, namespace)
            quorum = session.get(ApprovalPolicyRow, namespace)
            return ApprovalPolicy(
                required=bool(flag is not None and flag.skip_requires_approval),
                large_above_messages=None if quorum is None else quorum.large_above_messages,
                large_approvals=2 if quorum is None else quorum.large_approvals,
            )

    def skip_requires_approval(self, namespace: str) -> bool:
        """Whether skips on ``namespace`` need an approval (False when never set)."""
        split_namespace(namespace)
        with self._session(write=False) as session:
            self._require_namespace(session, namespace)
            row = session.get(NamespacePolicyRow, namespace)
            return bool(row is not None and row.skip_requires_approval)


def _listed(names: list[str]) -> str:
    """At most three names of what is left, and whether there are more."""
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")

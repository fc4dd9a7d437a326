"""Tenancy and admin: tenants, namespaces and their policies (approval, quorum),
permissions, topics and subscriptions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.cursor_targets import check_reset_target
from cursorops.core.domain.analysis.entry_filters import validate_filter_properties
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.plans.plan_record import ApprovalPolicy
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.services.broker.policies import allows_auto_topic_creation
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import SubscriptionInfo, TopicInfo


class Admin(Collaborator):
    """pulsar-admin's tenants, namespaces, topics and subscriptions, each checked first."""

    def create_tenant(self, role: str, tenant: str, admin_roles: Iterable[str] = ()) -> None:
        self.access.check(role, Operation.CREATE_TENANT, tenant, f"creating tenant {tenant}")
        self.metadata.create_tenant(tenant, admin_roles)

    def list_tenants(self, role: str) -> list[str]:
        """Superusers only, as in Pulsar."""
        self.access.check(role, Operation.LIST_TENANTS, "", "listing tenants")
        return self.metadata.list_tenants()

    def list_topics(self, role: str, namespace: str) -> list[TopicInfo]:
        """Pulsar's GET_TOPICS: tenant admins, or any role that may produce or consume there."""
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.GET_TOPICS, tenant, f"namespace {namespace}", namespace)
        return self.metadata.list_topics(namespace)

    def create_namespace(self, role: str, namespace: str) -> None:
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.CREATE_NAMESPACE, tenant, f"namespace {namespace}")
        self.metadata.create_namespace(namespace)

    def list_namespaces(self, role: str, tenant: str) -> list[str]:
        """The namespaces (``tenant/ns``) of ``tenant``: for its admins and superusers.

        Pulsar lets a tenant's admins list its namespaces; creating one is
        decided by the same rule, so that check is reused.
        """
        self.access.check(
            role, Operation.CREATE_NAMESPACE, tenant, f"namespaces of tenant {tenant}"
        )
        return self.metadata.list_namespaces(tenant)

    def grant_permission(
        self, role: str, namespace: str, grantee: str, actions: Iterable[str]
    ) -> None:
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.GRANT_PERMISSION, tenant, f"namespace {namespace}")
        self.metadata.grant_permission(namespace, grantee, actions)

    def set_namespace_policy(
        self, role: str, namespace: str, *, skip_requires_approval: bool
    ) -> None:
        """cursorops's namespace policy: whether skips there need an approval workflow.

        A namespace policy, so tenant admins only (as Pulsar's ``set-*`` policies).
        """
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.SET_NAMESPACE_POLICY, tenant, f"namespace {namespace}")
        self.metadata.set_skip_requires_approval(namespace, skip_requires_approval)

    def skip_requires_approval(self, role: str, topic: str) -> bool:
        """Whether a skip on ``topic`` must go through the approval workflow (asked as SKIP)."""
        info = self.access.authorized_topic(role, Operation.SKIP, topic)
        return self.metadata.skip_requires_approval(TopicName.parse(info.name).namespace_name)

    def set_approval_quorum(
        self, role: str, namespace: str, *, large_above_messages: int | None, approvals: int
    ) -> None:
        """Plans of more than ``large_above_messages`` messages on ``namespace`` need
        ``approvals`` distinct approvers (tenant admins set it, as every namespace policy)."""
        tenant = namespace.split("/", 1)[0]
        self.access.check(role, Operation.SET_NAMESPACE_POLICY, tenant, f"namespace {namespace}")
        self.metadata.set_approval_quorum(namespace, large_above_messages, approvals)

    def approval_policy(self, role: str, topic: str | TopicName) -> ApprovalPolicy:
        """The approval policy of ``topic``'s namespace (asked as GET_STATS on the topic)."""
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.approval_policy(TopicName.parse(info.name).namespace_name)

    def create_topic(self, role: str, topic: str, partitions: int = 0) -> TopicInfo:
        name = TopicName.parse(topic)
        self.access.check(role, Operation.CREATE_TOPIC, name.tenant, str(name))
        limit = self.config.max_partitions_per_topic
        if not isinstance(partitions, bool) and isinstance(partitions, int) and partitions > limit:
            raise InvalidArgumentError(
                f"Invalid partition count {partitions}: at most {limit} partitions per topic "
                "(max_partitions_per_topic)"
            )
        return self.metadata.create_topic(str(name), partitions)

    def auto_create_topic(self, role: str, topic: str, operation: Operation) -> TopicInfo:
        """Pulsar's auto-creation (``allowAutoTopicCreation``): a missing non-partitioned
        topic is created for whoever may do ``operation`` (produce, subscribe) on it, with
        no need of the tenant admin's CREATE_TOPIC, unless its namespace says otherwise
        (``set-auto-topic-creation --disable``): then TopicNotFoundError naming
        ``topics create``."""
        name = TopicName.parse(topic)
        self.access.check(role, operation, name.tenant, str(name), name.namespace_name)
        if not allows_auto_topic_creation(self.metadata, name.namespace_name):
            raise TopicNotFoundError(
                f"Topic '{name}' not found, and namespace {name.namespace_name} does not create "
                f"topics on first use: create it with cursorops topics create {name} (or "
                "topics create-partitioned-topic), or allow it with namespaces "
                "set-auto-topic-creation --enable"
            )
        return self.metadata.create_topic(str(name), 0)

    def topic_on_use(self, role: str, topic: str | TopicName, operation: Operation) -> TopicInfo:
        """The topic ``role`` is about to use for ``operation`` (PRODUCE, SUBSCRIBE),
        authorized; a missing one is created as the broker does on a client's first use
        (:meth:`auto_create_topic`). A partition's name is refused, as everywhere."""
        try:
            return self.access.authorized_topic(role, operation, topic)
        except TopicNotFoundError:
            # Created meanwhile by another caller: use it.
            with contextlib.suppress(AlreadyExistsError):
                self.auto_create_topic(role, str(topic), operation)
            return self.access.authorized_topic(role, operation, topic)

    def create_subscription(
        self,
        role: str,
        topic: str,
        subscription: str,
        type: SubscriptionType = SubscriptionType.EXCLUSIVE,
        properties: Mapping[str, str] | None = None,
        initial_position: str | Position = "latest",
        *,
        start_after: Position | None = None,
    ) -> SubscriptionInfo:
        """Create a subscription at latest (default, like pulsar-admin), earliest or an entry.

        A :class:`Position` (``create-subscription -m L:E``) makes that entry the
        first one delivered; it must be an entry of the (non-partitioned) topic, or
        the end. ``start_after`` instead makes the entry after it the first one
        (mark-delete at it, as Pulsar's non-durable cursor of a reader starting at a
        message id): before the first entry means the start, past the last the end.
        Entry filter properties are validated before anything is created. Where the
        namespace requires approval, a name with history is created at latest only.
        """
        info = self.topic_on_use(role, topic, Operation.SUBSCRIBE)
        if start_after is not None and info.partitions:
            raise InvalidArgumentError(
                f"A subscription after a message id needs a non-partitioned topic; "
                f"{info.name} has {info.partitions} partitions"
            )
        if not isinstance(initial_position, Position) and initial_position not in (
            "latest",
            "earliest",
        ):
            raise InvalidArgumentError(
                f"Invalid initial position '{initial_position}': latest, earliest or L:E"
            )
        if not subscription or not subscription.strip():
            raise InvalidArgumentError("Subscription name must not be empty")
        validate_filter_properties(dict(properties or {}))
        if info.approval_required and (initial_position != "latest" or start_after is not None):
            self._refuse_with_history(info, subscription)
        if isinstance(initial_position, Position):
            if info.partitions:
                raise InvalidArgumentError(
                    "A subscription at a message id needs a non-partitioned topic; "
                    f"{info.name} has {info.partitions} partitions"
                )
            check_reset_target(initial_position, self.context.layout(info.name))
        snapshots = {}
        for partition in info.partition_names():
            state = CursorState()
            layout = self.context.layout(partition)
            if start_after is not None:
                if layout.contains(start_after) or start_after == EARLIEST:
                    state.mark_delete = start_after
                elif start_after > layout.last_position:
                    state.mark_delete = layout.last_position
            elif initial_position == "latest":
                state.mark_delete = layout.last_position
            elif isinstance(initial_position, Position):
                state.reset(initial_position, layout)
            snapshots[partition] = cursor_codec.encode(state)
        return self.metadata.create_subscription(
            info.name, subscription, type, dict(properties or {}), snapshots
        )

    def list_subscriptions(self, role: str, topic: str) -> list[SubscriptionInfo]:
        """Pulsar's GET_SUBSCRIPTIONS, which needs ``consume``."""
        info = self.access.authorized_topic(role, Operation.GET_SUBSCRIPTIONS, topic)
        return self.metadata.list_subscriptions(info.name)

    def end_reader_subscription(self, role: str, topic: str | TopicName, subscription: str) -> None:
        """Delete the subscription a reader (a non-durable consumer) created for itself, as
        it closes: no one's cursor, so neither gated nor audited. The caller (the binary
        protocol's session) calls it only for a subscription its reader created."""
        info = self.access.authorized_topic(role, Operation.UNSUBSCRIBE, topic)
        self.metadata.delete_subscription(
            info.name, subscription, ticket=Ticket.not_a_move("a reader's own subscription")
        )

    def _refuse_with_history(self, info: TopicInfo, subscription: str) -> None:
        """A subscription created anywhere but at the latest message under a name that has
        history (an audit record: every unsubscribe and every gated change writes one) is a
        cursor move: refused where the namespace requires approval, as a reset is."""
        if self.metadata.audit_log(info.name, 1, subscription=subscription):
            self.access.refuse_without_approval(
                info,
                f"creating subscription '{subscription}' again anywhere but at the latest "
                "message (the name has history: that is a reset)",
                "the cursorops_reset_cursor workflow, after creating it at latest",
            )

    def update_subscription_properties(
        self, role: str, topic: str, subscription: str, properties: Mapping[str, str]
    ) -> SubscriptionInfo:
        """Replace a subscription's properties (Pulsar authorizes this as SUBSCRIBE).

        As pulsar-admin's ``update-subscription-properties``, the given map replaces
        the old one whole; an empty map clears it. Entry filters are validated first.
        """
        info = self.access.authorized_topic(role, Operation.SUBSCRIBE, topic)
        validate_filter_properties(dict(properties))
        return self.metadata.update_subscription_properties(
            info.name, subscription, dict(properties)
        )

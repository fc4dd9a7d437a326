"""The façade every front door calls: CLI, REST plugin, Airflow tasks.

A :class:`Broker` owns the two stores and answers admin and client
operations with Pulsar's semantics, checking the caller's role first. It holds
no cursor state between calls: each call loads what it needs from the stores,
so several processes may share one installation.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from core import authz, backlog, cursor_codec, skip
from core.authz import Operation
from core.backlog import PartitionAnalysis
from core.backlog_audit import BacklogSample
from core.config import Config
from core.cursor import AckColumns, AckTarget, CursorState
from core.entry_filters import EntryFilters, first_messages, validate_filter_properties
from core.errors import (
    ApprovalRequiredError,
    EntryNotFoundError,
    InvalidArgumentError,
    InvalidSkipPlanError,
    NotAuthorizedError,
    NotFoundError,
    PositionOutOfRangeError,
    SubscriptionBusyError,
    TopicNotFoundError,
    UnsupportedSubscriptionTypeError,
)
from core.ledger_layout import LedgerLayout
from core.managed_cursor import ManagedCursor, replay
from core.message_id import MessageId
from core.plan_record import (
    ApprovalPolicy,
    ApprovalRequest,
    PlanBinding,
    PlanRecord,
    messages_of,
)
from core.position import EARLIEST, Position
from core.skip_plan import SkipColumns, SkipPlan
from core.store.ledger import LedgerStore
from core.store.metadata import (
    AuditEntry,
    AuditRecord,
    MetadataStore,
    SegmentInfo,
    SubscriptionInfo,
    TopicInfo,
)
from core.subscription import SubscriptionType
from core.topic_name import TopicName
from core.topic_scan import ScanPartition, ScanSubscription, TopicScan
from core.topic_stats import SubscriptionStats, TopicStats

# The read path (core.dispatch, core.store.segment_reader) and the producer are imported
# where they are used: a command that only counts or skips does not load them.
if TYPE_CHECKING:
    from core.dispatch import Dispatcher, Message, PartitionSource
    from core.message_id_columns import MessageIdColumns
    from core.producer import Entry, OutgoingMessage, Producer
    from core.store.migrate import Migration


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


PAYLOAD_EXCERPT_BYTES = 120
"""Bytes of payload :meth:`Broker.describe_messages` returns per message."""


@dataclass(frozen=True)
class PartitionProjection:
    """One touched partition's exact backlog (messages) now and after a plan."""

    topic_partition: str
    items: int
    before: int
    after: int


@dataclass(frozen=True)
class BacklogProjection:
    """A subscription's exact backlog (messages) now and after a plan, whole topic."""

    topic: str
    subscription: str
    before: int
    after: int
    partitions: tuple[PartitionProjection, ...]


@dataclass(frozen=True)
class MessageDescription:
    """What a reviewer sees of one planned message."""

    message_id: MessageId
    topic_partition: str
    key: str | None
    publish_time_ms: int | None
    deliver_at_ms: int | None
    properties: tuple[tuple[str, str], ...]
    payload_excerpt: bytes
    payload_size: int
    whole_batch_of: int
    """The batch size when the item is a whole batched entry, else 0."""
    already_acknowledged: bool


class Broker:
    def __init__(self, config: Config, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        self.metadata = MetadataStore.from_config(config)
        self.ledgers = LedgerStore.from_config(config, self.metadata)

    @staticmethod
    def migrate_metadata(config: Config) -> Migration:
        """Upgrade the metadata store ``config`` names to this release's schema; idempotent.

        What ``cursorops db migrate`` runs, without opening a Broker (an open of a
        shared store that is behind is refused). Not authorized by role: whoever
        holds the store's URL and credentials may change its schema.
        """
        from core.store.migrate import migrate

        return migrate(config)

    def close(self) -> None:
        self.metadata.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- authorization -------------------------------------------------------

    def _check(
        self,
        role: str,
        operation: Operation,
        tenant: str,
        resource: str,
        namespace: str | None = None,
    ) -> None:
        """Authorize before anything is looked up, so a refusal never reveals what exists."""
        if role in self.config.superuser_roles:
            return
        if operation in authz.SUPERUSER_ONLY:
            authz.check(role, operation, resource, superusers=self.config.superuser_roles)
            return
        try:
            # One statement: the tenant's admins and the role's grant in the namespace.
            asked = namespace if authz.GRANTS_ALLOWING[operation] else None
            tenant_admins, granted = self.metadata.access(tenant, asked, role)
        except NotFoundError as exc:
            raise NotAuthorizedError(
                f"Role '{role}' is not authorized to {operation.value} on {resource}"
            ) from exc
        authz.check(
            role,
            operation,
            resource,
            superusers=self.config.superuser_roles,
            tenant_admins=tenant_admins,
            granted_actions=granted,
        )

    def authorized_topic(
        self, role: str, operation: Operation, topic: str | TopicName
    ) -> TopicInfo:
        """Parse ``topic`` (unless given parsed), check ``role`` for ``operation``, load it.

        The one authorization rule of every topic operation, for the Python
        path and for the Spark jobs alike. A partition's name is refused: give
        the topic.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.is_partition:
            raise InvalidArgumentError(f"'{topic}' names a partition; give the topic '{name.base}'")
        self._check(role, operation, name.tenant, str(name), name.namespace_name)
        return self.metadata.get_topic(str(name))

    # -- tenants, namespaces, topics, subscriptions --------------------------

    def create_tenant(self, role: str, tenant: str, admin_roles: Iterable[str] = ()) -> None:
        self._check(role, Operation.CREATE_TENANT, tenant, f"creating tenant {tenant}")
        self.metadata.create_tenant(tenant, admin_roles)

    def list_tenants(self, role: str) -> list[str]:
        """Superusers only, as in Pulsar."""
        self._check(role, Operation.LIST_TENANTS, "", "listing tenants")
        return self.metadata.list_tenants()

    def list_topics(self, role: str, namespace: str) -> list[TopicInfo]:
        """Pulsar's GET_TOPICS: tenant admins, or any role that may produce or consume there."""
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.GET_TOPICS, tenant, f"namespace {namespace}", namespace)
        return self.metadata.list_topics(namespace)

    def create_namespace(self, role: str, namespace: str) -> None:
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.CREATE_NAMESPACE, tenant, f"namespace {namespace}")
        self.metadata.create_namespace(namespace)

    def grant_permission(
        self, role: str, namespace: str, grantee: str, actions: Iterable[str]
    ) -> None:
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.GRANT_PERMISSION, tenant, f"namespace {namespace}")
        self.metadata.grant_permission(namespace, grantee, actions)

    def set_namespace_policy(
        self, role: str, namespace: str, *, skip_requires_approval: bool
    ) -> None:
        """cursorops's namespace policy: whether skips there need an approval workflow.

        A namespace policy, so tenant admins only (as Pulsar's ``set-*`` policies).
        """
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.SET_NAMESPACE_POLICY, tenant, f"namespace {namespace}")
        self.metadata.set_skip_requires_approval(namespace, skip_requires_approval)

    def skip_requires_approval(self, role: str, topic: str) -> bool:
        """Whether a skip on ``topic`` must go through the approval workflow (asked as SKIP)."""
        info = self.authorized_topic(role, Operation.SKIP, topic)
        return self.metadata.skip_requires_approval(TopicName.parse(info.name).namespace_name)

    def set_approval_quorum(
        self, role: str, namespace: str, *, large_above_messages: int | None, approvals: int
    ) -> None:
        """Plans of more than ``large_above_messages`` messages on ``namespace`` need
        ``approvals`` distinct approvers (tenant admins set it, as every namespace policy)."""
        tenant = namespace.split("/", 1)[0]
        self._check(role, Operation.SET_NAMESPACE_POLICY, tenant, f"namespace {namespace}")
        self.metadata.set_approval_quorum(namespace, large_above_messages, approvals)

    def approval_policy(self, role: str, topic: str | TopicName) -> ApprovalPolicy:
        """The approval policy of ``topic``'s namespace (asked as GET_STATS on the topic)."""
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.approval_policy(TopicName.parse(info.name).namespace_name)

    def _refuse_without_approval(self, info: TopicInfo, what: str) -> None:
        """The one check every door of an irreversible operation makes: on a namespace that
        requires approval, only an approved plan record applies (:meth:`apply_approved_skip`)."""
        if info.approval_required:
            namespace = TopicName.parse(info.name).namespace_name
            raise ApprovalRequiredError(
                f"Namespace {namespace} requires a second person's approval for {what}: "
                "nothing applied. Ask through the cursorops_skip_messages or "
                "cursorops_skip_matching workflow (REST answers 202 with the run; the CLI "
                "starts it when logged in with --admin-url)"
            )

    # -- plan records of gated operations -------------------------------------

    def save_plan_record(
        self, binding: PlanBinding, plan: SkipPlan, document: Mapping[str, object]
    ) -> PlanRecord:
        """Store ``plan`` as the current plan of ``binding``'s run; the record, its digest and
        the approvals it needs (the namespace's policy, by the plan's size in messages)."""
        info = self.authorized_topic(binding.role, Operation.SKIP, plan.topic)
        if info.name != plan.topic:
            raise InvalidSkipPlanError(f"Invalid skip plan: '{plan.topic}' is not canonical")
        policy = self.metadata.approval_policy(TopicName.parse(info.name).namespace_name)
        record = PlanRecord.create(
            binding,
            plan,
            document,
            required_approvals=policy.approvals_for(messages_of(plan)),
            created_at_ms=self.clock(),
        )
        return self.metadata.plans.save(record)

    def current_plan_record(self, role: str, dag_id: str, run_id: str) -> PlanRecord | None:
        """The plan a run is bound to now (its newest record), checked against its digest;
        None when the run planned nothing. ``role`` must read the topic's stats."""
        record = self.metadata.plans.current(dag_id, run_id)
        if record is None:
            return None
        self.authorized_topic(role, Operation.GET_STATS, record.topic)
        return record.verified()

    def waiting_plan_records(self, role: str, topic: str) -> list[PlanRecord]:
        """The topic's plan records not applied, newest first (GET_STATS on the topic)."""
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.plans.waiting(info.name)

    def record_approval_request(self, request: ApprovalRequest) -> None:
        """What a gate shows for a plan record, recorded before it waits."""
        self.metadata.plans.record_request(request)

    def approval_requests(self, dag_id: str, run_id: str) -> list[ApprovalRequest]:
        return self.metadata.plans.requests(dag_id, run_id)

    def apply_approved_skip(
        self,
        record: PlanRecord,
        approvals: Sequence[Mapping[str, object]],
        *,
        via: str = "airflow",
    ) -> skip.SkipOutcome:
        """Apply an approved plan record: the only door open on a namespace that requires
        approval. The caller has checked ``approvals`` (who, when, for this digest).

        Planned again against the current cursor first: ids acknowledged meanwhile
        are reported, and anything outside the approved set refuses the whole plan.
        The acknowledgements, the audit record and the record's claim (applied at most
        once) commit in one transaction, as the requester's role.
        """
        record = record.verified()
        role = record.binding.role
        approved = record.skip_plan()
        again = self.plan_skip(role, record.topic, record.subscription, approved.message_ids())
        outside = _keys(again) - _keys(approved)
        if outside or len(again) != len(approved):
            raise InvalidSkipPlanError(
                f"Planning plan {record.digest} again would acknowledge messages outside the "
                f"approved set ({len(outside)} of them): nothing applied"
            )
        by = [str(a.get("approver")) for a in approvals]
        extra = {"runId": record.binding.run_id, "planDigest": record.digest, "approvedBy": by}
        return self.apply_skip(role, approved, via=via, _approved=(record, extra))

    def create_topic(self, role: str, topic: str, partitions: int = 0) -> TopicInfo:
        name = TopicName.parse(topic)
        self._check(role, Operation.CREATE_TOPIC, name.tenant, str(name))
        limit = self.config.max_partitions_per_topic
        if not isinstance(partitions, bool) and isinstance(partitions, int) and partitions > limit:
            raise InvalidArgumentError(
                f"Invalid partition count {partitions}: at most {limit} partitions per topic "
                "(max_partitions_per_topic)"
            )
        return self.metadata.create_topic(str(name), partitions)

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
        Entry filter properties are validated before anything is created.
        """
        info = self.authorized_topic(role, Operation.SUBSCRIBE, topic)
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
        if isinstance(initial_position, Position):
            if info.partitions:
                raise InvalidArgumentError(
                    "A subscription at a message id needs a non-partitioned topic; "
                    f"{info.name} has {info.partitions} partitions"
                )
            self._check_reset_target(initial_position, self._layout(info.name))
        snapshots = {}
        for partition in info.partition_names():
            state = CursorState()
            layout = self._layout(partition)
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
        info = self.authorized_topic(role, Operation.GET_SUBSCRIPTIONS, topic)
        return self.metadata.list_subscriptions(info.name)

    def delete_subscription(
        self, role: str, topic: str | TopicName, subscription: str, *, force: bool = False
    ) -> None:
        """``topics unsubscribe``: Pulsar's UNSUBSCRIBE, which needs ``consume``.

        As in Pulsar, refused while a consumer is connected (its lease has not
        lapsed), unless ``force``.
        """
        info = self.authorized_topic(role, Operation.UNSUBSCRIBE, topic)
        if info.approval_required:
            left = sum(
                row.result.messages for row in self.analyze_backlog(role, info.name, subscription)
            )
            if left:
                self._refuse_without_approval(
                    info, f"unsubscribing '{subscription}', which has {left} message(s) left"
                )
        if not force:
            now = self.clock()
            with self.metadata.subscription_transaction(info.name, subscription, now) as txn:
                live = [c for c in txn.consumers() if c.lease_expires_ms > now]
            if live:
                raise SubscriptionBusyError(
                    f"Subscription '{subscription}' of {info.name} has {len(live)} active "
                    "connected consumer(s); use force to delete it anyway"
                )
        self.metadata.delete_subscription(info.name, subscription)

    def update_subscription_properties(
        self, role: str, topic: str, subscription: str, properties: Mapping[str, str]
    ) -> SubscriptionInfo:
        """Replace a subscription's properties (Pulsar authorizes this as SUBSCRIBE).

        As pulsar-admin's ``update-subscription-properties``, the given map replaces
        the old one whole; an empty map clears it. Entry filters are validated first.
        """
        info = self.authorized_topic(role, Operation.SUBSCRIBE, topic)
        validate_filter_properties(dict(properties))
        return self.metadata.update_subscription_properties(
            info.name, subscription, dict(properties)
        )

    # -- producing -----------------------------------------------------------

    def produce(
        self,
        role: str,
        topic: str,
        messages: Sequence[OutgoingMessage],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> list[MessageId]:
        return self._producer(role, topic, batch_size, producer_name).send(messages, self.clock())

    def produce_columns(
        self,
        role: str,
        topic: str,
        payloads: Sequence[bytes],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> MessageIdColumns:
        """Plain messages (a payload each, no key, properties or delay), ids as columns.

        What :meth:`produce` writes for the same plain messages, built without an
        object per message: the way to generate millions of them.
        """
        producer = self._producer(role, topic, batch_size, producer_name)
        return producer.send_columns(payloads, self.clock())

    def append_entries(self, role: str, topic: str, entries: Sequence[Entry]) -> list[Position]:
        """Append entries a client built (batching, routing and sequence ids are its own)
        to a non-partitioned topic or one partition (``t-partition-2``); their positions.

        Durable when it returns; one commit for the lot (the binary protocol's
        group commit hands every entry queued meanwhile to one call).
        """
        from core.producer import entry_columns

        name = TopicName.parse(topic)
        self._check(role, Operation.PRODUCE, name.tenant, str(name.base), name.namespace_name)
        if not entries:
            return []
        sizes, columns = entry_columns(entries)
        return self.ledgers.append_columns(name, sizes, columns)

    def _producer(self, role: str, topic: str, batch_size: int, producer_name: str) -> Producer:
        from core.producer import Producer

        info = self.authorized_topic(role, Operation.PRODUCE, topic)
        return Producer(self.ledgers, info, producer_name=producer_name, batch_size=batch_size)

    # -- cursors -------------------------------------------------------------

    @staticmethod
    def _partition_topics(info: TopicInfo) -> list[TopicName]:
        """The parsed names of :meth:`TopicInfo.partition_names`, parsing the topic once."""
        base = TopicName.parse(info.name)
        return (
            [base] if not info.partitions else [base.partition(i) for i in range(info.partitions)]
        )

    def _layout(self, topic_partition: str) -> LedgerLayout:
        return LedgerLayout.of(
            (info.ledger_id, info.entries) for info in self.metadata.ledgers(topic_partition)
        )

    def _cursor(
        self, topic_partition: str, subscription: str, layout: LedgerLayout | None = None
    ) -> ManagedCursor:
        """Open a cursor; pass ``layout`` when the caller already read the ledger list."""
        return ManagedCursor.open(
            self.metadata,
            topic_partition,
            subscription,
            layout if layout is not None else self._layout(topic_partition),
        )

    def _entry_arrays(
        self,
        topic_partition: str | TopicName,
        layout: LedgerLayout | None = None,
        segments: Sequence[SegmentInfo] | None = None,
    ) -> skip.SkipLookup:
        """The partition's entry index; pass ``layout`` and ``segments`` when the caller
        already read the ledgers and the segment list."""
        index = self.ledgers.entry_index(
            topic_partition
            if isinstance(topic_partition, TopicName)
            else TopicName.parse(topic_partition),
            segments,
        )
        return skip.SkipLookup(
            layout=layout if layout is not None else self._layout(str(topic_partition)),
            ledger_ids=np.asarray(index.ledger_id, dtype=np.int64),
            entry_ids=np.asarray(index.entry_id, dtype=np.int64),
            batch_sizes=np.asarray(index.batch_size, dtype=np.int64),
            deliver_at=np.asarray(index.deliver_at, dtype=np.int64),
        )

    def skip_messages(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        ids: Sequence[MessageId],
        *,
        via: str = "broker",
    ) -> skip.SkipOutcome:
        """PIP-423 skip, the one path of every front door: validate, then acknowledge in one
        transaction with its audit record (``via`` names the door: ``cli``, ``rest``, ...).

        Raises before writing anything when any id is bad. Shared and Key_Shared
        only ("Unsupported subscription type." otherwise). A partition's name
        (``t-partition-2``) skips on that partition only and refuses ids of others,
        as Pulsar's REST path does. On a namespace that requires approval it is
        refused (ApprovalRequiredError) before anything is read.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        info = self.authorized_topic(role, Operation.SKIP, name.base if name.is_partition else name)
        self._refuse_without_approval(info, "skips")
        if not ids:
            raise InvalidArgumentError("No message ids given")
        selection, layouts = self._validated_skip(
            info, subscription, skip.IdArrays.of(ids), with_states=False
        )
        plan = SkipPlan(info.name, subscription, selection.columns, self.clock())
        if name.is_partition:
            plan.check_only_on(str(name))
        # The plan was validated a moment ago by this call: validating it again would only
        # read the same ledger lists, which no cursor lock protects either. What is still
        # unacknowledged is decided under the locks, once: what is acknowledged there was
        # acknowledged before this call (nothing came "meanwhile").
        rows = np.arange(len(plan.columns), dtype=np.int64)
        return self._apply_validated(
            role, info, plan, plan.columns, rows, layouts, via, planned_now=True
        )

    def plan_skip(
        self, role: str, topic: str | TopicName, subscription: str, ids: Sequence[MessageId]
    ) -> SkipPlan:
        """Validate and route ``ids`` without changing anything: the plan to preview and approve.

        Every id is checked against the topic's ledgers (all-or-nothing, every
        bad id named); the plan records each message's partition, batch size,
        delivery time and whether it is already acknowledged. Stamped with the
        broker's clock.
        """
        info = self.authorized_topic(role, Operation.SKIP, topic)
        if not ids:
            raise InvalidArgumentError("No message ids given")
        selection, _ = self._validated_skip(
            info, subscription, skip.IdArrays.of(ids), with_states=True
        )
        return SkipPlan(info.name, subscription, selection.columns, self.clock())

    def _validated_skip(
        self, info: TopicInfo, subscription: str, ids: skip.IdArrays, *, with_states: bool
    ) -> tuple[skip.SkipSelection, dict[str, LedgerLayout]]:
        """:func:`core.skip.validate` against the stores as they are now, and the ledger layouts
        of the partitions the ids are on.

        ``with_states``: read those partitions' cursors to mark what is acknowledged already;
        without, nothing is marked (an apply decides that from the cursors under their locks).
        """
        owners: dict[int, tuple[str, int]] = {}
        layouts: dict[str, LedgerLayout] = {}
        # One read transaction: the subscription, every partition's ledger list (it serves
        # both the routing and the range checks) and the segments of the partitions the ids
        # are on, in three statements.
        with self.metadata.reading() as view:
            sub = view.subscription(info.name, subscription)
            if not sub.type.allows_skip:
                raise UnsupportedSubscriptionTypeError(
                    f"Unsupported subscription type. Skipping messages needs a Shared or "
                    f"Key_Shared subscription; '{subscription}' is {sub.type.value}"
                )
            ledger_lists = view.ledgers_of(info.partition_names())
            for index, partition in enumerate(info.partition_names()):
                ledgers = ledger_lists[partition]
                layouts[partition] = LedgerLayout.of((i.ledger_id, i.entries) for i in ledgers)
                for ledger in ledgers:
                    owners[ledger.ledger_id] = (partition, index if info.partitions else -1)
            wanted = sorted(
                {
                    owners[ledger][0]
                    for ledger in np.unique(ids.ledger_ids).tolist()
                    if ledger in owners
                }
            )
            segments = view.segments_of(wanted)
        facts = {name: self._entry_arrays(name, layouts[name], segments[name]) for name in wanted}
        states = {
            name: self._cursor(name, subscription, layouts[name]).state
            if with_states
            else CursorState()
            for name in wanted
        }
        return skip.validate(ids, owners, facts, states), {name: layouts[name] for name in wanted}

    def apply_skip(
        self,
        role: str,
        plan: SkipPlan,
        *,
        via: str = "broker",
        _approved: tuple[PlanRecord, Mapping[str, object]] | None = None,
    ) -> skip.SkipOutcome:
        """Acknowledge exactly the plan's messages, all partitions in one transaction.

        The plan may be stale or forged, so it is validated again against the
        current ledgers and cursor (authorization, subscription type, every id in
        the topic, partition routing, batch index range): any bad item raises and
        nothing is written. Which messages are still unacknowledged is decided from
        the cursors read under their row locks, in the writing transaction, so a
        message acknowledged by anyone since planning is reported as
        ``acknowledged_meanwhile``, never as skipped. The acknowledgements and the
        audit record (stamped with the broker's clock) commit in that one
        transaction, or neither does; ``via`` names the front door in the record
        (``cli``, ``spark``, ...). Idempotent: applying again acknowledges nothing more.
        On a namespace that requires approval it is refused: only
        :meth:`apply_approved_skip` applies there.
        """
        info = self.authorized_topic(role, Operation.SKIP, plan.topic)
        if _approved is None:
            self._refuse_without_approval(info, "skips")
        if info.name != plan.topic:
            raise InvalidSkipPlanError(
                f"Invalid skip plan: topic '{plan.topic}' is not a canonical topic name "
                f"('{info.name}')"
            )
        columns = plan.columns
        if skip.has_repeats(columns.ledger_id, columns.entry_id, columns.batch_index):
            raise InvalidSkipPlanError(
                f"Invalid skip plan {plan.plan_id}: a message is listed twice; nothing skipped"
            )
        ids = skip.IdArrays(
            columns.ledger_id, columns.entry_id, columns.partition, columns.batch_index
        )
        selection, layouts = self._validated_skip(info, plan.subscription, ids, with_states=False)
        items, source = selection.columns, selection.source
        # The plan's partition of each validated item, in the validation's numbering.
        code_of = {name: code for code, name in enumerate(items.names)}
        planned_code = np.array([code_of.get(name, -1) for name in columns.names], dtype=np.int64)
        elsewhere = np.flatnonzero(planned_code[columns.name_index[source]] != items.name_index)
        if elsewhere.size:
            row = int(elsewhere[0])
            said = columns.names[int(columns.name_index[source[row]])]
            raise InvalidSkipPlanError(
                f"Invalid skip plan {plan.plan_id}: {items.item(row).message_id.triplet()} is on "
                f"'{items.names[int(items.name_index[row])]}', not '{said}'; nothing skipped"
            )
        return self._apply_validated(role, info, plan, items, source, layouts, via, _approved)

    def _apply_validated(
        self,
        role: str,
        info: TopicInfo,
        plan: SkipPlan,
        items: SkipColumns,
        source: npt.NDArray[np.int64],
        layouts: Mapping[str, LedgerLayout],
        via: str,
        approved: tuple[PlanRecord, Mapping[str, object]] | None = None,
        *,
        planned_now: bool = False,
    ) -> skip.SkipOutcome:
        """Write a validated plan: ``items`` are its messages as validated, ``source`` each
        one's row in the plan, ``layouts`` the partitions they are on (only their cursors
        are locked: a skip waits for no writer of the partitions it leaves alone)."""
        columns = plan.columns
        code_of = {name: code for code, name in enumerate(items.names)}
        was_acked = (
            np.ones(len(source), dtype=np.bool_)
            if planned_now
            else columns.already_acknowledged[source]
        )
        # The content hash is a pass over every item: taken before the row locks.
        plan_id = plan.plan_id
        names = sorted(layouts)
        outcomes: list[skip.SkipOutcome] = []

        def decide(states: list[CursorState]) -> tuple[list[AckColumns], AuditEntry]:
            # The cursors as they are under their row locks: what is reported as
            # skipped is exactly what this transaction writes.
            state_of = dict(zip(names, states, strict=True))
            acked = np.zeros(len(items), dtype=np.bool_)
            for code, name in enumerate(items.names):
                rows = np.flatnonzero(items.name_index == code)
                acked[rows] = state_of[name].acked_many(
                    items.ledger_id[rows], items.entry_id[rows], items.batch_index[rows]
                )
            fresh = np.flatnonzero(~acked)
            per_partition = dict.fromkeys(plan.partitions(), 0)
            counts = np.bincount(items.name_index[fresh], minlength=len(items.names))
            for name, count in zip(items.names, counts.tolist(), strict=True):
                per_partition[name] += count
            outcome = skip.SkipOutcome(
                info.name,
                plan.subscription,
                plan_id,
                skipped=items.take(fresh),
                already_acknowledged=items.take(np.flatnonzero(acked & was_acked)),
                acknowledged_meanwhile=items.take(np.flatnonzero(acked & ~was_acked)),
                per_partition=per_partition,
                part_of=plan.part_of,
            )
            outcomes.append(outcome)
            detail = {**outcome.to_pulsar_json(), "via": via, **(approved[1] if approved else {})}
            acks = [
                skip.acknowledgements(
                    items, fresh[items.name_index[fresh] == code_of.get(name, -1)]
                )
                for name in names
            ]
            return acks, AuditEntry("skip", info.name, plan.subscription, role, detail, at_ms)

        at_ms = self.clock()
        # One transaction the skip composes: the cursors read once under their row locks
        # (in the fixed lock order), the acknowledgements decided from them, the audit record
        # and an approved plan's claim; all of it commits, or nothing does.
        with self.metadata.transaction() as work:
            read = [work.cursors.read(name, plan.subscription, lock="update") for name in names]
            states = [
                replay(record, layouts[n]) for (_, record), n in zip(read, names, strict=True)
            ]
            acks, audit = decide(states)
            for (cursor_id, _), ack in zip(read, acks, strict=True):
                if len(ack):
                    work.cursors.append(cursor_id, [cursor_codec.encode_columns(ack)])
            audit_id = work.record_audit(audit)
            if approved is not None:
                done = outcomes[-1]
                applied = {
                    **approved[1],
                    "auditId": audit_id,
                    "skipped": len(done.skipped),
                    "alreadyAcknowledged": len(done.already_acknowledged),
                    "acknowledgedMeanwhile": len(done.acknowledged_meanwhile),
                }
                work.claim_plan(approved[0].digest, at_ms, applied)
        return outcomes[-1]

    def reset_cursor(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> dict[str, str]:
        """Reset to a position (a non-partitioned topic, or one partition) or to a publish
        time (any topic, or one partition).

        A partition's name (``t-partition-2``) resets that partition only, as
        pulsar-admin's does. With a time, each partition's next entry becomes its
        first entry published at or after that time. Returns the new mark-delete
        per partition.
        """
        parsed = TopicName.parse(topic)
        info = self.authorized_topic(role, Operation.RESET_CURSOR, parsed.base)
        partitions = info.partition_names()
        if parsed.is_partition:
            if parsed.partition_index >= info.partitions:
                raise TopicNotFoundError(
                    f"Topic '{parsed}' not found: {info.name} has {info.partitions} partitions"
                )
            partitions = [str(parsed)]
        self.metadata.get_subscription(info.name, subscription)
        self._refuse_without_approval(info, "reset-cursor (it acknowledges or redelivers)")
        if (position is None) == (timestamp_ms is None):
            raise InvalidArgumentError("Give exactly one of a message id or a time")
        if position is not None and len(partitions) > 1:
            raise InvalidArgumentError(
                "Reset to a message id needs a non-partitioned topic or one partition; use a "
                f"time on partitioned topic {info.name}"
            )
        layout = self._layout(partitions[0]) if position is not None else None
        if position is not None and layout is not None:
            self._check_reset_target(position, layout)
        result = {}
        for name in partitions:
            cursor = self._cursor(name, subscription, layout)
            target = position if position is not None else self._first_at(name, timestamp_ms or 0)
            cursor.reset(target)
            result[name] = str(cursor.mark_delete)
        return result

    @staticmethod
    def _check_reset_target(position: Position, layout: LedgerLayout) -> None:
        """A cursor may start at an entry of the topic, at its start or just past its end."""
        last = layout.last_position
        end = Position(last.ledger_id, last.entry_id + 1)
        if position not in (EARLIEST, end) and not layout.contains(position):
            raise PositionOutOfRangeError(
                f"Cannot start at {position}: no such entry (the last entry is {last})"
            )

    def _first_at(self, topic_partition: str, timestamp_ms: int) -> Position:
        index = self.ledgers.entry_index(TopicName.parse(topic_partition))
        publish = np.asarray(index.publish_time, dtype=np.int64)
        rows = np.flatnonzero(publish >= timestamp_ms)
        if rows.size == 0:
            layout = self._layout(topic_partition)
            last = layout.last_position
            return Position(last.ledger_id, last.entry_id + 1) if last != EARLIEST else EARLIEST
        row = int(rows[0])
        return Position(int(index.ledger_id[row]), int(index.entry_id[row]))

    # -- reading -------------------------------------------------------------

    def _sources(self, info: TopicInfo) -> list[PartitionSource]:
        """Each partition, read lazily segment by segment from a position on."""
        from core.dispatch import PartitionSource
        from core.store import segment_reader

        sources = []
        for index, name in enumerate(info.partition_names()):

            def read_after(after: Position, name: str = name) -> Iterator[pa.RecordBatch]:
                return segment_reader.batches_after(
                    self.ledgers.root, self.metadata.segments(name), after
                )

            def layout(name: str = name) -> LedgerLayout:
                return self._layout(name)

            sources.append(
                PartitionSource(name, index if info.partitions else -1, layout, read_after)
            )
        return sources

    def dispatcher(
        self, role: str, topic: str, subscription: str, *, partition: int | None = None
    ) -> Dispatcher:
        """The subscription's dispatcher; its consumers share state with every other process.

        ``partition``: serve that partition of a partitioned topic only (the
        binary protocol subscribes partition by partition).
        """
        from core.dispatch import Dispatcher
        from core.store import segment_reader

        info = self.authorized_topic(role, Operation.CONSUME, topic)
        sub = self.metadata.get_subscription(info.name, subscription)
        # The dispatcher's own cache of decoded row groups: each dispatch reads on from
        # where the last one stopped, so a drained backlog decodes each row group once.
        cache = segment_reader.SegmentCache(self.ledgers.root)

        def cached(name: str) -> Callable[[Position], Iterator[pa.RecordBatch]]:
            return lambda after: cache.batches_after(self.metadata.segments(name), after)

        sources = [
            dataclasses.replace(
                source, read_after=cached(source.topic), read_segments=cache.batches_after
            )
            for source in self._sources(info)
            if partition is None or source.partition == partition
        ]
        if not sources:
            raise InvalidArgumentError(f"{info.name} has no partition {partition}")
        return Dispatcher(
            sub.type,
            self.metadata,
            info.name,
            subscription,
            sources,
            self.clock,
            lease_ms=self.config.consumer_lease_ms,
        )

    def consume(
        self, role: str, topic: str, subscription: str, count: int, *, ack: bool = False
    ) -> list[Message]:
        """Receive up to ``count`` messages available now; acknowledge them when ``ack``.

        The consumer joins the subscription's consumers (across processes) for
        the call and leaves at its end: unacknowledged messages become
        deliverable again, and an Exclusive subscription held by another live
        consumer is refused.
        """
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        dispatcher = self.dispatcher(role, topic, subscription)
        consumer = dispatcher.subscribe("cursorops-cli", receiver_queue_size=min(count, 1000))
        try:
            messages = consumer.receive_many(count)
            if ack and messages:
                consumer.acknowledge(messages)
        finally:
            consumer.close()
        return messages

    def last_position(self, role: str, topic: str) -> Position:
        """The last entry of a non-partitioned topic or of one partition (``t-partition-2``);
        EARLIEST when it has none. Needs ``consume``, as Pulsar's getLastMessageId."""
        name = TopicName.parse(topic)
        self.authorized_topic(role, Operation.CONSUME, name.base)
        return self._layout(str(name)).last_position

    def peek_messages(self, role: str, topic: str, subscription: str, count: int) -> list[Message]:
        """The next ``count`` unacknowledged messages, delayed ones included, without delivering.

        Reads from the mark-delete position on and stops after ``count``. A
        partition's name (``t-partition-2``) peeks that partition only.
        """
        info, sources = self._partition_sources(role, Operation.PEEK_MESSAGES, topic)
        self.metadata.get_subscription(info.name, subscription)
        if count < 1:
            raise InvalidArgumentError("The number of messages must be at least 1")
        states = [self._cursor(source.topic, subscription).state for source in sources]
        from core import dispatch

        return dispatch.peek(sources, states, count)

    def examine_message(
        self, role: str, topic: str, initial_position: str, message_position: int
    ) -> Message:
        """Pulsar's examine-message: the ``message_position``-th entry (1-based) counted
        from the ``earliest`` or the ``latest`` entry of a non-partitioned topic or of one
        partition, acknowledged or not; its first message (PEEK_MESSAGES).
        """
        info, sources = self._partition_sources(role, Operation.PEEK_MESSAGES, topic)
        if initial_position not in ("earliest", "latest"):
            raise InvalidArgumentError(
                f"Invalid initial position '{initial_position}': earliest or latest"
            )
        if isinstance(message_position, bool) or not isinstance(message_position, int):
            raise InvalidArgumentError(f"Invalid message position {message_position!r}")
        if message_position < 1:
            raise InvalidArgumentError("The message position must be at least 1")
        if len(sources) != 1:
            raise InvalidArgumentError(
                f"{info.name} has {info.partitions} partitions: examine one partition "
                f"('{info.name}-partition-0')"
            )
        facts = self._entry_arrays(sources[0].topic)
        size = int(facts.ledger_ids.size)
        if message_position > size:
            raise EntryNotFoundError(
                f"No message at position {message_position} from {initial_position}: "
                f"{sources[0].topic} has {size} entries"
            )
        row = message_position - 1 if initial_position == "earliest" else size - message_position
        # A cursor that acknowledged everything before the row reads that row's entry first.
        start = CursorState()
        if row > 0:
            start.mark_delete = Position(
                int(facts.ledger_ids[row - 1]), int(facts.entry_ids[row - 1])
            )
        from core import dispatch

        return dispatch.peek(sources, [start], 1)[0]

    def _partition_sources(
        self, role: str, operation: Operation, topic: str
    ) -> tuple[TopicInfo, list[PartitionSource]]:
        """The topic and its partitions to read; a partition's name gives that one only."""
        name = TopicName.parse(topic)
        if not name.is_partition:
            info = self.authorized_topic(role, operation, topic)
            return info, self._sources(info)
        info = self.authorized_topic(role, operation, str(name.base))
        chosen = [s for s in self._sources(info) if s.topic == str(name)]
        if not chosen:
            raise TopicNotFoundError(
                f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
            )
        return info, chosen

    # -- backlog -------------------------------------------------------------

    def analyze_backlog(
        self, role: str, topic: str | TopicName, subscription: str | None = None
    ) -> list[PartitionAnalysis]:
        """PIP-187 analysis, exact and uncapped, per partition and subscription.

        ``subscription`` None analyses every subscription of the topic. Each
        subscription's entry filters (its ``entryFilter.*`` properties) decide the
        accepted / rejected / rescheduled split, from each entry's first message.
        """
        info = self.authorized_topic(role, Operation.CONSUME, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        filters = {sub.name: EntryFilters.from_properties(sub.properties) for sub in subs}
        needed = sorted(frozenset().union(*(f.columns for f in filters.values())))
        out = []
        for part in self._partition_topics(info):
            name = str(part)
            facts = self._entry_arrays(part)
            first_rows = None
            if needed:
                table = self.ledgers.read_table(
                    part, columns=["ledger_id", "entry_id", "batch_index", *needed]
                )
                first_rows = first_messages(table)
            for sub in subs:
                state = self._cursor(name, sub.name, facts.layout).state
                chosen = filters[sub.name]
                verdicts = (
                    chosen.verdicts(first_rows) if chosen and first_rows is not None else None
                )
                result = backlog.analyze(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes, verdicts
                )
                out.append(PartitionAnalysis(name, sub.name, result))
        return out

    def topic_stats(self, role: str, topic: str | TopicName) -> TopicStats:
        """Pulsar-style topic stats; ``msgBacklog`` here is exact in messages.

        As in Pulsar, a partition's name (``t-partition-2``) gives that partition's stats.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.is_partition:
            info = self.authorized_topic(role, Operation.GET_STATS, name.base)
            if name.partition_index >= info.partitions:
                raise TopicNotFoundError(
                    f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
                )
            partitions = [name]
        else:
            info = self.authorized_topic(role, Operation.GET_STATS, name)
            partitions = self._partition_topics(info)
        subs = self.metadata.list_subscriptions(info.name)
        entries = messages = 0
        totals = {s.name: [0, 0, 0, 0] for s in subs}
        marks: dict[str, dict[str, str]] = {s.name: {} for s in subs}
        for partition in partitions:
            facts = self._entry_arrays(partition)
            entries += int(facts.ledger_ids.size)
            messages += int(np.maximum(facts.batch_sizes, 1).sum())
            for sub in subs:
                state = self._cursor(str(partition), sub.name, facts.layout).state
                counts = backlog.backlog(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes
                )
                one = totals[sub.name]
                one[0] += counts.messages
                one[1] += counts.entries
                one[2] += state.individually_deleted.range_count()
                one[3] += len(state.batch_acks)
                marks[sub.name][str(partition)] = str(state.mark_delete)
        return TopicStats(
            topic=str(name),
            partitions=info.partitions,
            entries=entries,
            messages=messages,
            subscriptions={
                sub.name: SubscriptionStats(
                    type=sub.type.value,
                    properties=dict(sub.properties),
                    msg_backlog=totals[sub.name][0],
                    backlog_entries=totals[sub.name][1],
                    mark_delete_position=marks[sub.name],
                    individually_deleted_ranges=totals[sub.name][2],
                    partly_acked_batches=totals[sub.name][3],
                )
                for sub in subs
            },
            partition_index=name.partition_index if name.is_partition else None,
        )

    # -- what the edges read: cursor state, entry count, a scan for Spark -------

    def cursor_state(
        self, role: str, topic_partition: str | TopicName, subscription: str
    ) -> CursorState:
        """The state of one partition's cursor (a topic's, when not partitioned); a copy.

        Authorized as CONSUME on the topic. A partition's name must be one of
        the topic's partitions.
        """
        name = (
            topic_partition
            if isinstance(topic_partition, TopicName)
            else TopicName.parse(topic_partition)
        )
        info = self.authorized_topic(role, Operation.CONSUME, name.base)
        if name.is_partition and name.partition_index >= info.partitions:
            raise TopicNotFoundError(
                f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
            )
        if info.partitions and not name.is_partition:
            raise InvalidArgumentError(
                f"{info.name} has {info.partitions} partitions: name one, e.g. "
                f"'{name.partition(0)}'"
            )
        self.metadata.get_subscription(info.name, subscription)
        return self._cursor(str(name), subscription).state

    def entry_count(self, role: str, topic: str | TopicName) -> int:
        """Committed entries of every partition of ``topic``, from the ledger list only.

        Cheap (no segment is read), so a front door may pick how to scan by it.
        Authorized as CONSUME, as the analysis it sizes.
        """
        info = self.authorized_topic(role, Operation.CONSUME, topic)
        return sum(
            ledger.entries
            for name in info.partition_names()
            for ledger in self.metadata.ledgers(name)
        )

    def scan_plan(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        *,
        operation: Operation = Operation.CONSUME,
    ) -> TopicScan:
        """What a distributed job needs to scan ``topic``: segments, ledgers, cursors, filters.

        ``subscription`` None covers every subscription. ``operation`` is what
        the job does with the data (CONSUME for an analysis, PEEK_MESSAGES to
        look for messages); the role is authorized for it before anything is
        read. Only committed segments are listed, so a file a crashed append
        left behind is never read. The result is frozen and picklable.
        """
        if operation not in (Operation.CONSUME, Operation.PEEK_MESSAGES):
            raise InvalidArgumentError(
                f"A topic scan reads messages: CONSUME or PEEK_MESSAGES, not {operation.value}"
            )
        info = self.authorized_topic(role, operation, topic)
        subs = (
            [self.metadata.get_subscription(info.name, subscription)]
            if subscription is not None
            else self.metadata.list_subscriptions(info.name)
        )
        partitions = []
        states: dict[tuple[str, str], bytes] = {}
        for number, part in enumerate(self._partition_topics(info)):
            name = str(part)
            ledgers = tuple(
                (ledger.ledger_id, ledger.entries) for ledger in self.metadata.ledgers(name)
            )
            layout = LedgerLayout.of(ledgers)
            paths = tuple(self.ledgers.segment_paths(part))
            partitions.append(
                ScanPartition(name, number if info.partitions else -1, paths, ledgers)
            )
            for sub in subs:
                states[(name, sub.name)] = cursor_codec.encode(
                    self._cursor(name, sub.name, layout).state
                )
        return TopicScan(
            info.name,
            info.partitions,
            tuple(partitions),
            tuple(ScanSubscription(sub.name, sub.type, dict(sub.properties)) for sub in subs),
            states,
        )

    # -- workflow entry points (previews, audit log, backlog history) ---------

    def project_backlog(self, role: str, plan: SkipPlan) -> BacklogProjection:
        """The subscription's exact backlog now, and after ``plan`` were applied now.

        Authorized as GET_STATS. Per touched partition and in total (the total
        covers every partition, touched or not). Nothing is written: the
        projection acknowledges the plan's items on a copy of each cursor.
        """
        info = self.authorized_topic(role, Operation.GET_STATS, plan.topic)
        self.metadata.get_subscription(info.name, plan.subscription)
        touched = set(plan.partitions())
        rows: list[PartitionProjection] = []
        before_total = after_total = 0
        for name in info.partition_names():
            facts = self._entry_arrays(name)
            state = self._cursor(name, plan.subscription, facts.layout).state
            args = (facts.ledger_ids, facts.entry_ids, facts.batch_sizes)
            before = backlog.backlog(state, *args).messages
            after = before
            if name in touched:
                group = [i for i in plan.items if i.topic_partition == name]
                targets = [
                    AckTarget(Position(i.ledger_id, i.entry_id), i.batch_index, i.batch_size)
                    for i in group
                ]
                projected = state.copy()
                projected.merge(CursorState.ack_delta(targets), facts.layout)
                after = backlog.backlog(projected, *args).messages
                rows.append(PartitionProjection(name, len(group), before, after))
            before_total += before
            after_total += after
        return BacklogProjection(
            info.name, plan.subscription, before_total, after_total, tuple(rows)
        )

    def describe_messages(self, role: str, plan: SkipPlan, limit: int) -> list[MessageDescription]:
        """The first ``limit`` messages of ``plan`` as a reviewer sees them (PEEK_MESSAGES).

        Key, publish time, delivery time, properties and the payload's first
        :data:`PAYLOAD_EXCERPT_BYTES` bytes, read from the ledgers; an item
        whose entry is gone is described with what the plan knows.
        """
        info = self.authorized_topic(role, Operation.PEEK_MESSAGES, plan.topic)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgumentError(f"Invalid limit {limit!r}: expected an integer >= 0")
        chosen = plan.items[:limit]
        out: list[MessageDescription] = []
        for name in info.partition_names():
            group = [i for i in chosen if i.topic_partition == name]
            if not group:
                continue
            table = self.ledgers.read_entries(
                TopicName.parse(name), [Position(i.ledger_id, i.entry_id) for i in group]
            )
            rows: dict[tuple[int, int, int], dict[str, object]] = {}
            for row in table.to_pylist():
                rows.setdefault((row["ledger_id"], row["entry_id"], row["batch_index"]), row)
                rows.setdefault((row["ledger_id"], row["entry_id"], -2), row)
            for item in group:
                row = rows.get((item.ledger_id, item.entry_id, item.batch_index)) or rows.get(
                    (item.ledger_id, item.entry_id, -2), {}
                )
                payload = row.get("payload")
                data = bytes(payload) if isinstance(payload, (bytes, bytearray)) else b""
                publish = row.get("publish_time")
                key = row.get("key")
                properties = row.get("properties")
                out.append(
                    MessageDescription(
                        message_id=item.message_id,
                        topic_partition=name,
                        key=key if isinstance(key, str) else None,
                        publish_time_ms=publish if isinstance(publish, int) else None,
                        deliver_at_ms=item.deliver_at,
                        properties=tuple(sorted(dict(properties or []).items()))
                        if isinstance(properties, (list, dict))
                        else (),
                        payload_excerpt=data[:PAYLOAD_EXCERPT_BYTES],
                        payload_size=len(data),
                        whole_batch_of=item.batch_size if item.batch_index < 0 else 0,
                        already_acknowledged=item.already_acknowledged,
                    )
                )
        order = {(i.ledger_id, i.entry_id, i.batch_index): n for n, i in enumerate(chosen)}
        out.sort(
            key=lambda d: order[
                (d.message_id.ledger_id, d.message_id.entry_id, d.message_id.batch_index)
            ]
        )
        return out

    def record_audit(
        self,
        role: str,
        kind: str,
        topic: str,
        subscription: str | None,
        detail: Mapping[str, object],
    ) -> int:
        """Append a record of what ``role`` did on ``topic`` to the audit log; its id.

        The caller must be allowed to read the topic's stats (GET_STATS); the
        record is stamped with the broker's clock. ``detail`` must be JSON.
        """
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.record_audit(kind, info.name, subscription, role, detail, self.clock())

    def audit_log(
        self, role: str, topic: str, *, kind: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        """The newest ``limit`` audit records of ``topic`` (of one ``kind``), newest first.

        Authorized as GET_STATS on the topic.
        """
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        records = self.metadata.audit_log(info.name, limit if kind is None else max(limit, 1000))
        if kind is not None:
            records = [r for r in records if r.kind == kind][:limit]
        return records

    def backlog_ages(self, role: str, topic: str) -> dict[str, int | None]:
        """Per subscription, the publish time (epoch ms) of its oldest unacknowledged message.

        None when the backlog is empty. Authorized as GET_STATS.
        """
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        subs = self.metadata.list_subscriptions(info.name)
        oldest: dict[str, int | None] = {s.name: None for s in subs}
        for name in info.partition_names():
            facts = self._entry_arrays(name)
            if facts.ledger_ids.size == 0:
                continue
            index = self.ledgers.entry_index(TopicName.parse(name))
            publish = np.asarray(index.publish_time, dtype=np.int64)
            for sub in subs:
                state = self._cursor(name, sub.name, facts.layout).state
                counts = backlog.unacked_messages(
                    state, facts.ledger_ids, facts.entry_ids, facts.batch_sizes
                )
                live = np.flatnonzero(counts)
                if live.size:
                    first = int(publish[live].min())
                    seen = oldest[sub.name]
                    oldest[sub.name] = first if seen is None else min(seen, first)
        return oldest

    def record_backlog_audit(self, role: str, run_id: str, samples: Sequence[BacklogSample]) -> int:
        """Store one history row per sample (one per subscription of a run); how many were new.

        Each sample's topic needs GET_STATS. Idempotent per ``(run_id, topic,
        subscription)``: a retried run writes no second row.
        """
        for topic in sorted({s.topic for s in samples}):
            self.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.record_backlog_samples(run_id, samples)

    def backlog_history(
        self,
        role: str,
        topic: str,
        subscription: str | None = None,
        *,
        since_ms: int | None = None,
        limit: int = 10_000,
    ) -> list[BacklogSample]:
        """The backlog history of ``topic`` (one subscription, or all), oldest first.

        Authorized as GET_STATS.
        """
        info = self.authorized_topic(role, Operation.GET_STATS, topic)
        return self.metadata.backlog_samples(info.name, subscription, since_ms, limit)

    def list_namespaces(self, role: str, tenant: str) -> list[str]:
        """The namespaces (``tenant/ns``) of ``tenant``: for its admins and superusers.

        Pulsar lets a tenant's admins list its namespaces; creating one is
        decided by the same rule, so that check is reused.
        """
        self._check(role, Operation.CREATE_NAMESPACE, tenant, f"namespaces of tenant {tenant}")
        return self.metadata.list_namespaces(tenant)


def _keys(plan: SkipPlan) -> set[tuple[str, int, int, int]]:
    """Each message of a plan as (partition, ledger, entry, batch index)."""
    c = plan.columns
    return {
        (c.names[n], led, ent, b)
        for n, led, ent, b in zip(
            c.name_index.tolist(),
            c.ledger_id.tolist(),
            c.entry_id.tolist(),
            c.batch_index.tolist(),
            strict=True,
        )
    }

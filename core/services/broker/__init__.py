"""The façade every front door calls: CLI, REST plugin, Airflow tasks.

A :class:`Broker` owns the two stores and answers admin and client
operations with Pulsar's semantics, checking the caller's role first. It holds
no cursor state between calls: each call loads what it needs from the stores,
so several processes may share one installation.

Each method delegates to the collaborator that owns its concern, also reachable
as an attribute (where the methods are documented):

======================  =====================  =============================================
attribute               module                 what it owns
======================  =====================  =============================================
``access``              ``access.py``          the authorization decision, the approval refusal
``admin``               ``admin.py``           tenants, namespaces, policies, topics, subscriptions
``deletion``            ``deletion.py``        deleting tenants, namespaces and topics
``producing``           ``produce.py``         produce, produce as columns, append entries
``reading``             ``read.py``            dispatcher, consume, peek, examine, last position
``gated``               ``gated.py``           requests of gated operations, approved records
``analysis``            ``analysis.py``        backlog, stats, cursor state, history, Spark reads
``workflow``            ``workflow.py``        plan records, approval requests, the audit log
``schemas``             ``schemas.py``         schema versions, compatibility strategy
``policies``            ``policies.py``        deduplication of a namespace or a topic
``compaction``          ``compaction.py``      compaction horizons, the compacted view
======================  =====================  =============================================

They share one :class:`~cursorops.core.services.broker.context.BrokerContext` (``context``): the
configuration, the clock, the stores and the authorization.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from cursorops.core.domain.acks import skip
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.analysis.backlog import PartitionAnalysis
from cursorops.core.domain.analysis.backlog_audit import BacklogSample
from cursorops.core.domain.analysis.compaction import CompactedAway
from cursorops.core.domain.analysis.poison_radar import RadarLimits, SubscriptionRadar
from cursorops.core.domain.analysis.topic_scan import TopicScan
from cursorops.core.domain.analysis.topic_stats import TopicStats
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.plans.plan_record import (
    ApprovalAnswer,
    ApprovalPolicy,
    ApprovalRequest,
    PlanBinding,
    PlanRecord,
)
from cursorops.core.domain.plans.request_record import RequestRecord
from cursorops.core.domain.portable_plan import PortablePlan
from cursorops.core.domain.schemas.schema_info import SchemaInfo
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker.access import Access
from cursorops.core.services.broker.admin import Admin
from cursorops.core.services.broker.analysis import (
    PAYLOAD_EXCERPT_BYTES,
    Analysis,
    BacklogProjection,
    MessageDescription,
    PartitionProjection,
)
from cursorops.core.services.broker.cluster import Cluster
from cursorops.core.services.broker.compaction import Compaction
from cursorops.core.services.broker.context import BrokerContext, wall_clock_ms
from cursorops.core.services.broker.deletion import Deletion
from cursorops.core.services.broker.gated import GatedOperations, PlannedRequest
from cursorops.core.services.broker.policies import Policies
from cursorops.core.services.broker.produce import Producing
from cursorops.core.services.broker.read import Reading
from cursorops.core.services.broker.schemas import Schemas
from cursorops.core.services.broker.workflow import OpenRequest, Workflow
from cursorops.core.services.gating import redrive, reset, undo_skip, unsubscribe
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.operation import (
    Applied,
    Caller,
    GatedArguments,
    Pending,
    Run,
    RunStarter,
)
from cursorops.core.services.gating.redrive import RedriveOutcome, RedrivePlan
from cursorops.core.services.gating.reset import ResetPlan
from cursorops.core.services.gating.undo_skip import AppliedSkip, UndoOutcome, UndoPlan
from cursorops.core.services.gating.unsubscribe import UnsubscribePlan
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.ledger_root import open_ledger_root
from cursorops.core.store.metadata import AuditRecord, MetadataStore, SubscriptionInfo, TopicInfo

# The read path (cursorops.core.services.reading.dispatch, cursorops.core.store.segment_reader) and
# the producer are imported
# where they are used: a command that only counts or skips does not load them.
if TYPE_CHECKING:
    from cursorops.core.domain.analysis.predicates import Predicate
    from cursorops.core.domain.ids.message_id_columns import MessageIdColumns
    from cursorops.core.services.producer import Entry, OutgoingMessage
    from cursorops.core.services.reading.dispatch import Dispatcher, Message
    from cursorops.core.store.migrate import Migration

__all__ = [
    "PAYLOAD_EXCERPT_BYTES",
    "AuditRecord",
    "BacklogProjection",
    "Broker",
    "BrokerContext",
    "MessageDescription",
    "PartitionProjection",
    "PlannedRequest",
    "wall_clock_ms",
]


class Broker:
    def __init__(self, config: Config, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        # The ledger root first: a root that cannot be served is refused before the
        # metadata store is opened (or created).
        ledger_root = open_ledger_root(config.ledger_root)
        self.metadata = MetadataStore.from_config(config)
        self.ledgers = LedgerStore(ledger_root, self.metadata, config.max_entries_per_ledger)
        self.access = Access(config, self.metadata)
        self.context = BrokerContext(config, clock, self.metadata, self.ledgers, self.access)
        self.analysis = Analysis(self.context)
        self.admin = Admin(self.context)
        self.deletion = Deletion(self.context)
        self.producing = Producing(self.context, self.admin)
        self.reading = Reading(self.context)
        self.workflow = Workflow(self.context)
        self.gated = GatedOperations(
            self.context,
            self.analysis,
            self.workflow,
        )
        self.schemas = Schemas(self.context)
        self.policies = Policies(self.context)
        self.compaction = Compaction(self.context)
        self.cluster = Cluster(config, self.metadata, clock, self.access)

    @staticmethod
    def migrate_metadata(config: Config) -> Migration:
        """Upgrade the metadata store ``config`` names to this release's schema; idempotent.

        What ``cursorops db migrate`` runs, without opening a Broker (an open of a
        shared store that is behind is refused). Not authorized by role: whoever
        holds the store's URL and credentials may change its schema.
        """
        from cursorops.core.store.migrate import migrate

        return migrate(config)

    def close(self) -> None:
        self.metadata.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorized_topic(
        self, role: str, operation: Operation, topic: str | TopicName
    ) -> TopicInfo:
        return self.access.authorized_topic(role, operation, topic)

    def may_read_content(self, role: str, topics: Iterable[str]) -> bool:
        return self.access.may_read_content(role, topics)

    def create_tenant(self, role: str, tenant: str, admin_roles: Iterable[str] = ()) -> None:
        self.admin.create_tenant(role, tenant, admin_roles)

    def list_tenants(self, role: str) -> list[str]:
        return self.admin.list_tenants(role)

    def list_topics(self, role: str, namespace: str) -> list[TopicInfo]:
        return self.admin.list_topics(role, namespace)

    def delete_tenant(self, role: str, tenant: str) -> None:
        self.deletion.delete_tenant(role, tenant)

    def delete_namespace(self, role: str, namespace: str) -> None:
        self.deletion.delete_namespace(role, namespace)

    def delete_topic(
        self,
        role: str,
        topic: str | TopicName,
        *,
        partitioned: bool,
        force: bool = False,
        via: str = "broker",
    ) -> list[str]:
        return self.deletion.delete_topic(
            role, topic, partitioned=partitioned, force=force, via=via
        )

    def set_auto_topic_creation(self, role: str, namespace: str, allowed: bool | None) -> None:
        self.policies.set_auto_topic_creation(role, namespace, allowed)

    def auto_topic_creation_policy(self, role: str, namespace: str) -> bool | None:
        return self.policies.auto_topic_creation_policy(role, namespace)

    def create_namespace(self, role: str, namespace: str) -> None:
        self.admin.create_namespace(role, namespace)

    def grant_permission(
        self, role: str, namespace: str, grantee: str, actions: Iterable[str]
    ) -> None:
        self.admin.grant_permission(role, namespace, grantee, actions)

    def set_namespace_policy(
        self, role: str, namespace: str, *, skip_requires_approval: bool
    ) -> None:
        self.admin.set_namespace_policy(
            role, namespace, skip_requires_approval=skip_requires_approval
        )

    def skip_requires_approval(self, role: str, topic: str) -> bool:
        return self.admin.skip_requires_approval(role, topic)

    def set_approval_quorum(
        self, role: str, namespace: str, *, large_above_messages: int | None, approvals: int
    ) -> None:
        self.admin.set_approval_quorum(
            role, namespace, large_above_messages=large_above_messages, approvals=approvals
        )

    def approval_policy(self, role: str, topic: str | TopicName) -> ApprovalPolicy:
        return self.admin.approval_policy(role, topic)

    def request(
        self, operation: str, caller: Caller, arguments: GatedArguments, runs: RunStarter
    ) -> Applied | Pending:
        return self.gated.request(operation, caller, arguments, runs)

    def plan_request(
        self, operation: str, caller: Caller, arguments: GatedArguments, run: Run
    ) -> PlanRecord:
        return self.gated.plan_request(operation, caller, arguments, run)

    def preview_request(
        self, operation: str, caller: Caller, arguments: GatedArguments
    ) -> PlannedRequest:
        return self.gated.preview_request(operation, caller, arguments)

    def save_plan_record(
        self, binding: PlanBinding, plan: PortablePlan, document: Mapping[str, object]
    ) -> PlanRecord:
        return self.workflow.save_plan_record(binding, plan, document)

    def save_request_record(self, record: RequestRecord) -> RequestRecord:
        return self.workflow.save_request_record(record)

    def run_request_record(self, dag_id: str, run_id: str, requester: str | None) -> RequestRecord:
        return self.workflow.run_request_record(dag_id, run_id, requester)

    def current_plan_record(self, role: str, dag_id: str, run_id: str) -> PlanRecord | None:
        return self.workflow.current_plan_record(role, dag_id, run_id)

    def bound_plan_record(
        self,
        role: str,
        digest: str,
        dag_id: str,
        run_id: str,
        requester: str | None,
        *,
        started: bool = False,
    ) -> PlanRecord:
        return self.workflow.bound_plan_record(
            role, digest, dag_id, run_id, requester, started=started
        )

    def waiting_plan_records(self, role: str, topic: str) -> list[PlanRecord]:
        return self.workflow.waiting_plan_records(role, topic)

    def open_requests(self, role: str, topic: str) -> list[OpenRequest]:
        return self.workflow.open_requests(role, topic)

    def record_approval_request(self, request: ApprovalRequest) -> None:
        self.workflow.record_approval_request(request)

    def approval_requests(self, dag_id: str, run_id: str) -> list[ApprovalRequest]:
        return self.workflow.approval_requests(dag_id, run_id)

    def record_approval_answer(
        self,
        dag_id: str,
        run_id: str,
        gate: str,
        try_number: int,
        chosen: Sequence[str],
        responded_by: str | None,
        responded_at_ms: int,
    ) -> ApprovalAnswer:
        return self.workflow.record_approval_answer(
            dag_id, run_id, gate, try_number, chosen, responded_by, responded_at_ms
        )

    def approval_answers(self, dag_id: str, run_id: str) -> list[ApprovalAnswer]:
        return self.workflow.approval_answers(dag_id, run_id)

    def apply_approved_plan(
        self,
        record: PlanRecord,
        approvals: Sequence[Mapping[str, object]],
        *,
        via: str = "airflow",
    ) -> Applied:
        return self.gated.apply_approved_plan(record, approvals, via=via)

    def create_topic(self, role: str, topic: str, partitions: int = 0) -> TopicInfo:
        return self.admin.create_topic(role, topic, partitions)

    def auto_create_topic(self, role: str, topic: str, operation: Operation) -> TopicInfo:
        return self.admin.auto_create_topic(role, topic, operation)

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
        return self.admin.create_subscription(
            role, topic, subscription, type, properties, initial_position, start_after=start_after
        )

    def list_subscriptions(self, role: str, topic: str) -> list[SubscriptionInfo]:
        return self.admin.list_subscriptions(role, topic)

    def delete_subscription(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        *,
        force: bool = False,
        via: str = "broker",
    ) -> None:
        unsubscribe.delete_subscription(self.gated, role, topic, subscription, force=force, via=via)

    def end_reader_subscription(self, role: str, topic: str | TopicName, subscription: str) -> None:
        self.admin.end_reader_subscription(role, topic, subscription)

    def plan_unsubscribe(
        self, role: str, topic: str | TopicName, subscription: str, *, force: bool = False
    ) -> UnsubscribePlan:
        return unsubscribe.plan_unsubscribe(self.gated, role, topic, subscription, force=force)

    def apply_unsubscribe(self, role: str, plan: UnsubscribePlan, *, via: str = "broker") -> int:
        return unsubscribe.apply_unsubscribe(self.gated, role, plan, via=via)

    def update_subscription_properties(
        self, role: str, topic: str, subscription: str, properties: Mapping[str, str]
    ) -> SubscriptionInfo:
        return self.admin.update_subscription_properties(role, topic, subscription, properties)

    def produce(
        self,
        role: str,
        topic: str,
        messages: Sequence[OutgoingMessage],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> list[MessageId]:
        return self.producing.produce(
            role, topic, messages, batch_size=batch_size, producer_name=producer_name
        )

    def produce_columns(
        self,
        role: str,
        topic: str,
        payloads: Sequence[bytes],
        *,
        batch_size: int = 1,
        producer_name: str = "cursorops-cli",
    ) -> MessageIdColumns:
        return self.producing.produce_columns(
            role, topic, payloads, batch_size=batch_size, producer_name=producer_name
        )

    def append_entries(self, role: str, topic: str, entries: Sequence[Entry]) -> list[Position]:
        return self.producing.append_entries(role, topic, entries)

    def skip_messages(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        ids: Sequence[MessageId],
        *,
        via: str = "broker",
    ) -> skip.SkipOutcome:
        return skips.skip_messages(self.gated, role, topic, subscription, ids, via=via)

    def plan_skip(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        ids: Sequence[MessageId],
    ) -> SkipPlan:
        return skips.plan_skip(self.gated, role, topic, subscription, ids)

    def skip_head(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        limit: int | None,
        *,
        via: str = "broker",
    ) -> skip.SkipOutcome:
        return skips.skip_head(self.gated, role, topic, subscription, limit, via=via)

    def plan_skip_head(
        self, role: str, topic: str | TopicName, subscription: str, limit: int | None
    ) -> SkipPlan:
        return skips.plan_skip_head(self.gated, role, topic, subscription, limit)

    def apply_skip(self, role: str, plan: SkipPlan, *, via: str = "broker") -> skip.SkipOutcome:
        return skips.apply_skip(self.gated, role, plan, via=via)

    def plan_redrive(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        *,
        predicate: Predicate | Mapping[str, object] | str | None = None,
        dead_letter: str | None = None,
    ) -> RedrivePlan:
        return redrive.plan_redrive(
            self.gated, role, topic, subscription, predicate=predicate, dead_letter=dead_letter
        )

    def apply_redrive(self, role: str, plan: RedrivePlan, *, via: str = "broker") -> RedriveOutcome:
        return redrive.apply_redrive(self.gated, role, plan, via=via)

    def list_skips(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        *,
        limit: int = 100,
    ) -> list[AppliedSkip]:
        return undo_skip.list_skips(self.gated, role, topic, subscription, limit=limit)

    def plan_undo_skip(
        self, role: str, topic: str | TopicName, subscription: str, skip_id: int
    ) -> UndoPlan:
        return undo_skip.plan_undo_skip(self.gated, role, topic, subscription, skip_id)

    def apply_undo_skip(self, role: str, plan: UndoPlan, *, via: str = "broker") -> UndoOutcome:
        return undo_skip.apply_undo_skip(self.gated, role, plan, via=via)

    def reset_cursor(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> dict[str, str]:
        return reset.reset_cursor(
            self.gated, role, topic, subscription, position=position, timestamp_ms=timestamp_ms
        )

    def seek(
        self,
        role: str,
        topic_partition: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
        ack_bits: int | None = None,
        non_durable: bool = False,
    ) -> Position:
        return reset.seek(
            self.gated,
            role,
            topic_partition,
            subscription,
            position=position,
            timestamp_ms=timestamp_ms,
            ack_bits=ack_bits,
            non_durable=non_durable,
        )

    def plan_reset(
        self,
        role: str,
        topic: str,
        subscription: str,
        *,
        position: Position | None = None,
        timestamp_ms: int | None = None,
    ) -> ResetPlan:
        return reset.plan_reset(
            self.gated, role, topic, subscription, position=position, timestamp_ms=timestamp_ms
        )

    def apply_reset(self, role: str, plan: ResetPlan, *, via: str = "broker") -> dict[str, str]:
        return reset.apply_reset(self.gated, role, plan, via=via)

    def dispatcher(
        self, role: str, topic: str, subscription: str, *, partition: int | None = None
    ) -> Dispatcher:
        return self.reading.dispatcher(role, topic, subscription, partition=partition)

    def consume(
        self, role: str, topic: str, subscription: str, count: int, *, ack: bool = False
    ) -> list[Message]:
        return self.reading.consume(role, topic, subscription, count, ack=ack)

    def last_position(self, role: str, topic: str) -> Position:
        return self.reading.last_position(role, topic)

    def release_consumers_of(self, process_prefix: str) -> int:
        return self.reading.release_consumers_of(process_prefix)

    def last_sequence_id(self, role: str, topic: str, producer_name: str) -> int:
        return self.producing.last_sequence_id(role, topic, producer_name)

    def compact(self, role: str, topic: str) -> dict[str, str]:
        return self.compaction.compact(role, topic)

    def compaction_status(self, role: str, topic: str) -> str:
        return self.compaction.compaction_status(role, topic)

    def compacted_away(self, role: str, topic_partition: str) -> CompactedAway:
        return self.compaction.compacted_away(role, topic_partition)

    def get_schema(
        self, role: str, topic: str, version: int | None = None
    ) -> tuple[int, SchemaInfo] | None:
        return self.schemas.get_schema(role, topic, version)

    def schema_versions(self, role: str, topic: str) -> list[tuple[int, SchemaInfo, int]]:
        return self.schemas.schema_versions(role, topic)

    def put_schema(self, role: str, topic: str, info: SchemaInfo) -> int:
        return self.schemas.put_schema(role, topic, info)

    def check_consumer_schema(self, role: str, topic: str, info: SchemaInfo) -> None:
        return self.schemas.check_consumer_schema(role, topic, info)

    def delete_schema(self, role: str, topic: str) -> int | None:
        return self.schemas.delete_schema(role, topic)

    def set_strategy(self, role: str, namespace: str, strategy: str | None) -> None:
        return self.schemas.set_strategy(role, namespace, strategy)

    def strategy_policy(self, role: str, namespace: str) -> str | None:
        return self.schemas.strategy_policy(role, namespace)

    def set_deduplication(self, role: str, scope: str, enabled: bool | None) -> None:
        return self.policies.set_deduplication(role, scope, enabled)

    def deduplication_policy(self, role: str, scope: str) -> bool | None:
        return self.policies.deduplication_policy(role, scope)

    def deduplication(self, topic: str) -> bool:
        return self.policies.deduplication(topic)

    def peek_messages(self, role: str, topic: str, subscription: str, count: int) -> list[Message]:
        return self.reading.peek_messages(role, topic, subscription, count)

    def examine_message(
        self, role: str, topic: str, initial_position: str, message_position: int
    ) -> Message:
        return self.reading.examine_message(role, topic, initial_position, message_position)

    def analyze_backlog(
        self, role: str, topic: str | TopicName, subscription: str | None = None
    ) -> list[PartitionAnalysis]:
        return self.analysis.analyze_backlog(role, topic, subscription)

    def topic_stats(self, role: str, topic: str | TopicName) -> TopicStats:
        return self.analysis.topic_stats(role, topic)

    def cursor_state(
        self, role: str, topic_partition: str | TopicName, subscription: str
    ) -> CursorState:
        return self.analysis.cursor_state(role, topic_partition, subscription)

    def entry_count(self, role: str, topic: str | TopicName) -> int:
        return self.analysis.entry_count(role, topic)

    def scan_plan(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        *,
        operation: Operation = Operation.CONSUME,
    ) -> TopicScan:
        return self.analysis.scan_plan(role, topic, subscription, operation=operation)

    def project_backlog(self, role: str, plan: SkipPlan) -> BacklogProjection:
        return self.analysis.project_backlog(role, plan)

    def describe_messages(self, role: str, plan: SkipPlan, limit: int) -> list[MessageDescription]:
        return self.analysis.describe_messages(role, plan, limit)

    def record_audit(
        self,
        role: str,
        kind: str,
        topic: str,
        subscription: str | None,
        detail: Mapping[str, object],
    ) -> int:
        return self.workflow.record_audit(role, kind, topic, subscription, detail)

    def audit_log(
        self, role: str, topic: str, *, kind: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        return self.workflow.audit_log(role, topic, kind=kind, limit=limit)

    def backlog_ages(self, role: str, topic: str) -> dict[str, int | None]:
        return self.analysis.backlog_ages(role, topic)

    def poison_radar(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        limits: RadarLimits | None = None,
    ) -> list[SubscriptionRadar]:
        return self.analysis.poison_radar(role, topic, subscription, limits)

    def record_backlog_audit(self, role: str, run_id: str, samples: Sequence[BacklogSample]) -> int:
        return self.analysis.record_backlog_audit(role, run_id, samples)

    def backlog_history(
        self,
        role: str,
        topic: str,
        subscription: str | None = None,
        *,
        since_ms: int | None = None,
        limit: int = 10_000,
    ) -> list[BacklogSample]:
        return self.analysis.backlog_history(
            role, topic, subscription, since_ms=since_ms, limit=limit
        )

    def list_namespaces(self, role: str, tenant: str) -> list[str]:
        return self.admin.list_namespaces(role, tenant)

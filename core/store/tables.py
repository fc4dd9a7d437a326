"""The metadata store's tables: one SQLAlchemy declarative base and every row class.

A change here is also a revision in :mod:`cursorops.core.store.migrations` (a test holds the
migrated schema equal to these tables).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Integer on SQLite so that a single-column primary key is its ROWID (autoincrement).
_ID = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class TenantRow(Base):
    __tablename__ = "tenants"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    admin_roles: Mapped[list[str]] = mapped_column(JSON)


class NamespaceRow(Base):
    __tablename__ = "namespaces"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name"), index=True)


class PermissionRow(Base):
    __tablename__ = "namespace_permissions"
    namespace: Mapped[str] = mapped_column(
        ForeignKey("namespaces.name", ondelete="CASCADE"), primary_key=True
    )
    role: Mapped[str] = mapped_column(String, primary_key=True)
    actions: Mapped[list[str]] = mapped_column(JSON)


class TopicRow(Base):
    __tablename__ = "topics"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    namespace: Mapped[str] = mapped_column(ForeignKey("namespaces.name"), index=True)
    partitions: Mapped[int] = mapped_column(Integer)


class TopicPartitionRow(Base):
    """One row per partition (the topic itself when not partitioned): what appends lock."""

    __tablename__ = "topic_partitions"
    name: Mapped[str] = mapped_column(String, primary_key=True)
    topic: Mapped[str] = mapped_column(ForeignKey("topics.name", ondelete="CASCADE"), index=True)
    partition: Mapped[int] = mapped_column(Integer)


class SubscriptionRow(Base):
    __tablename__ = "subscriptions"
    __table_args__ = (UniqueConstraint("topic", "name"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    topic: Mapped[str] = mapped_column(ForeignKey("topics.name", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String)
    type: Mapped[str] = mapped_column(String)
    properties: Mapped[dict[str, str]] = mapped_column(JSON)


class CursorRow(Base):
    __tablename__ = "cursors"
    __table_args__ = (UniqueConstraint("topic_partition", "subscription_id"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), index=True
    )
    topic_partition: Mapped[str] = mapped_column(
        ForeignKey("topic_partitions.name", ondelete="CASCADE")
    )
    snapshot: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    snapshot_version: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(BigInteger)
    # The highest message (ledger, entry, batch index; -1 not batched) a consumer
    # acknowledged, raised with each consumer acknowledgement; NULL: none known (a cursor
    # from before revision 0007, or one a reset moved). Skips, undos and redrives leave it.
    consumer_ack_ledger_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    consumer_ack_entry_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    consumer_ack_batch_index: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class CursorDeltaRow(Base):
    __tablename__ = "cursor_deltas"
    cursor_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("cursors.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class ConsumerRow(Base):
    """A consumer connected to a subscription, from any process, while its lease lasts."""

    __tablename__ = "consumers"
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True
    )
    consumer_id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    priority: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(BigInteger)
    lease_expires_ms: Mapped[int] = mapped_column(BigInteger)


class PendingRunRow(Base):
    """A run of pending messages: delivered to one consumer and not acknowledged.

    ``consumer_id`` NULL: released, due for redelivery. The run's messages lie
    in one ledger, from ``(first_entry, first_index)`` through ``(last_entry,
    last_index)`` (at most :data:`cursorops.core.store.dispatch_state.RUN_SPAN_ENTRIES`
    entries apart); ``members`` holds each one's entry, batch index,
    redelivery count and key hash (cursorops.core.store.dispatch_state); ``bumps`` is
    added to those redelivery counts (a release bumps it without rewriting
    ``members``).
    """

    __tablename__ = "pending_runs"
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True
    )
    topic_partition: Mapped[str] = mapped_column(String, primary_key=True)
    ledger_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    first_entry: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    first_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_entry: Mapped[int] = mapped_column(BigInteger)
    last_index: Mapped[int] = mapped_column(Integer)
    consumer_id: Mapped[str | None] = mapped_column(String, nullable=True)
    bumps: Mapped[int] = mapped_column(Integer)
    messages: Mapped[int] = mapped_column(Integer)
    members: Mapped[bytes] = mapped_column(LargeBinary)


class ReadPositionRow(Base):
    """A subscription's read position on a partition (cursorops.core.store.dispatch_state)."""

    __tablename__ = "read_positions"
    subscription_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True
    )
    topic_partition: Mapped[str] = mapped_column(String, primary_key=True)
    ledger_id: Mapped[int] = mapped_column(BigInteger)
    entry_id: Mapped[int] = mapped_column(BigInteger)
    cursor_version: Mapped[int] = mapped_column(BigInteger)


class LedgerRow(Base):
    __tablename__ = "ledgers"
    # AUTOINCREMENT: SQLite never hands out a committed ledger id twice, like BookKeeper.
    __table_args__ = {"sqlite_autoincrement": True}
    ledger_id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    topic_partition: Mapped[str] = mapped_column(
        ForeignKey("topic_partitions.name", ondelete="CASCADE"), index=True
    )
    entries: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)


class SegmentRow(Base):
    __tablename__ = "segments"
    ledger_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("ledgers.ledger_id", ondelete="CASCADE"), primary_key=True
    )
    first_entry: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_entry: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(String)


class AuditRow(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_topic_id", "topic", "id"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str | None] = mapped_column(String, nullable=True)
    role: Mapped[str] = mapped_column(String)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


class BacklogHistoryRow(Base):
    """One subscription's exact backlog as one scheduled audit run measured it."""

    __tablename__ = "backlog_history"
    __table_args__ = (
        UniqueConstraint("run_id", "topic", "subscription"),
        Index("ix_backlog_history_topic_at", "topic", "at_ms"),
    )
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str] = mapped_column(String)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    messages: Mapped[int] = mapped_column(BigInteger)
    entries: Mapped[int] = mapped_column(BigInteger)
    oldest_publish_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class NamespacePolicyRow(Base):
    """cursorops's own policies of a namespace; absent = the defaults."""

    __tablename__ = "namespace_policies"
    namespace: Mapped[str] = mapped_column(
        ForeignKey("namespaces.name", ondelete="CASCADE"), primary_key=True
    )
    skip_requires_approval: Mapped[bool] = mapped_column(Boolean, default=False)


class ApprovalPolicyRow(Base):
    """How many distinct approvers a large plan needs on a namespace; absent = one."""

    __tablename__ = "approval_policies"
    namespace: Mapped[str] = mapped_column(
        ForeignKey("namespaces.name", ondelete="CASCADE"), primary_key=True
    )
    large_above_messages: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    large_approvals: Mapped[int] = mapped_column(Integer, default=2)


class PlanRecordRow(Base):
    """One immutable plan of a gated operation, bound to its workflow run
    (cursorops.core.domain.plans.plan_record)."""

    __tablename__ = "plan_records"
    __table_args__ = (
        Index("ix_plan_records_run", "dag_id", "run_id", "id"),
        # The plans waiting for approval (applied_at_ms NULL), of a topic, newest first.
        Index("ix_plan_records_waiting", "applied_at_ms", "topic", "id"),
    )
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String, unique=True)
    operation: Mapped[str] = mapped_column(String)
    dag_id: Mapped[str] = mapped_column(String)
    run_id: Mapped[str] = mapped_column(String)
    requester: Mapped[str] = mapped_column(String)
    role: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str] = mapped_column(String)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    plan_id: Mapped[str] = mapped_column(String)
    plan_json: Mapped[str] = mapped_column(Text)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    messages: Mapped[int] = mapped_column(BigInteger)
    required_approvals: Mapped[int] = mapped_column(Integer)
    applied_at_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    applied: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class RequestRecordRow(Base):
    """One request of a workflow that plans in a step of its own, as asked, once per run
    (cursorops.core.domain.plans.request_record)."""

    __tablename__ = "request_records"
    __table_args__ = (UniqueConstraint("dag_id", "run_id", name="uq_request_records_run"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String, unique=True)
    operation: Mapped[str] = mapped_column(String)
    dag_id: Mapped[str] = mapped_column(String)
    run_id: Mapped[str] = mapped_column(String)
    requester: Mapped[str] = mapped_column(String)
    role: Mapped[str] = mapped_column(String)
    topic: Mapped[str] = mapped_column(String)
    subscription: Mapped[str] = mapped_column(String)
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)


class ApprovalRequestRow(Base):
    """What one approval gate showed (the SHA-256 of its text) and to whom, for which plan."""

    __tablename__ = "approval_requests"
    __table_args__ = (Index("ix_approval_requests_run", "dag_id", "run_id"),)
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(ForeignKey("plan_records.digest", ondelete="CASCADE"))
    dag_id: Mapped[str] = mapped_column(String)
    run_id: Mapped[str] = mapped_column(String)
    gate: Mapped[str] = mapped_column(String)
    body_sha256: Mapped[str] = mapped_column(String)
    approvers: Mapped[list[str]] = mapped_column(JSON)
    presented_at_ms: Mapped[int] = mapped_column(BigInteger)
    valid_for_ms: Mapped[int] = mapped_column(BigInteger)
    subject: Mapped[str] = mapped_column(Text, default="")
    body: Mapped[str] = mapped_column(Text, default="")
    try_number: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ApprovalAnswerRow(Base):
    """The answer to one presentation, as Airflow resumed the gate with it (at most one)."""

    __tablename__ = "approval_answers"
    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(
        ForeignKey("approval_requests.id", ondelete="CASCADE"), unique=True
    )
    chosen: Mapped[list[str]] = mapped_column(JSON)
    responded_by: Mapped[str | None] = mapped_column(String, nullable=True)
    responded_at_ms: Mapped[int] = mapped_column(BigInteger)


class SchemaVersionRow(Base):
    """One version of a topic's schema (Pulsar's schema registry), numbered from 0.

    ``schema_id`` is the topic's schema name, ``tenant/namespace/topic`` without
    its domain or partition: a partitioned topic's partitions share one schema.
    ``deleted``: a deletion is a version of its own, as in Pulsar (the next
    schema added after it starts the history afresh, at the next number).
    """

    __tablename__ = "schema_versions"
    schema_id: Mapped[str] = mapped_column(String, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    properties: Mapped[dict[str, str]] = mapped_column(JSON)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)


class BrokerPolicyRow(Base):
    """A Pulsar policy set on a namespace or a topic (``scope``): absent = the default.

    Pulsar's own policies (deduplication, schema compatibility, ...) by name, each
    value JSON; cursorops's own namespace policies have tables of their own.
    """

    __tablename__ = "broker_policies"
    scope: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)


class CompactionHorizonRow(Base):
    """The last compaction of a topic partition: the position it compacted through."""

    __tablename__ = "compaction_horizons"
    topic_partition: Mapped[str] = mapped_column(String, primary_key=True)
    ledger_id: Mapped[int] = mapped_column(BigInteger)
    entry_id: Mapped[int] = mapped_column(BigInteger)
    compacted_at_ms: Mapped[int] = mapped_column(BigInteger)


class BrokerRow(Base):
    """A broker of the cluster: what it advertises, its life (``epoch``) and its heartbeat.

    ``state`` is ``live`` until another broker declares it ``dead`` (its heartbeat
    stopped) or its own next life takes the row over (``epoch`` bumped): either
    fences every write of the life that was (:mod:`cursorops.core.store.broker_registry`).
    """

    __tablename__ = "brokers"
    broker_id: Mapped[str] = mapped_column(String, primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String)
    released: Mapped[bool] = mapped_column(Boolean, default=False)
    """Dead, and the consumers of that life are released."""
    broker_url: Mapped[str] = mapped_column(String, default="")
    broker_url_tls: Mapped[str] = mapped_column(String, default="")
    web_url: Mapped[str] = mapped_column(String, default="")
    listeners: Mapped[dict[str, list[str]]] = mapped_column(JSON, default=dict)
    started_ms: Mapped[int] = mapped_column(BigInteger)
    heartbeat_ms: Mapped[int] = mapped_column(BigInteger)

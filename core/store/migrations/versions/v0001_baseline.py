"""Baseline: the schema the store had before migrations, the tables of every existing home.

The tables are frozen here as they were, not imported from :mod:`cursorops.core.store.tables`
(which moves on with later revisions). ``upgrade`` creates only the tables that
are missing, so the same revision starts a new store and adopts one that the
code before migrations created (its tables present, no ``alembic_version``): it
is then stamped at this revision without being recreated, and gets any table a
still older release had not created yet. ``cursorops_schema`` is that code's
record of its table set; a later revision drops it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

BASELINE = sa.MetaData()

sa.Table(
    "cursorops_schema",
    BASELINE,
    sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
    sa.Column("tables_digest", sa.String(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
)
sa.Table(
    "audit_log",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("topic", sa.String(), nullable=False),
    sa.Column("subscription", sa.String(), nullable=True),
    sa.Column("role", sa.String(), nullable=False),
    sa.Column("detail", sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
    sa.Index("ix_audit_log_topic_id", "topic", "id"),
)
sa.Table(
    "backlog_history",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("run_id", sa.String(), nullable=False),
    sa.Column("topic", sa.String(), nullable=False),
    sa.Column("subscription", sa.String(), nullable=False),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("messages", sa.BigInteger(), nullable=False),
    sa.Column("entries", sa.BigInteger(), nullable=False),
    sa.Column("oldest_publish_ms", sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("run_id", "topic", "subscription"),
    sa.Index("ix_backlog_history_topic_at", "topic", "at_ms"),
)
sa.Table(
    "plan_records",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("digest", sa.String(), nullable=False),
    sa.Column("operation", sa.String(), nullable=False),
    sa.Column("dag_id", sa.String(), nullable=False),
    sa.Column("run_id", sa.String(), nullable=False),
    sa.Column("requester", sa.String(), nullable=False),
    sa.Column("role", sa.String(), nullable=False),
    sa.Column("topic", sa.String(), nullable=False),
    sa.Column("subscription", sa.String(), nullable=False),
    sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
    sa.Column("plan_id", sa.String(), nullable=False),
    sa.Column("plan_json", sa.Text(), nullable=False),
    sa.Column("document", sa.JSON(), nullable=False),
    sa.Column("messages", sa.BigInteger(), nullable=False),
    sa.Column("required_approvals", sa.Integer(), nullable=False),
    sa.Column("applied_at_ms", sa.BigInteger(), nullable=True),
    sa.Column("applied", sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("digest"),
    sa.Index("ix_plan_records_run", "dag_id", "run_id", "id"),
)
sa.Table(
    "tenants",
    BASELINE,
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("admin_roles", sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint("name"),
)
sa.Table(
    "approval_requests",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("digest", sa.String(), nullable=False),
    sa.Column("dag_id", sa.String(), nullable=False),
    sa.Column("run_id", sa.String(), nullable=False),
    sa.Column("gate", sa.String(), nullable=False),
    sa.Column("body_sha256", sa.String(), nullable=False),
    sa.Column("approvers", sa.JSON(), nullable=False),
    sa.Column("presented_at_ms", sa.BigInteger(), nullable=False),
    sa.Column("valid_for_ms", sa.BigInteger(), nullable=False),
    sa.Column("subject", sa.Text(), nullable=False),
    sa.Column("body", sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(["digest"], ["plan_records.digest"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.Index("ix_approval_requests_run", "dag_id", "run_id"),
)
sa.Table(
    "namespaces",
    BASELINE,
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("tenant", sa.String(), nullable=False),
    sa.ForeignKeyConstraint(["tenant"], ["tenants.name"]),
    sa.PrimaryKeyConstraint("name"),
    sa.Index("ix_namespaces_tenant", "tenant"),
)
sa.Table(
    "approval_policies",
    BASELINE,
    sa.Column("namespace", sa.String(), nullable=False),
    sa.Column("large_above_messages", sa.BigInteger(), nullable=True),
    sa.Column("large_approvals", sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(["namespace"], ["namespaces.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("namespace"),
)
sa.Table(
    "namespace_permissions",
    BASELINE,
    sa.Column("namespace", sa.String(), nullable=False),
    sa.Column("role", sa.String(), nullable=False),
    sa.Column("actions", sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(["namespace"], ["namespaces.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("namespace", "role"),
)
sa.Table(
    "namespace_policies",
    BASELINE,
    sa.Column("namespace", sa.String(), nullable=False),
    sa.Column("skip_requires_approval", sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(["namespace"], ["namespaces.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("namespace"),
)
sa.Table(
    "topics",
    BASELINE,
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("namespace", sa.String(), nullable=False),
    sa.Column("partitions", sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(["namespace"], ["namespaces.name"]),
    sa.PrimaryKeyConstraint("name"),
    sa.Index("ix_topics_namespace", "namespace"),
)
sa.Table(
    "subscriptions",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("topic", sa.String(), nullable=False),
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("type", sa.String(), nullable=False),
    sa.Column("properties", sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(["topic"], ["topics.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("topic", "name"),
)
sa.Table(
    "topic_partitions",
    BASELINE,
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("topic", sa.String(), nullable=False),
    sa.Column("partition", sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(["topic"], ["topics.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("name"),
    sa.Index("ix_topic_partitions_topic", "topic"),
)
sa.Table(
    "consumers",
    BASELINE,
    sa.Column("subscription_id", sa.BigInteger(), nullable=False),
    sa.Column("consumer_id", sa.String(), nullable=False),
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("priority", sa.Integer(), nullable=False),
    sa.Column("epoch", sa.BigInteger(), nullable=False),
    sa.Column("lease_expires_ms", sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("subscription_id", "consumer_id"),
)
sa.Table(
    "cursors",
    BASELINE,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("subscription_id", sa.BigInteger(), nullable=False),
    sa.Column("topic_partition", sa.String(), nullable=False),
    sa.Column("snapshot", sa.LargeBinary(), nullable=True),
    sa.Column("snapshot_version", sa.BigInteger(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["topic_partition"], ["topic_partitions.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("topic_partition", "subscription_id"),
    sa.Index("ix_cursors_subscription_id", "subscription_id"),
)
sa.Table(
    "ledgers",
    BASELINE,
    sa.Column(
        "ledger_id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    ),
    sa.Column("topic_partition", sa.String(), nullable=False),
    sa.Column("entries", sa.BigInteger(), nullable=False),
    sa.Column("messages", sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(["topic_partition"], ["topic_partitions.name"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("ledger_id"),
    sa.Index("ix_ledgers_topic_partition", "topic_partition"),
    sqlite_autoincrement=True,
)
sa.Table(
    "pending_runs",
    BASELINE,
    sa.Column("subscription_id", sa.BigInteger(), nullable=False),
    sa.Column("topic_partition", sa.String(), nullable=False),
    sa.Column("ledger_id", sa.BigInteger(), nullable=False),
    sa.Column("first_entry", sa.BigInteger(), nullable=False),
    sa.Column("first_index", sa.Integer(), nullable=False),
    sa.Column("last_entry", sa.BigInteger(), nullable=False),
    sa.Column("last_index", sa.Integer(), nullable=False),
    sa.Column("consumer_id", sa.String(), nullable=True),
    sa.Column("bumps", sa.Integer(), nullable=False),
    sa.Column("messages", sa.Integer(), nullable=False),
    sa.Column("members", sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint(
        "subscription_id", "topic_partition", "ledger_id", "first_entry", "first_index"
    ),
)
sa.Table(
    "read_positions",
    BASELINE,
    sa.Column("subscription_id", sa.BigInteger(), nullable=False),
    sa.Column("topic_partition", sa.String(), nullable=False),
    sa.Column("ledger_id", sa.BigInteger(), nullable=False),
    sa.Column("entry_id", sa.BigInteger(), nullable=False),
    sa.Column("cursor_version", sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("subscription_id", "topic_partition"),
)
sa.Table(
    "cursor_deltas",
    BASELINE,
    sa.Column("cursor_id", sa.BigInteger(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.Column("payload", sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(["cursor_id"], ["cursors.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("cursor_id", "version"),
)
sa.Table(
    "segments",
    BASELINE,
    sa.Column("ledger_id", sa.BigInteger(), nullable=False),
    sa.Column("first_entry", sa.BigInteger(), nullable=False),
    sa.Column("last_entry", sa.BigInteger(), nullable=False),
    sa.Column("messages", sa.BigInteger(), nullable=False),
    sa.Column("path", sa.String(), nullable=False),
    sa.ForeignKeyConstraint(["ledger_id"], ["ledgers.ledger_id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("ledger_id", "first_entry"),
)


def upgrade() -> None:
    BASELINE.create_all(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    BASELINE.drop_all(op.get_bind())

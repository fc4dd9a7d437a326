"""Add ``request_records``: a request as asked, stored once per run before it is planned.

A workflow that plans in a step of its own (skip matching) stores its request here in
its first task; every later task and its Spark job read it by the run's identity
(docs/decisions/, "A gated run reads its record, not its XComs").
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_request_records"
down_revision: str | None = "0008_brokers"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "request_records",
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
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
        sa.UniqueConstraint("dag_id", "run_id", name="uq_request_records_run"),
    )


def downgrade() -> None:
    op.drop_table("request_records")

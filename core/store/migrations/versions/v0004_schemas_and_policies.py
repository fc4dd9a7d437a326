"""Add ``schema_versions`` (the schema registry) and ``broker_policies`` (Pulsar's policies
of a namespace or a topic: deduplication, schema compatibility)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_schemas_and_policies"
down_revision: str | None = "0003_drop_tables_digest"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "schema_versions",
        sa.Column("schema_id", sa.String(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("schema_id", "version"),
    )
    op.create_table(
        "broker_policies",
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "name"),
    )


def downgrade() -> None:
    op.drop_table("broker_policies")
    op.drop_table("schema_versions")

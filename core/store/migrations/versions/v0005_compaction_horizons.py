"""Add ``compaction_horizons``: the position each topic partition was last compacted through."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_compaction_horizons"
down_revision: str | None = "0004_schemas_and_policies"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "compaction_horizons",
        sa.Column("topic_partition", sa.String(), nullable=False),
        sa.Column("ledger_id", sa.BigInteger(), nullable=False),
        sa.Column("entry_id", sa.BigInteger(), nullable=False),
        sa.Column("compacted_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic_partition"),
    )


def downgrade() -> None:
    op.drop_table("compaction_horizons")

"""Add ``approval_answers`` and ``approval_requests.try_number``: the answers the gates
recorded as Airflow resumed them, and the try of a gate that showed each presentation.

Apply and the closing record read the answers from here instead of from Airflow's
REST API. Presentations recorded before this revision have no try (NULL) and no
answer: a gate waiting across the upgrade records its answer when it resumes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_approval_answers"
down_revision: str | None = "0005_compaction_horizons"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("approval_requests", sa.Column("try_number", sa.Integer(), nullable=True))
    op.create_table(
        "approval_answers",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "request_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("chosen", sa.JSON(), nullable=False),
        sa.Column("responded_by", sa.String(), nullable=True),
        sa.Column("responded_at_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["approval_requests.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id"),
    )


def downgrade() -> None:
    op.drop_table("approval_answers")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("try_number")

"""Drop ``cursorops_schema``: ``alembic_version`` now says what schema a store holds.

The table held the digest of the table names the store had created, which the
code before migrations read at every open; the revision took its place.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_drop_tables_digest"
down_revision: str | None = "0002_waiting_plans_index"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.drop_table("cursorops_schema")


def downgrade() -> None:
    op.create_table(
        "cursorops_schema",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("tables_digest", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )

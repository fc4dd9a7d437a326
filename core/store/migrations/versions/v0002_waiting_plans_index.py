"""An index for the plans that wait for approval, newest first, of one topic or all.

``PlanRecords.waiting`` (the Cursors page and the approval views) filters
``applied_at_ms IS NULL`` and orders by ``id`` descending, optionally of one
topic; without an index it reads every plan record ever made. A partial index
holds only the waiting ones, so it stays as small as the queue of approvals.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_waiting_plans_index"
down_revision: str | None = "0001_baseline"
branch_labels: str | None = None
depends_on: str | None = None

WAITING = sa.text("applied_at_ms IS NULL")


def upgrade() -> None:
    op.create_index(
        "ix_plan_records_waiting",
        "plan_records",
        ["topic", "id"],
        sqlite_where=WAITING,
        postgresql_where=WAITING,
    )


def downgrade() -> None:
    op.drop_index("ix_plan_records_waiting", table_name="plan_records")

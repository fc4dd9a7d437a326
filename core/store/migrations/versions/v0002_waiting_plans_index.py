"""An index for the plans that wait for approval, newest first, of one topic or all.

``PlanRecords.waiting`` (the Cursors page and the approval views) filters
``applied_at_ms IS NULL`` and orders by ``id`` descending, optionally of one
topic; without an index it reads every plan record ever made. With
``(applied_at_ms, topic, id)`` it reads only the waiting ones (``IS NULL`` is an
equality for the index), of the topic in ``id`` order. Not a partial index: its
``WHERE`` is a dialect option, and naming the PostgreSQL dialect in the tables
would load it in every SQLite command.
"""

from __future__ import annotations

from alembic import op

revision = "0002_waiting_plans_index"
down_revision: str | None = "0001_baseline"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_plan_records_waiting", "plan_records", ["applied_at_ms", "topic", "id"])


def downgrade() -> None:
    op.drop_index("ix_plan_records_waiting", table_name="plan_records")

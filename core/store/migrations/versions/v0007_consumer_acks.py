"""Add ``cursors.consumer_ack_*``: the highest message a consumer acknowledged on each cursor.

The poison-pill radar's age rule counts acknowledgements consumers made, not
skips, resets, undos or a redrive's acknowledgements (docs/decisions/, "The
poison-pill radar"). A cursor from before this revision has no mark (NULL): no
consumer acknowledgement is known, so the rule finds nothing behind one until a
consumer acknowledges again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_consumer_acks"
down_revision: str | None = "0006_approval_answers"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = ("consumer_ack_ledger_id", "consumer_ack_entry_id", "consumer_ack_batch_index")


# Plain ALTER TABLE, both ways, on both engines (SQLite has DROP COLUMN since 3.35): a
# batch copy would drop and recreate ``cursors``, and dropping it deletes every cursor's
# journal with it (``cursor_deltas`` references it ON DELETE CASCADE).


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("cursors", sa.Column(name, sa.BigInteger(), nullable=True))


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("cursors", name)

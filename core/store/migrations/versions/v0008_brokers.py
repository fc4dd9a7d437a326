"""Add ``brokers``: the cluster's brokers, their lives and heartbeats.

Several brokers share one metadata store; each registers here, beats, and
declares the others dead when their heartbeats stop (docs/decisions/, "Several
brokers on one store"). A store from before this revision has no broker row:
the first broker to start registers itself.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_brokers"
down_revision: str | None = "0007_consumer_acks"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "brokers",
        sa.Column("broker_id", sa.String(), primary_key=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("released", sa.Boolean(), nullable=False),
        sa.Column("broker_url", sa.String(), nullable=False),
        sa.Column("broker_url_tls", sa.String(), nullable=False),
        sa.Column("web_url", sa.String(), nullable=False),
        sa.Column("listeners", sa.JSON(), nullable=False),
        sa.Column("started_ms", sa.BigInteger(), nullable=False),
        sa.Column("heartbeat_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("brokers")

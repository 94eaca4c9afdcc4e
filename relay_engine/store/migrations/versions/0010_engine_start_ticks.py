"""Engines record when their process started in clock ticks since boot: another engine on
the host tells a live engine from a dead one by it. The wall-clock start it compared before
moves when the clock is set, and a live engine was taken for dead, its work taken back.

Revision ID: 0010_engine_start_ticks
Revises: 0009_feed_gaps
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_engine_start_ticks"
down_revision = "0009_feed_gaps"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.add_column(sa.Column("start_ticks", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.drop_column("start_ticks")

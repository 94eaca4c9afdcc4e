"""Engines record when they began to sleep (the fleet had nothing to do): ``relay engines``
and ``relay status`` say an engine is asleep rather than leave an operator to wonder why it
ticks so rarely.

Revision ID: 0013_engine_asleep_since
Revises: 0012_token_counts_64_bits
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_engine_asleep_since"
down_revision = "0012_token_counts_64_bits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.add_column(sa.Column("asleep_since", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.drop_column("asleep_since")

"""Engines record whether they hear other processes' wake-ups ("heard", "not heard", "off"):
an engine behind a pooler that drops LISTEN ticks at its interval instead of at once, and
``relay engines`` says so.

Revision ID: 0011_engine_wake_ups
Revises: 0010_engine_start_ticks
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_engine_wake_ups"
down_revision = "0010_engine_start_ticks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.add_column(sa.Column("wake_ups", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_engine") as batch:
        batch.drop_column("wake_ups")

"""Scheduled jobs can be paused: a paused template starts no runs until it is resumed.

Revision ID: 0008_schedule_pause
Revises: 0007_pr_notes
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_schedule_pause"
down_revision = "0007_pr_notes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("relay_schedule") as batch:
        batch.add_column(sa.Column("paused_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_schedule") as batch:
        batch.drop_column("paused_at")

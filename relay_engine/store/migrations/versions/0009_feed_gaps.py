"""Notification cursors remember the ids they passed before those events were visible: on
PostgreSQL an event shows at its commit, not in id order (see relay_engine.store.feed).

Revision ID: 0009_feed_gaps
Revises: 0008_schedule_pause
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_feed_gaps"
down_revision = "0008_schedule_pause"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("relay_notify_cursor") as batch:
        batch.add_column(sa.Column("gaps", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_notify_cursor") as batch:
        batch.drop_column("gaps")

"""Schedules: job files with a cron expression are templates, each slot a run of its own
(the job ``<id>@<slot>``), and the cursor up to which a template's slots are decided.

Revision ID: 0006_schedules
Revises: 0005_memory
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0006_schedules"
down_revision = "0005_memory"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "relay_schedule",
        sa.Column("id", TEXT(), nullable=False),
        sa.Column("cron", TEXT(), nullable=False),
        sa.Column("timezone", TEXT(), nullable=False),
        sa.Column("catch_up", TEXT(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=True),
        sa.Column("spec_hash", TEXT(), nullable=False),
        sa.Column("source_path", TEXT(), nullable=True),
        sa.Column("cursor_at", sa.Float(), nullable=False),
        sa.Column("last_run_job", TEXT(), nullable=True),
        sa.Column("last_run_at", sa.Float(), nullable=True),
        sa.Column("missed_count", sa.Integer(), nullable=False),
        sa.Column("last_missed_at", sa.Float(), nullable=True),
        sa.Column("problem", TEXT(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("relay_schedule")

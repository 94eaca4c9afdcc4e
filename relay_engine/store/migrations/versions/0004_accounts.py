"""Accounts: quota windows per provider account (what claude's rate_limit_event and codex's
rate_limits say of a plan's five-hour and weekly windows), and the account of each
execution and mirrored agent, so spend, limits and logins can be kept per account.

Existing rows keep their meaning: a limit keyed ``claude`` is the provider's default
account, and executions and agents without an account are the default's.

Revision ID: 0004_accounts
Revises: 0003_needs_you
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0004_accounts"
down_revision = "0003_needs_you"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "relay_quota_window",
        sa.Column("key", TEXT(), nullable=False),
        sa.Column("window", TEXT(), nullable=False),
        sa.Column("provider", TEXT(), nullable=False),
        sa.Column("account", TEXT(), nullable=False),
        sa.Column("status", TEXT(), nullable=False),
        sa.Column("utilization", sa.Float(), nullable=True),
        sa.Column("resets_at", sa.Float(), nullable=True),
        sa.Column("window_minutes", sa.Integer(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("overage", TEXT(), nullable=True),
        sa.Column("agent", TEXT(), nullable=True),
        sa.Column("observed_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window"),
    )
    for table in ("relay_execution", "relay_agent"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("account", TEXT(), nullable=True))


def downgrade() -> None:
    for table in ("relay_agent", "relay_execution"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("account")
    op.drop_table("relay_quota_window")

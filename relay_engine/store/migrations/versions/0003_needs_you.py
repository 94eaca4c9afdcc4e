"""Needs you: agents' asks (tool requests and questions no rule decided) as durable rows,
rules added by "always" answers, held tasks (taken over by an operator), the operator's
words for a task's next prompt, and the denials each execution met.

Revision ID: 0003_needs_you
Revises: 0002_scale_out
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0003_needs_you"
down_revision = "0002_scale_out"
branch_labels = None
depends_on = None

EMPTY_LIST = sa.text("'[]'")
TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    _create_ask()
    _create_permission_rule()
    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("denials", sa.JSON(), nullable=True, server_default=EMPTY_LIST)
        )
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("operator_notes", sa.JSON(), nullable=True, server_default=EMPTY_LIST)
        )
        batch_op.add_column(sa.Column("held_by", TEXT(), nullable=True))
        batch_op.add_column(sa.Column("held_at", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("keep_work", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def _create_ask() -> None:
    op.create_table(
        "relay_ask",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", TEXT(), nullable=False),
        sa.Column("task_key", TEXT(), nullable=True),
        sa.Column("execution_id", TEXT(), nullable=False),
        sa.Column("engine_id", TEXT(), nullable=False),
        sa.Column("agent", TEXT(), nullable=False),
        sa.Column("provider", TEXT(), nullable=False),
        sa.Column("kind", TEXT(), nullable=False),
        sa.Column("request_id", TEXT(), nullable=False),
        sa.Column("tool", TEXT(), nullable=False),
        sa.Column("tool_input", sa.JSON(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("suggested_rule", TEXT(), nullable=True),
        sa.Column("status", TEXT(), nullable=False),
        sa.Column("answer", TEXT(), nullable=True),
        sa.Column("answer_text", sa.Text(), nullable=True),
        sa.Column("answered_by", TEXT(), nullable=True),
        sa.Column("rule_added", TEXT(), nullable=True),
        sa.Column("asked_at", sa.Float(), nullable=False),
        sa.Column("timeout_at", sa.Float(), nullable=True),
        sa.Column("answered_at", sa.Float(), nullable=True),
        sa.Column("relayed_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    for column in ("execution_id", "job_id", "status", "task_key"):
        op.create_index(f"ix_relay_ask_{column}", "relay_ask", [column], unique=False)


def _create_permission_rule() -> None:
    op.create_table(
        "relay_permission_rule",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scope", TEXT(), nullable=False),
        sa.Column("target", TEXT(), nullable=False),
        sa.Column("effect", TEXT(), nullable=False),
        sa.Column("rule", TEXT(), nullable=False),
        sa.Column("ask_id", sa.Integer(), nullable=True),
        sa.Column("created_by", TEXT(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_relay_permission_rule_target", "relay_permission_rule", ["target"], unique=False
    )


def downgrade() -> None:
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.drop_column("keep_work")
        batch_op.drop_column("held_at")
        batch_op.drop_column("held_by")
        batch_op.drop_column("operator_notes")
    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.drop_column("denials")
    op.drop_index("ix_relay_permission_rule_target", table_name="relay_permission_rule")
    op.drop_table("relay_permission_rule")
    for column in ("execution_id", "job_id", "status", "task_key"):
        op.drop_index(f"ix_relay_ask_{column}", table_name="relay_ask")
    op.drop_table("relay_ask")

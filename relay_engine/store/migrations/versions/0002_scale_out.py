"""Everything since 0.1.0: pull requests, reviews, spend, budgets, troubleshooters, waits
between jobs, agent availability, notification cursors; and scale-out: engines' slots and
agents, agents per engine, and claimed scopes (workstream, shared directory) made unique
by the database.

Columns that are NOT NULL get a server default so existing rows stay valid; JSON lists
start as ``[]``. ``relay_agent`` is only a mirror of each engine's config (engines write it
again when they start), so it is recreated with its new key rather than copied.

Revision ID: 0002_scale_out
Revises: 0001_release_0_1_0
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0002_scale_out"
down_revision = "0001_release_0_1_0"
branch_labels = None
depends_on = None

EMPTY_LIST = sa.text("'[]'")


def _agent_table(*key: str) -> None:
    columns: list[sa.Column[str]] = [
        sa.Column("engine_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False)
    ]
    op.create_table(
        "relay_agent",
        *(columns if "engine_id" in key else []),
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("roles", sa.JSON(), nullable=True),
        sa.Column("model_class", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(*key),
    )


def upgrade() -> None:
    _upgrade_agent_status_to_notify_cursor()
    _upgrade_pull_request()
    _upgrade_review_to_execution()
    _upgrade_job_to_plan()
    _upgrade_task()


def _upgrade_agent_status_to_notify_cursor() -> None:
    op.create_table(
        "relay_agent_status",
        sa.Column("agent_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("fix", sa.Text(), nullable=True),
        sa.Column("until", sa.Float(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("config_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("since", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id"),
    )
    op.create_table(
        "relay_notify_cursor",
        sa.Column("destination", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("last_event_id", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("destination"),
    )


def _upgrade_pull_request() -> None:
    op.create_table(
        "relay_pull_request",
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("forge", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("remote", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("url", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("base_branch", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("head_branch", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("head_sha", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("mergeable", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("review_decision", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("merge_commit", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("merge_requested", sa.Boolean(), nullable=False),
        sa.Column("force_merge", sa.Boolean(), nullable=False),
        sa.Column("close_requested", sa.Boolean(), nullable=False),
        sa.Column("rebases", sa.Integer(), nullable=False),
        sa.Column("action_owner", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("action_expires_at", sa.Float(), nullable=True),
        sa.Column("retry_at", sa.Float(), nullable=True),
        sa.Column("last_checked_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id"),
    )
    with op.batch_alter_table("relay_pull_request", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_pull_request_state"), ["state"], unique=False)


def _upgrade_review_to_execution() -> None:
    op.create_table(
        "relay_review",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("task_key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("head_sha", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("verdict", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("findings", sa.JSON(), nullable=True),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.Column("followed_up", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_review", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_review_job_id"), ["job_id"], unique=False)

    op.drop_table("relay_agent")
    _agent_table("engine_id", "id")
    with op.batch_alter_table("relay_engine", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("condition", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(sa.Column("slots", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(
            sa.Column("agents", sa.JSON(), nullable=True, server_default=EMPTY_LIST)
        )

    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("model", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(
            sa.Column("cost_estimated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def _upgrade_job_to_plan() -> None:
    with op.batch_alter_table("relay_job", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("max_review_rounds", sa.Integer(), nullable=False, server_default="3")
        )
        batch_op.add_column(sa.Column("after", sa.JSON(), nullable=True, server_default=EMPTY_LIST))
        batch_op.add_column(
            sa.Column("troubleshoot", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.add_column(sa.Column("budget_usd", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("budget_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("budget_said", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(sa.Column("blocked_by", sa.Text(), nullable=True))

    with op.batch_alter_table("relay_plan", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("recoveries", sa.Integer(), nullable=False, server_default="0")
        )


def _upgrade_task() -> None:
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("external_deps", sa.JSON(), nullable=True, server_default=EMPTY_LIST)
        )
        batch_op.add_column(
            sa.Column("recoveries", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("lock_dir", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("parent_key", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("troubleshoots", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("guidance", sa.Text(), nullable=True))
        batch_op.create_index(
            "ix_relay_task_queue", ["state", "priority", "created_at", "key"], unique=False
        )
        batch_op.create_index("ix_relay_task_resumed", ["resumed_at"], unique=False)
        batch_op.create_index(
            "ux_relay_task_directory",
            ["lock_dir"],
            unique=True,
            sqlite_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND lock_dir IS NOT NULL"
            ),
            postgresql_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND lock_dir IS NOT NULL"
            ),
        )
        batch_op.create_index(
            "ux_relay_task_workstream",
            ["job_id", "workstream"],
            unique=True,
            sqlite_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND workstream IS NOT NULL"
            ),
            postgresql_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND workstream IS NOT NULL"
            ),
        )

    op.execute("UPDATE relay_schema SET version = 2")  # relay 0.1.0 refuses it from now on


def downgrade() -> None:
    _downgrade_task_to_job()
    _downgrade_execution_to_agent_status()


def _downgrade_task_to_job() -> None:
    op.execute("UPDATE relay_schema SET version = 1")
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.drop_index(
            "ux_relay_task_workstream",
            sqlite_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND workstream IS NOT NULL"
            ),
            postgresql_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND workstream IS NOT NULL"
            ),
        )
        batch_op.drop_index(
            "ux_relay_task_directory",
            sqlite_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND lock_dir IS NOT NULL"
            ),
            postgresql_where=sa.text(
                "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING') AND lock_dir IS NOT NULL"
            ),
        )
        batch_op.drop_index("ix_relay_task_resumed")
        batch_op.drop_index("ix_relay_task_queue")
        batch_op.drop_column("guidance")
        batch_op.drop_column("troubleshoots")
        batch_op.drop_column("parent_key")
        batch_op.drop_column("lock_dir")
        batch_op.drop_column("recoveries")
        batch_op.drop_column("external_deps")

    with op.batch_alter_table("relay_plan", schema=None) as batch_op:
        batch_op.drop_column("recoveries")

    with op.batch_alter_table("relay_job", schema=None) as batch_op:
        batch_op.drop_column("blocked_by")
        batch_op.drop_column("budget_said")
        batch_op.drop_column("budget_tokens")
        batch_op.drop_column("budget_usd")
        batch_op.drop_column("troubleshoot")
        batch_op.drop_column("after")
        batch_op.drop_column("max_review_rounds")


def _downgrade_execution_to_agent_status() -> None:
    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.drop_column("cost_estimated")
        batch_op.drop_column("model")
        batch_op.drop_column("cached_tokens")

    with op.batch_alter_table("relay_engine", schema=None) as batch_op:
        batch_op.drop_column("agents")
        batch_op.drop_column("slots")
        batch_op.drop_column("condition")

    op.drop_table("relay_agent")
    _agent_table("id")
    with op.batch_alter_table("relay_review", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_review_job_id"))

    op.drop_table("relay_review")
    with op.batch_alter_table("relay_pull_request", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_pull_request_state"))

    op.drop_table("relay_pull_request")
    op.drop_table("relay_notify_cursor")
    op.drop_table("relay_agent_status")

"""relay 0.1.0 schema

Revision ID: 0001_release_0_1_0
Revises:
Create Date: 2026-11-30 (the schema relay 0.1.0 shipped with)
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0001_release_0_1_0"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _upgrade_agent_to_command()
    _upgrade_command_to_event()
    _upgrade_execution()
    _upgrade_job_to_memory()
    _upgrade_plan_to_provider_limit()
    _upgrade_provider_session_to_schema()
    _upgrade_task()
    _upgrade_task_indexes()


def _upgrade_agent_to_command() -> None:
    op.create_table(
        "relay_agent",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("roles", sa.JSON(), nullable=True),
        sa.Column("model_class", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "relay_assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("workstream", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("agent_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("executions", sa.Integer(), nullable=False),
        sa.Column("last_execution_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_assignment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_assignment_job_id"), ["job_id"], unique=False)

    op.create_table(
        "relay_command",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("applied_at", sa.Float(), nullable=True),
        sa.Column("applied_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("succeeded", sa.Boolean(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )


def _upgrade_command_to_event() -> None:
    with op.batch_alter_table("relay_command", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_relay_command_applied_at"), ["applied_at"], unique=False
        )

    op.create_table(
        "relay_engine",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("process_start", sa.Float(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.Column("stopped_at", sa.Float(), nullable=True),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "relay_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("task_key", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("level", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_event_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_relay_event_task_key"), ["task_key"], unique=False)


def _upgrade_execution() -> None:
    op.create_table(
        "relay_execution",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("task_key", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("engine_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("agent", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("argv", sa.JSON(), nullable=True),
        sa.Column("cwd", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("pgid", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("artifact_dir", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("last_output", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_execution_ended_at"), ["ended_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_relay_execution_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_relay_execution_task_key"), ["task_key"], unique=False)


def _upgrade_job_to_memory() -> None:
    op.create_table(
        "relay_job",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("objective", sa.Text(), nullable=False),
        sa.Column("repo_path", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("base_branch", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("job_branch", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("priority", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("wave_gate", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("auto_merge", sa.Boolean(), nullable=False),
        sa.Column("review_enabled", sa.Boolean(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("head_sha", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("spec_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("source_path", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("approved_wave", sa.Integer(), nullable=False),
        sa.Column("max_plan_rounds", sa.Integer(), nullable=False),
        sa.Column("sim", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_job", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_job_state"), ["state"], unique=False)

    op.create_table(
        "relay_memory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("workstream", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("task_key", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_memory", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_memory_job_id"), ["job_id"], unique=False)


def _upgrade_plan_to_provider_limit() -> None:
    op.create_table(
        "relay_plan",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("previous_plan_id", sa.Integer(), nullable=True),
        sa.Column("trigger", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("guidance", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("objective_status", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("assessment", sa.Text(), nullable=True),
        sa.Column("generated_task_ids", sa.JSON(), nullable=True),
        sa.Column("children_stored", sa.Boolean(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("rejection", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("execution_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("agent", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_plan", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_relay_plan_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_relay_plan_status"), ["status"], unique=False)

    op.create_table(
        "relay_provider_limit",
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reset_at", sa.Float(), nullable=True),
        sa.Column("source_text", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("detected_at", sa.Float(), nullable=True),
        sa.Column("consecutive_hits", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("provider"),
    )


def _upgrade_provider_session_to_schema() -> None:
    op.create_table(
        "relay_provider_session",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("workstream", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("agent_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("last_started_at", sa.Float(), nullable=True),
        sa.Column("last_resumed_at", sa.Float(), nullable=True),
        sa.Column("last_failed_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("relay_provider_session", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_relay_provider_session_job_id"), ["job_id"], unique=False
        )

    op.create_table(
        "relay_schema",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def _upgrade_task() -> None:
    op.create_table(
        "relay_task",
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("model_class", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("workstream", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("priority", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("story_size", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("dependencies", sa.JSON(), nullable=True),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("execution_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("execution_history", sa.JSON(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        sa.Column("not_before", sa.Float(), nullable=True),
        sa.Column("waiting_on_provider", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("parked_at", sa.Float(), nullable=True),
        sa.Column("resumed_at", sa.Float(), nullable=True),
        sa.Column("pinned_agent", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("agent", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("wave", sa.Integer(), nullable=False),
        sa.Column("blocked_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("result_summary", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("spec_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("sim", sa.JSON(), nullable=True),
        sa.Column("diffstat", sa.Text(), nullable=True),
        sa.Column("commit_sha", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def _upgrade_task_indexes() -> None:
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_relay_task_execution_id"), ["execution_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_relay_task_job_id"), ["job_id"], unique=False)
        batch_op.create_index("ix_relay_task_job_state", ["job_id", "state"], unique=False)
        batch_op.create_index(batch_op.f("ix_relay_task_state"), ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("relay_task", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_task_state"))
        batch_op.drop_index("ix_relay_task_job_state")
        batch_op.drop_index(batch_op.f("ix_relay_task_job_id"))
        batch_op.drop_index(batch_op.f("ix_relay_task_execution_id"))

    op.drop_table("relay_task")
    op.drop_table("relay_schema")
    with op.batch_alter_table("relay_provider_session", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_provider_session_job_id"))

    op.drop_table("relay_provider_session")
    op.drop_table("relay_provider_limit")
    with op.batch_alter_table("relay_plan", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_plan_status"))
        batch_op.drop_index(batch_op.f("ix_relay_plan_job_id"))

    op.drop_table("relay_plan")
    with op.batch_alter_table("relay_memory", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_memory_job_id"))

    op.drop_table("relay_memory")
    with op.batch_alter_table("relay_job", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_job_state"))

    op.drop_table("relay_job")
    with op.batch_alter_table("relay_execution", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_execution_task_key"))
        batch_op.drop_index(batch_op.f("ix_relay_execution_job_id"))
        batch_op.drop_index(batch_op.f("ix_relay_execution_ended_at"))

    op.drop_table("relay_execution")
    with op.batch_alter_table("relay_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_event_task_key"))
        batch_op.drop_index(batch_op.f("ix_relay_event_job_id"))

    op.drop_table("relay_event")
    op.drop_table("relay_engine")
    with op.batch_alter_table("relay_command", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_command_applied_at"))

    op.drop_table("relay_command")
    with op.batch_alter_table("relay_assignment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_relay_assignment_job_id"))

    op.drop_table("relay_assignment")
    op.drop_table("relay_agent")

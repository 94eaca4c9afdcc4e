"""Pull request notes: the plans, assessments, reviews and failures relay writes back on a
job's pull request, with the forge's comment id, so an update edits the comment in place.

Revision ID: 0007_pr_notes
Revises: 0006_schedules
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0007_pr_notes"
down_revision = "0006_schedules"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "relay_pr_note",
        sa.Column("job_id", TEXT(), nullable=False),
        sa.Column("key", TEXT(), nullable=False),
        sa.Column("kind", TEXT(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("line_comments", sa.JSON(), nullable=True),
        sa.Column("digest", TEXT(), nullable=False),
        sa.Column("posted_digest", TEXT(), nullable=True),
        sa.Column("comment_id", TEXT(), nullable=True),
        sa.Column("forge", TEXT(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("claimed_by", TEXT(), nullable=True),
        sa.Column("claim_expires_at", sa.Float(), nullable=True),
        sa.Column("posted_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("relay_pr_note")

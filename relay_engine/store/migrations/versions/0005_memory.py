"""Memory agents use: each note says who wrote it (``source`` "relay" for what relay noted of
a finished task, "agent" for an agent's ``memory_add``) and, for an agent's, the execution
that said it.

Existing notes are relay's own: they were all written from finished tasks' summaries.

Revision ID: 0005_memory
Revises: 0004_accounts
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = "0005_memory"
down_revision = "0004_accounts"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("relay_memory", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source", TEXT(), nullable=False, server_default="relay"))
        batch_op.add_column(sa.Column("execution_id", TEXT(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relay_memory", schema=None) as batch_op:
        batch_op.drop_column("execution_id")
        batch_op.drop_column("source")

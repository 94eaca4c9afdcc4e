"""Token counts and token budgets are 64-bit on PostgreSQL, as they always were on SQLite:
a budget of five billion tokens, or a run reporting more than 2.1 billion, was refused
("out of range for type integer"), and the refused exit write stopped the engine.

Revision ID: 0012_token_counts_64_bits
Revises: 0011_engine_wake_ups
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_token_counts_64_bits"
down_revision = "0011_engine_wake_ups"
branch_labels = None
depends_on = None

COLUMNS = {
    "relay_execution": ("input_tokens", "output_tokens", "cached_tokens"),
    "relay_job": ("budget_tokens",),
}


def upgrade() -> None:
    _retype(sa.Integer(), sa.BigInteger())


def downgrade() -> None:
    _retype(sa.BigInteger(), sa.Integer())


def _retype(old: sa.types.TypeEngine[int], new: sa.types.TypeEngine[int]) -> None:
    for table, columns in COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, existing_type=old, type_=new, existing_nullable=True)

"""Alembic's entry point for relay: migrations run on the connection relay hands in.

relay never runs Alembic from an ini file; :mod:`relay_engine.store.migrate` builds the config
and passes an open connection, so the same code serves SQLite and PostgreSQL.
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import relay_engine.store.schema  # noqa: F401 - registers every table on SQLModel.metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters by copying tables
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()

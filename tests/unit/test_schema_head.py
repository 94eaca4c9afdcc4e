"""relay tells a database at its schema head from one row of ``alembic_version``, without
loading Alembic (every command opens the database), so the head is a constant and the
version table is relay's own copy: these tests hold both to Alembic's."""

from __future__ import annotations

from alembic.ddl.impl import DefaultImpl
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateTable

from relay_engine.store import migrate


def test_head_revision_is_the_newest_migration() -> None:
    assert migrate.head_revision() == migrate.HEAD_REVISION, (
        "a migration was added: set HEAD_REVISION in relay_engine/store/migrate.py to it"
    )


def test_version_table_is_the_one_alembic_makes() -> None:
    hook = DefaultImpl.__new__(DefaultImpl)  # the hook reads nothing of its instance
    alembics = hook.version_table_impl(
        version_table="alembic_version",
        version_table_schema=None,
        version_table_pk=True,
    )
    for dialect in (sqlite.dialect(), postgresql.dialect()):
        ours = str(CreateTable(migrate.VERSION_TABLE).compile(dialect=dialect))
        assert ours == str(CreateTable(alembics).compile(dialect=dialect))

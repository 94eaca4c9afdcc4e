"""Schema versions: which Alembic revision a database is at, and moving it to this relay's.

A new database is created whole and stamped at the head. A database relay 0.1.0 made
(before migrations existed) is recognised by its ``relay_schema`` row and treated as the
first revision. Upgrading is explicit (``relay db upgrade``) unless the caller allows it
(``[engine] auto_migrate``, on by default for SQLite where one workspace has one relay),
and never happens under an engine that is still running an older release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import Engine as SAEngine
from sqlmodel import SQLModel

import relay_engine.model  # noqa: F401 - registers every table on SQLModel.metadata

LEGACY_REVISION = "0001_release_0_1_0"
"""Databases made by relay 0.1.0 have no alembic_version table; they are at this revision."""


class SchemaMismatch(RuntimeError):
    """The database is at another schema revision than this relay's; the message says what
    to run."""


@dataclass(frozen=True)
class SchemaState:
    current: str | None  # None: an empty database
    head: str
    known: bool  # this relay has the current revision in its history

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def _config() -> Config:
    config = Config()
    location = resources.files("relay_engine") / "migrations"
    config.set_main_option("script_location", str(location))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def schema_state(connection: Connection) -> SchemaState:
    script = ScriptDirectory.from_config(_config())
    head = script.get_current_head() or ""
    current = MigrationContext.configure(connection).get_current_revision()
    if current is None and inspect(connection).has_table("relay_schema"):
        current = LEGACY_REVISION
    known = current is None or current in {rev.revision for rev in script.walk_revisions()}
    return SchemaState(current, head, known)


def prepare(engine: SAEngine, *, where: str, auto_migrate: bool) -> SchemaState:
    """Make a database usable by this relay, or say exactly why it is not."""
    with engine.begin() as connection:
        state = schema_state(connection)
        if state.current is None:
            SQLModel.metadata.create_all(connection)
            _stamp(connection, state.head)
            return SchemaState(state.head, state.head, True)
    if state.up_to_date:
        return state
    if not state.known:
        raise SchemaMismatch(
            f"{where}: schema revision {state.current} was written by a newer relay (this one "
            f"knows up to {state.head}); upgrade relay"
        )
    if not auto_migrate:
        raise SchemaMismatch(
            f"{where}: schema revision {state.current} is older than this relay's {state.head}; "
            "run `relay db upgrade` once every engine on it runs this release"
        )
    return upgrade(engine)


def upgrade(engine: SAEngine) -> SchemaState:
    """Migrate to the head in one transaction (SQLite and PostgreSQL both roll DDL back)."""
    with engine.begin() as connection:
        state = schema_state(connection)
        if state.current == LEGACY_REVISION and not _has_version_table(connection):
            _stamp(connection, LEGACY_REVISION)
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return SchemaState(state.head, state.head, True)


def _stamp(connection: Connection, revision: str) -> None:
    config = _config()
    config.attributes["connection"] = connection
    command.stamp(config, revision)


def _has_version_table(connection: Connection) -> bool:
    return inspect(connection).has_table("alembic_version")


@dataclass(frozen=True)
class LiveEngine:
    id: str
    host: str
    pid: int
    heartbeat_age_s: float


def live_engines(
    connection: Connection, lease_s: float, now: float | None = None
) -> list[LiveEngine]:
    """Engines that heartbeat within one lease: an upgrade under them would pull their
    schema away."""
    if not inspect(connection).has_table("relay_engine"):
        return []
    now = time.time() if now is None else now
    rows = connection.execute(
        text(
            "SELECT id, host, pid, heartbeat_at FROM relay_engine "
            "WHERE stopped_at IS NULL AND heartbeat_at >= :since"
        ),
        {"since": now - lease_s},
    )
    return [LiveEngine(r.id, r.host, r.pid, now - r.heartbeat_at) for r in rows]

"""Schema versions: which Alembic revision a database is at, and moving it to this relay's.

A new database is created whole and stamped at the head. A database relay 0.1.0 made
(before migrations existed) is recognised by its ``relay_schema`` table and treated as
the first revision. Upgrading is explicit (``relay db upgrade``) unless the caller allows
it (``[engine] auto_migrate``, on by default for SQLite where one workspace has one
relay), and never happens under an engine that still heartbeats: it may be an older
release that the new schema would pull the tables from under.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import Engine as SAEngine
from sqlmodel import SQLModel

from relay_engine.core.faults import DatabaseFault
from relay_engine.store.schema import SCHEMA_VERSION, SchemaInfo

LEGACY_REVISION = "0001_release_0_1_0"
"""Databases made by relay 0.1.0 have no alembic_version table; they are at this revision."""
MIGRATE_LOCK_KEY = 0x72656C61794D  # serialises schema work of engines starting at once (PG)
UPGRADE_COMMAND = "relay db upgrade"


class SchemaMismatch(DatabaseFault):
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


@dataclass(frozen=True)
class LiveEngine:
    id: str
    host: str
    pid: int
    heartbeat_age_s: float

    def __str__(self) -> str:
        return f"{self.id} on {self.host} pid {self.pid} ({self.heartbeat_age_s:.0f}s ago)"


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option(
        "script_location", str(resources.files("relay_engine.store") / "migrations")
    )
    config.attributes["connection"] = connection
    return config


@cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


@cache
def head_revision() -> str:
    head = _script().get_current_head()
    assert head is not None, "relay_engine/store/migrations has no revisions"
    return head


def current_revision(connection: Connection) -> str | None:
    current = MigrationContext.configure(connection).get_current_revision()
    if current is None and inspect(connection).has_table("relay_schema"):
        return LEGACY_REVISION
    return current


def schema_state(connection: Connection) -> SchemaState:
    current = current_revision(connection)
    known = current is None or current in {rev.revision for rev in _script().walk_revisions()}
    return SchemaState(current, head_revision(), known)


def create_schema(connection: Connection) -> None:
    """A new database: every table as the models say, stamped at the head."""
    SQLModel.metadata.create_all(connection)
    MigrationContext.configure(connection).stamp(_script(), head_revision())
    table = SchemaInfo.__table__  # type: ignore[attr-defined]  # sqlmodel: SQLAlchemy sets it, untyped
    connection.execute(table.insert().values(id=1, version=SCHEMA_VERSION))


def check(connection: Connection, *, where: str) -> SchemaState:
    """Refuse a database this relay cannot read as it is, naming both revisions."""
    state = schema_state(connection)
    if state.current is None:
        raise DatabaseFault(f"{where} has no relay tables: nothing was submitted there yet")
    _refuse_mismatch(state, where=where, can_upgrade=False)
    return state


def _refuse_mismatch(state: SchemaState, *, where: str, can_upgrade: bool) -> None:
    if state.up_to_date or (can_upgrade and state.known):
        return
    if not state.known:
        raise SchemaMismatch(
            f"{where}: schema revision {state.current} was written by a newer relay (this "
            f"one knows up to {state.head}); upgrade relay on this host"
        )
    raise SchemaMismatch(
        f"{where}: schema revision {state.current} is older than this relay's {state.head}; "
        f"run `{UPGRADE_COMMAND}` once every engine on it runs this release "
        "(or set [engine] auto_migrate = true)"
    )


def prepare(engine: SAEngine, *, where: str, auto_migrate: bool, lease_s: float) -> SchemaState:
    """Make a database usable by this relay: create it, upgrade it, or say why not.

    The first look takes no lock (the common case: already at the head); schema work is
    then done under a lock and after looking again, so engines starting together on an
    empty PostgreSQL database create it once.
    """
    with engine.connect() as connection:
        state = schema_state(connection)
    if state.up_to_date:
        return state
    _refuse_mismatch(state, where=where, can_upgrade=auto_migrate or state.current is None)
    with engine.begin() as connection:
        _lock(connection)
        state = schema_state(connection)
        if state.current is None:
            create_schema(connection)
            return SchemaState(state.head, state.head, True)
        if not state.up_to_date:
            _upgrade(connection, state, where=where, lease_s=lease_s)
    return SchemaState(state.head, state.head, True)


def upgrade(engine: SAEngine, *, where: str, lease_s: float) -> tuple[SchemaState, SchemaState]:
    """``relay db upgrade``: (before, after). Refuses while another engine heartbeats."""
    with engine.begin() as connection:
        _lock(connection)
        before = schema_state(connection)
        if before.current is None:
            create_schema(connection)
        elif not before.up_to_date:
            _refuse_mismatch(before, where=where, can_upgrade=True)
            _upgrade(connection, before, where=where, lease_s=lease_s)
    return before, SchemaState(before.head, before.head, True)


def _upgrade(connection: Connection, state: SchemaState, *, where: str, lease_s: float) -> None:
    live = live_engines(connection, lease_s)
    if live:
        names = "; ".join(str(engine) for engine in live)
        raise SchemaMismatch(
            f"{where}: not upgrading from {state.current} to {state.head} while "
            f"{len(live)} engine(s) run on it ({names}): stop them, then run `{UPGRADE_COMMAND}`"
        )
    if state.current == LEGACY_REVISION and not inspect(connection).has_table("alembic_version"):
        MigrationContext.configure(connection).stamp(_script(), LEGACY_REVISION)
    command.upgrade(_config(connection), "head")


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATE_LOCK_KEY})


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
            "WHERE stopped_at IS NULL AND heartbeat_at >= :since ORDER BY id"
        ),
        {"since": now - lease_s},
    )
    return [LiveEngine(r.id, r.host, r.pid, now - r.heartbeat_at) for r in rows]

"""Schema versions: which Alembic revision a database is at, and moving it to this relay's.

A new database is created whole and stamped at the head. A database relay 0.1.0 made
(before migrations existed) is recognised by its ``relay_schema`` table and treated as
the first revision. Upgrading is explicit (``relay db upgrade``) unless the caller allows
it (``[engine] auto_migrate``, on by default for SQLite where one workspace has one
relay), and never happens under an engine that still heartbeats: it may be an older
release that the new schema would pull the tables from under.

Alembic is imported only when a database is upgraded or is at a revision other than
``HEAD_REVISION``: every ``relay`` command opens the database, and loading Alembic cost a
short command more than its own work. Reading and creating ``alembic_version`` needs
none of it (``VERSION_TABLE`` is the table Alembic itself makes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Engine as SAEngine
from sqlmodel import SQLModel

from relay_engine.core.faults import DatabaseFault
from relay_engine.store.schema import SCHEMA_VERSION, SchemaInfo

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

HEAD_REVISION = "0013_engine_asleep_since"
"""The newest migration in ``migrations/versions``: bump it with every new migration (a unit
test holds it to Alembic's own head, so a forgotten bump fails the build)."""
VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
"""Alembic's version table as Alembic defines it (``DefaultImpl.version_table_impl``)."""
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
    from alembic.config import Config

    config = Config()
    config.set_main_option(
        "script_location", str(resources.files("relay_engine.store") / "migrations")
    )
    config.attributes["connection"] = connection
    return config


@cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


@cache
def head_revision() -> str:
    """Alembic's head, read from the migration scripts: what ``HEAD_REVISION`` must say."""
    head = _script().get_current_head()
    assert head is not None, "relay_engine/store/migrations has no revisions"
    return head


@cache
def _revisions() -> frozenset[str]:
    return frozenset(rev.revision for rev in _script().walk_revisions())


def current_revision(connection: Connection) -> str | None:
    """The row of ``alembic_version``, read as Alembic reads it but without loading it."""
    tables = inspect(connection)
    revisions: list[str] = []
    if tables.has_table(VERSION_TABLE.name):
        revisions = list(connection.execute(select(VERSION_TABLE.c.version_num)).scalars())
    if len(revisions) > 1:
        raise DatabaseFault(f"alembic_version holds more than one revision: {revisions}")
    if revisions:
        return revisions[0]
    return LEGACY_REVISION if tables.has_table("relay_schema") else None


def schema_state(connection: Connection) -> SchemaState:
    current = current_revision(connection)
    known = current in (None, HEAD_REVISION) or current in _revisions()
    return SchemaState(current, HEAD_REVISION, known)


def create_schema(connection: Connection) -> None:
    """A new database: every table as the models say, stamped at the head."""
    SQLModel.metadata.create_all(connection)
    _stamp(connection, HEAD_REVISION)
    table = SchemaInfo.__table__  # type: ignore[attr-defined]  # sqlmodel: SQLAlchemy sets it, untyped
    connection.execute(table.insert().values(id=1, version=SCHEMA_VERSION))


def _stamp(connection: Connection, revision: str) -> None:
    """What Alembic's stamp does to a database without ``alembic_version``."""
    VERSION_TABLE.create(connection)
    connection.execute(VERSION_TABLE.insert().values(version_num=revision))


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
    from alembic import command

    if state.current == LEGACY_REVISION and not inspect(connection).has_table(VERSION_TABLE.name):
        _stamp(connection, LEGACY_REVISION)
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

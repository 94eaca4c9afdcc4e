"""Database access: engine setup, units of work, schema versioning and the event feed.

SQLite is the default (one file per workspace); any SQLAlchemy URL works, and
PostgreSQL is how several hosts share one fleet. Writes on SQLite start with
``BEGIN IMMEDIATE`` so two engines on one file serialise at the start of a write
instead of failing half way through with "database is locked".
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from json import JSONDecodeError
from pathlib import Path
from typing import Any

from sqlalchemy import Insert, Table
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Engine as SAEngine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, SQLAlchemyError
from sqlalchemy.pool import QueuePool
from sqlmodel import Session, SQLModel, create_engine
from sqlmodel.sql.expression import Select

from relay_engine.core.faults import (
    DatabaseBusy,
    DatabaseFault,
    StoredValueFault,
    explain,
    is_busy,
)
from relay_engine.store import feed, migrate
from relay_engine.store.feed import FeedMark
from relay_engine.store.schema import Command, Event
from relay_engine.store.storable import storable, storable_json
from relay_engine.store.wakes import WakeChannel

BUSY_TIMEOUT_MS = 5_000  # SQLite: how long a writer waits for another's lock, then "busy"
PG_LOCK_TIMEOUT_MS = 3_000  # PostgreSQL: the longest any statement waits for a lock
PG_IDLE_IN_TRANSACTION_MS = 5_000  # a paused engine's open transaction is ended by the server
PG_CONNECT_TIMEOUT_S = 5
PING_AFTER_IDLE_S = 1.0  # a pooled connection idle this long is checked before it is used


SchemaError = migrate.SchemaMismatch
DEFAULT_LEASE_S = 90.0  # how recent a heartbeat keeps an upgrade off (EngineConfig's default)


ColumnsSelect = Select[*tuple[Any, ...]]
"""A select of named columns (plain rows, not ORM objects)."""


def select_columns(*columns: Any) -> ColumnsSelect:
    """What ``sqlmodel.select(*columns)`` builds for two columns or more; sqlmodel types its
    ``select`` for at most four."""
    return Select(*columns)


def column_rows(
    session: Session, query: ColumnsSelect, params: dict[str, Any] | None = None
) -> Iterator[Any]:
    """The rows of a :func:`select_columns` query, read by column name (``row.key``):
    SQLAlchemy's ``Row`` attributes are untyped (its stubs see a plain tuple). ``params``
    bind a statement built once with bind parameters.

    Run on the session's connection, as Core: plain rows need nothing of the ORM's
    execution, whose setup cost a 16-row queue read a third more CPU (0.75 against 0.53
    ms on PostgreSQL). The session is flushed first, as the ORM would, so a read inside a
    write still sees the transaction's changes."""
    if session.autoflush:
        session.flush()
    return iter(session.connection().execute(query, params))


QUEUE_GREW = "relay.queue_grew"  # session.info: this transaction put tasks in the queue


def note_queue_grew(session: Session) -> None:
    """Say that this transaction puts tasks in the queue (or back in it): once it commits,
    this process's dispatch reads the queue again rather than the rows it kept from its
    last read (see :attr:`Store.queue_grew`)."""
    session.info[QUEUE_GREW] = True


KEYS_PER_STATEMENT = 500
"""Keys one ``IN`` list binds: SQLite takes at most 32,766 parameters a statement."""


def chunks(keys: Sequence[str], size: int = KEYS_PER_STATEMENT) -> Iterator[list[str]]:
    """Long key lists, sent a statement's worth at a time."""
    for start in range(0, len(keys), size):
        yield list(keys[start : start + size])


def table_of(model: type[SQLModel]) -> Table:
    """A model's table, for Core statements (SQLAlchemy sets it; sqlmodel's stubs do not
    say so)."""
    table: Table = model.__table__  # type: ignore[attr-defined]
    return table


def default_db_url(workspace: Path) -> str:
    return f"sqlite:///{(workspace / '.relay' / 'relay.db').resolve()}"


def database_url(workspace: Path, url: str | None = None) -> str:
    """The database a command uses: ``--db``, else ``RELAY_DB``, else the workspace's file."""
    return url or os.environ.get("RELAY_DB") or default_db_url(workspace)


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_connector(path: str, *, readonly: bool) -> Any:
    """How to connect: read-write, or read-only -- falling back to an immutable snapshot
    when even a read needs to write (WAL's shared-memory file in a read-only directory)."""

    def connect(target: str, uri: bool) -> sqlite3.Connection:
        return sqlite3.connect(
            target,
            uri=uri,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # we issue BEGIN ourselves
        )

    if not readonly:
        return lambda: connect(path, False)

    def connect_readonly() -> sqlite3.Connection:
        quoted = urllib.parse.quote(path)
        connection = connect(f"file:{quoted}?mode=ro", True)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            connection.close()
            connection = connect(f"file:{quoted}?immutable=1", True)
        return connection

    return connect_readonly


def _engine(url: str, **options: Any) -> SAEngine:
    """An engine whose every statement stores only what the database can hold: no NUL, no
    lone surrogate, in its parameters or its JSON (:mod:`relay_engine.store.storable`)."""
    engine = create_engine(
        url, json_serializer=storable_json, json_deserializer=_stored_json, **options
    )
    sa_event.listen(engine, "before_cursor_execute", _storable_parameters, retval=True)
    return engine


def _stored_json(text: str) -> Any:
    """A JSON column's value. SQLite keeps JSON as text and checks none of it: a value
    written there by hand that does not parse is named in one line, not a decoder's trace
    (PostgreSQL refuses such a write)."""
    try:
        return json.loads(text)
    except JSONDecodeError as error:
        shown = text if len(text) <= 40 else f"{text[:40]}…"
        raise StoredValueFault(
            f"the database holds a JSON value that does not parse, {shown!r} ({error.msg} at "
            f"character {error.pos}): correct or remove it"
        ) from None


def _storable_parameters(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
) -> tuple[str, Any]:
    return statement, storable(parameters)


def _sqlite_engine(path: str, *, immediate: bool, readonly: bool = False) -> SAEngine:
    """An engine on one SQLite file; ``readonly`` never writes (not even the journal mode)."""
    engine = _engine(
        "sqlite://", creator=_sqlite_connector(path, readonly=readonly), poolclass=QueuePool
    )

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not readonly:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _server_engine(url: str, *, readonly: bool) -> SAEngine:
    """PostgreSQL with every wait bounded: no lock, and no paused peer, can freeze the fleet.

    ``lock_timeout`` ends any wait for a lock; ``idle_in_transaction_session_timeout`` has
    the server end the transaction of a client that stopped talking mid-way (an engine
    paused with SIGSTOP), releasing whatever it held.
    """
    if not url.startswith("postgresql"):
        return _ping_when_idle(_engine(url))
    options = (
        f"-c lock_timeout={PG_LOCK_TIMEOUT_MS} "
        f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_MS}"
        + (" -c default_transaction_read_only=on" if readonly else "")
    )
    engine = _engine(
        url,
        pool_size=4,
        # No server-side prepared statements: psycopg forgets them at every ROLLBACK (each
        # read session ends with one) and sends a DEALLOCATE ALL, a round trip of its own.
        connect_args={
            "options": options,
            "connect_timeout": PG_CONNECT_TIMEOUT_S,
            "prepare_threshold": None,
        },
    )
    return _ping_when_idle(engine)


def _ping_when_idle(engine: SAEngine) -> SAEngine:
    """Check a pooled connection before use only when it sat idle for a while.

    ``pool_pre_ping`` pings on every checkout: a busy engine checks out a connection for
    nearly every statement, so it doubled the round trips to the server. A connection
    handed back moments ago is alive; one that sat idle may have lost its server (a restart)
    and is replaced before anyone sees the error. A connection that dies while in use fails
    that one transaction: the engine retries on its next tick, and SQLAlchemy retires every
    pooled connection older than the failure.
    """

    def _stamp(_dbapi: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    sa_event.listen(engine.pool, "connect", _stamp)  # a new connection is alive
    sa_event.listen(engine.pool, "checkin", _stamp)

    @sa_event.listens_for(engine.pool, "checkout")
    def _check(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("returned_at", 0.0) < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            raise DisconnectionError(f"pooled connection is dead: {error}") from error

    return engine


def sqlite_file_problem(path: Path) -> str | None:
    """What makes ``path`` unusable before SQLite even opens it: it is empty.

    Only ``stat`` is used: opening and closing the file here would drop every POSIX lock
    this process's SQLite connections hold on it (closing any descriptor of a file releases
    them all), and other processes would then checkpoint or delete the WAL under our feet.
    Everything else (not a database, corrupted) SQLite reports itself; see :mod:`faults`.
    """
    try:
        size = path.stat().st_size
    except OSError as error:
        return f"cannot read {path}: {error.strerror}"
    if size == 0:
        return (
            f"{path} is an empty file (0 bytes), not a relay database: `relay init` makes a "
            "new database there, or point --db at your database"
        )
    return None


_SELECTED = re.compile(r"^SELECT (?:(?!\bFROM\b).)+ FROM ")


class StoreStats:
    """What one process asked of its database: statements sent (counted as the driver gets
    them, so a bench reads the engine's own count rather than wrapping it from outside),
    which statements they were, and how long each claim transaction held its locks (from
    the moment it owned them to the end of its commit, measured in the claim itself)."""

    HOLDS_KEPT = 100_000
    TOP_KEPT = 40

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.statements = 0
        self.claim_holds_ms: list[float] = []
        # SQLAlchemy reuses one compiled string per statement: counting by it is a dict hit.
        self._by_text: Counter[str] = Counter()

    def count(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        with self._lock:
            self.statements += 1
            self._by_text[statement] += 1

    def note_claim(self, hold_ms: float) -> None:
        with self._lock:
            if len(self.claim_holds_ms) < self.HOLDS_KEPT:
                self.claim_holds_ms.append(hold_ms)

    def top_statements(self) -> list[tuple[str, int]]:
        """The most sent statements, whitespace folded and a SELECT's columns left out, so
        what tells them apart (tables, WHERE) shows in a line."""
        with self._lock:
            folded: Counter[str] = Counter()
            for text, times in self._by_text.items():
                line = _SELECTED.sub("SELECT … FROM ", " ".join(text.split()), count=1)
                folded[line[:200]] += times
        return folded.most_common(self.TOP_KEPT)

    def as_dict(self) -> dict[str, Any]:
        top = self.top_statements()
        with self._lock:
            holds = list(self.claim_holds_ms)
            return {"statements": self.statements, "claim_holds_ms": holds, "top": top}


class Store:
    """One database, shared by every engine and console of a workspace (or a fleet).

    ``readonly`` stores (``relay status``, ``relay events``, an attached console) never
    write, not even the schema row, so they work on a read-only workspace and never wait
    on a writer. A database relay cannot use raises :class:`DatabaseFault` with one line
    saying why and what to do; the file is left exactly as it was.
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        readonly: bool = False,
        create_empty: bool = False,
        auto_migrate: bool | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        self.url = _normalise_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.readonly = readonly
        # One workspace has one relay on SQLite; on PostgreSQL an older engine may still run.
        self.auto_migrate = self.is_sqlite if auto_migrate is None else auto_migrate
        self.lease_s = lease_s
        self.stats = StoreStats()
        self.wakes = WakeChannel.of(self.url, self.sqlite_path)
        self.wakes_engines = False  # every write wakes the engines: set where none runs
        self.queue_grew = 0  # this process's committed writes that put tasks in the queue
        try:
            self._open(create=create, create_empty=create_empty)
        except (SQLAlchemyError, ImportError, sqlite3.Error, ValueError) as error:
            fault = DatabaseBusy if is_busy(error) else DatabaseFault
            raise fault(explain(error, self.where, self.url.split(":", 1)[0])) from error
        for engine in self._engines():
            sa_event.listen(engine, "before_cursor_execute", self.stats.count)

    @property
    def where(self) -> str:
        return location(self.url)

    @property
    def sqlite_path(self) -> str | None:
        return _sqlite_path(self.url)

    def _open(self, *, create: bool, create_empty: bool) -> None:
        path = self.sqlite_path
        if path is not None:
            self._prepare_sqlite_file(Path(path), create_empty=create_empty)
            if not _writable(Path(path)):
                self.readonly = True  # a read-only workspace can still be looked at
            self._writer = _sqlite_engine(path, immediate=True, readonly=self.readonly)
            self._reader = _sqlite_engine(path, immediate=False, readonly=self.readonly)
        elif self.is_sqlite:
            self._writer = self._reader = _engine(self.url)
        else:
            self._writer = _server_engine(self.url, readonly=self.readonly)
            # Reads in autocommit: no BEGIN and no ROLLBACK around them, two round trips of
            # three for the engine's one-statement reads. Nothing is lost: at READ COMMITTED
            # each statement of a transaction took its own snapshot anyway.
            self._reader = self._writer.execution_options(isolation_level="AUTOCOMMIT")
        if self.readonly:
            self._check_version()
        elif create:
            self.ensure_schema()

    def _prepare_sqlite_file(self, path: Path, *, create_empty: bool) -> None:
        """Refuse an unusable file; create a missing one whole (never a 0-byte file)."""
        if path.exists() and create_empty and path.stat().st_size == 0:
            path.unlink()
        if not path.exists():
            try:
                _create_sqlite_file(path)
            except OSError as error:
                if not self.readonly:
                    raise DatabaseFault(f"cannot create {path}: {error.strerror}") from None
                raise DatabaseFault(
                    f"no relay database at {path}: nothing was submitted here"
                ) from None
            return
        problem = sqlite_file_problem(path)
        if problem is not None:
            raise DatabaseFault(problem)

    @classmethod
    def for_workspace(
        cls,
        workspace: Path,
        url: str | None = None,
        *,
        readonly: bool = False,
        create: bool = True,
        auto_migrate: bool | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Store:
        return cls(
            database_url(workspace, url),
            readonly=readonly,
            create=create,
            auto_migrate=auto_migrate,
            lease_s=lease_s,
        )

    def ensure_schema(self) -> None:
        """Create a new database, upgrade an older one when allowed, refuse the rest."""
        migrate.prepare(
            self._writer,
            where=self.display_url(),
            auto_migrate=self.auto_migrate,
            lease_s=self.lease_s,
        )

    def _check_version(self) -> None:
        with self._reader.connect() as connection:
            migrate.check(connection, where=self.where)

    def schema_state(self) -> migrate.SchemaState:
        with self._reader.connect() as connection:
            return migrate.schema_state(connection)

    def upgrade(self) -> tuple[migrate.SchemaState, migrate.SchemaState]:
        """``relay db upgrade``: (before, after)."""
        return migrate.upgrade(self._writer, where=self.display_url(), lease_s=self.lease_s)

    def display_url(self) -> str:
        """The URL without its password, for messages."""
        head, sep, tail = self.url.partition("@")
        if not sep or ":" not in head.split("//", 1)[-1]:
            return self.url
        scheme, creds = head.split("//", 1)
        return f"{scheme}//{creds.split(':', 1)[0]}:***@{tail}"

    @contextmanager
    def write(self, *, wakes: bool = False) -> Iterator[Session]:
        """A short write transaction: committed on exit, rolled back on error.

        ``wakes``: it makes work for the fleet (a submit, an applied command), so every
        engine is told to look now (:mod:`~relay_engine.store.wakes`), as it is for every
        write of a store that :attr:`wakes_engines` (one where no engine runs)."""
        wakes = wakes or self.wakes_engines
        with Session(self._writer, expire_on_commit=False) as session:
            session.begin()
            try:
                yield session
                if wakes:
                    self.wakes.send(session)
            except BaseException:
                session.rollback()
                raise
            session.commit()
            if session.info.get(QUEUE_GREW):
                self.queue_grew += 1
        if wakes:
            self.wakes.sent()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self._reader, expire_on_commit=False) as session:
            yield session

    def _engines(self) -> list[SAEngine]:
        """The engines with pools of their own: PostgreSQL's reader shares the writer's
        (and its event listeners)."""
        return (
            [self._writer]
            if self._reader.pool is self._writer.pool
            else [self._writer, self._reader]
        )

    def dispose(self) -> None:
        for engine in self._engines():
            engine.dispose()

    def enqueue_command(
        self, kind: str, payload: dict[str, Any], *, now: float | None = None
    ) -> int:
        """Store an operator command for whichever engine applies it first."""
        with self.write(wakes=True) as session:
            command = Command(kind=kind, payload=payload, created_at=now or time.time())
            session.add(command)
            session.flush()
            assert command.id is not None
            return command.id

    def events_after(self, mark: FeedMark, limit: int = feed.PAGE) -> tuple[list[Event], FeedMark]:
        """The change feed after ``mark`` (:mod:`relay_engine.store.feed`: no event skipped)."""
        with self.read() as session:
            return feed.read_after(session, mark, time.time(), limit)


def _sqlite_path(url: str) -> str | None:
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1] if "///" in url else ""
    return path if path and path != ":memory:" else None


def missing_database(url: str) -> str | None:
    """Why ``--db URL`` is refused, when it names a SQLite file that is not there: opening
    it would make an empty new database, and a typo would look like a workspace where
    nothing was ever submitted. The same sentence from ``relay`` and ``relay-tui``."""
    path = _sqlite_path(url)
    if path is None or path.startswith("file:") or Path(path).exists():
        return None
    return (
        f"--db {url}: no database file at {path} (a typo would otherwise open an empty "
        "new database; pass --create to make one)"
    )


def location(url: str) -> str:
    """Where a database is, for messages: the file, or the server's host, port and database
    (never the password)."""
    path = _sqlite_path(url)
    if path or url.startswith("sqlite"):
        return path or url
    try:
        parsed = make_url(_normalise_url(url))
    except ArgumentError:
        return url.rsplit("@", maxsplit=1)[-1]
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"


def _writable(path: Path) -> bool:
    """Whether relay may write this database: the file, and its directory for the WAL."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _create_sqlite_file(path: Path) -> None:
    """A new database appears whole or not at all: built under a temporary name, then linked
    into place, so no reader ever mistakes a half-made file for a database (and a 0-byte
    ``relay.db`` is never relay's own doing). If another process links first, its file wins.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    engine = create_engine(f"sqlite:///{tmp}")
    try:
        with engine.begin() as connection:
            migrate.create_schema(connection)
        engine.dispose()
        with suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        engine.dispose()
        tmp.unlink(missing_ok=True)


def ensure_row(session: Session, model: type[SQLModel], **values: Any) -> None:
    """Insert this row unless its primary key exists; safe against a concurrent engine.

    Two engines creating the same row at once (a provider's limit, an agent's record, the
    schema row) would otherwise collide on the primary key on PostgreSQL, where writers are
    not serialised as they are on SQLite.
    """
    table = table_of(model)
    keys = [column.name for column in table.primary_key]
    dialect = session.get_bind().dialect.name
    statement: Insert  # each dialect's insert has its own on_conflict_do_nothing
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement = pg_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        statement = (
            sqlite_insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
        )
    else:  # other databases: best effort
        if session.get(model, tuple(values[k] for k in keys)) is None:
            session.add(model(**values))
            session.flush()
        return
    session.execute(statement)

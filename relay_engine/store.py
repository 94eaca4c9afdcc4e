"""Database access: engine setup, units of work, schema versioning and the event feed.

SQLite is the default (one file per workspace); any SQLAlchemy URL works, and
PostgreSQL is how several hosts share one fleet. Writes on SQLite start with
``BEGIN IMMEDIATE`` so two engines on one file serialise at the start of a write
instead of failing half way through with "database is locked".
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy.engine import Engine as SAEngine
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlmodel import Session, SQLModel, create_engine, select

from relay_engine.model import SCHEMA_VERSION, Command, Event, SchemaInfo

BUSY_TIMEOUT_MS = 30_000


class SchemaError(RuntimeError):
    """The database was written by a different (newer) relay."""


def default_db_url(workspace: Path) -> str:
    return f"sqlite:///{(workspace / '.relay' / 'relay.db').resolve()}"


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_engine(url: str, *, immediate: bool) -> SAEngine:
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}
    )

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class Store:
    """One database, shared by every engine and console of a workspace (or a fleet)."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = _normalise_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        if self.is_sqlite:
            path = self.url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._writer = _sqlite_engine(self.url, immediate=True)
            self._reader = _sqlite_engine(self.url, immediate=False)
        else:
            self._writer = create_engine(self.url, pool_pre_ping=True, pool_size=4)
            self._reader = self._writer
        if create:
            self.ensure_schema()

    @classmethod
    def for_workspace(cls, workspace: Path, url: str | None = None) -> Store:
        return cls(url or os.environ.get("RELAY_DB") or default_db_url(workspace))

    def ensure_schema(self) -> None:
        """Create missing tables; refuse a database written by a newer schema."""
        self._create_tables()
        with self.write() as session:
            ensure_row(session, SchemaInfo, id=1, version=SCHEMA_VERSION)
            info = session.get(SchemaInfo, 1)
            if info is not None and info.version > SCHEMA_VERSION:
                raise SchemaError(
                    f"{self.display_url()}: schema version {info.version} was written by a newer "
                    f"relay (this one understands up to {SCHEMA_VERSION}); upgrade relay"
                )

    def _create_tables(self) -> None:
        """Create missing tables; a concurrent engine creating them at once is not an error."""
        try:
            SQLModel.metadata.create_all(self._writer)
        except (IntegrityError, ProgrammingError):
            SQLModel.metadata.create_all(self._writer)  # the other engine won; check again

    def display_url(self) -> str:
        """The URL without its password, for messages."""
        head, sep, tail = self.url.partition("@")
        if not sep or ":" not in head.split("//", 1)[-1]:
            return self.url
        scheme, creds = head.split("//", 1)
        return f"{scheme}//{creds.split(':', 1)[0]}:***@{tail}"

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A short write transaction: committed on exit, rolled back on error."""
        with Session(self._writer, expire_on_commit=False) as session:
            session.begin()
            try:
                yield session
            except BaseException:
                session.rollback()
                raise
            session.commit()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self._reader, expire_on_commit=False) as session:
            yield session

    def dispose(self) -> None:
        self._writer.dispose()
        if self._reader is not self._writer:
            self._reader.dispose()

    def enqueue_command(
        self, kind: str, payload: dict[str, Any], *, now: float | None = None
    ) -> int:
        """Store an operator command for whichever engine applies it first."""
        with self.write() as session:
            command = Command(kind=kind, payload=payload, created_at=now or time.time())
            session.add(command)
            session.flush()
            assert command.id is not None
            return command.id

    def events_after(self, last_id: int, limit: int = 1000) -> list[Event]:
        with self.read() as session:
            query = select(Event).where(Event.id > last_id).order_by(Event.id).limit(limit)  # type: ignore[operator,arg-type]
            return list(session.exec(query))


def record_event(
    session: Session,
    kind: str,
    message: str,
    *,
    now: float,
    job_id: str | None = None,
    task_key: str | None = None,
    plan_id: int | None = None,
    level: str = "info",
    data: dict[str, Any] | None = None,
) -> Event:
    """Append to the change feed inside the caller's transaction."""
    event = Event(
        at=now,
        job_id=job_id,
        task_key=task_key,
        plan_id=plan_id,
        kind=kind,
        level=level,
        message=message,
        data=data,
    )
    session.add(event)
    return event


def ensure_row(session: Session, model: type[SQLModel], **values: Any) -> None:
    """Insert this row unless its primary key exists; safe against a concurrent engine.

    Two engines creating the same row at once (a provider's limit, an agent's record, the
    schema row) would otherwise collide on the primary key on PostgreSQL, where writers are
    not serialised as they are on SQLite.
    """
    table = model.__table__  # type: ignore[attr-defined]
    keys = [column.name for column in table.primary_key]
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:  # other databases: best effort
        if session.get(model, tuple(values[k] for k in keys)) is None:
            session.add(model(**values))
            session.flush()
        return
    session.execute(insert(table).values(**values).on_conflict_do_nothing(index_elements=keys))

"""Plain-row writes: one statement per batch, its SQL written once per shape.

Every claim and every exit writes rows the session holds no objects for (a claim's tasks,
executions and ``task.started`` events; an exit's execution rows). Sent as Core
statements, SQLAlchemy builds each statement, derives its cache key and looks it up at
every call, and on PostgreSQL an UPDATE of N rows goes out as N statements in a pipeline
(an INSERT as one statement of N·columns parameters, which psycopg parses again at each
call): together most of a claim's CPU once it knows its rows. Here the SQL of a table
and set of columns is written once per dialect and handed to the driver with
``exec_driver_sql``, so SQLAlchemy still counts the statement
(:class:`~relay_engine.store.db.StoreStats`), still raises a driver error as its own
exception and still notices a dropped connection. Values go through their columns' bind
processors (JSON to text, …), so a row reads back exactly as if the ORM had written it.

- PostgreSQL: one statement for the whole batch, a value list per column
  (``… FROM unnest(%s::FLOAT[], …)``), so its text and number of parameters do not grow
  with the batch and psycopg parses it once.
- SQLite: one row's statement, which sqlite3's ``executemany`` runs for each row in C.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Column, Table
from sqlalchemy.engine import Dialect
from sqlmodel import Session, SQLModel

from relay_engine.store.db import table_of

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Shape:
    """One statement's SQL, and how a batch of rows becomes its parameters."""

    sql: str
    pairs: tuple[tuple[str, Processor], ...]  # each column and its processor, in SQL order
    by_column: bool  # one list of values per column (unnest), else one tuple per row

    def parameters(self, rows: Sequence[dict[str, Any]]) -> Any:
        pairs = self.pairs
        if self.by_column:
            return tuple(
                [row[name] for row in rows]
                if process is None
                else [process(row[name]) for row in rows]
                for name, process in pairs
            )
        # An 8-slot engine on SQLite sends every value of every claim and exit through here.
        return [tuple([row[n] if p is None else p(row[n]) for n, p in pairs]) for row in rows]


def insert_rows(session: Session, model: type[SQLModel], rows: list[dict[str, Any]]) -> None:
    """INSERT these rows: columns they leave out take their defaults, no keys are returned,
    and nothing is sent for no rows."""
    table = table_of(model)
    for group in _same_columns(_with_defaults(table, rows)):
        _send(session, _insert_shape, table, tuple(sorted(group[0])), group)


def update_by_id(
    session: Session, model: type[SQLModel], rows: list[dict[str, Any]], *, key: str = "id"
) -> None:
    """UPDATE each row (its primary ``key`` and new values), one statement per set of
    columns. The session's objects of these rows are not touched: use this only where the
    session holds none of them, or holds them with these values already committed (as a
    claim does with ``set_committed_value``)."""
    table = table_of(model)
    for group in _same_columns(rows):
        columns = (*sorted(name for name in group[0] if name != key), key)
        _send(session, _update_shape, table, columns, group)


def _send(
    session: Session,
    shape_of: Callable[[Table, tuple[str, ...], Dialect], _Shape],
    table: Table,
    columns: tuple[str, ...],
    rows: list[dict[str, Any]],
) -> None:
    connection = session.connection()
    shape = shape_of(table, columns, connection.dialect)
    connection.exec_driver_sql(shape.sql, shape.parameters(rows))


@lru_cache(maxsize=256)
def _insert_shape(table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    names = ", ".join(_quoted(dialect, name) for name in columns)
    if _by_column(dialect):
        given = f"SELECT * FROM {_unnest(table, columns, dialect)}"
    else:
        given = f"VALUES ({', '.join('?' for _ in columns)})"
    sql = f"INSERT INTO {_quoted(dialect, table.name)} ({names}) {given}"
    return _shape(sql, table, columns, dialect)


@lru_cache(maxsize=256)
def _update_shape(table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    """``columns``: the changed ones, then the key."""
    *changed, key = (_quoted(dialect, name) for name in columns)
    target = _quoted(dialect, table.name)
    if _by_column(dialect):
        sets = ", ".join(f"{name} = given.{name}" for name in changed)
        given = f"{_unnest(table, columns, dialect)} AS given({', '.join((*changed, key))})"
        sql = f"UPDATE {target} SET {sets} FROM {given} WHERE {target}.{key} = given.{key}"
    else:
        sets = ", ".join(f"{name} = ?" for name in changed)
        sql = f"UPDATE {target} SET {sets} WHERE {key} = ?"
    return _shape(sql, table, columns, dialect)


def _by_column(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


def _unnest(table: Table, columns: Iterable[str], dialect: Dialect) -> str:
    """One array parameter per column, cast to the column's type: a column NULL in every
    row would otherwise reach the server as text."""
    arrays = (f"CAST(%s AS {table.c[name].type.compile(dialect=dialect)}[])" for name in columns)
    return f"unnest({', '.join(arrays)})"


def _shape(sql: str, table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    pairs = tuple((name, _processor(table.c[name], dialect)) for name in columns)
    return _Shape(sql, pairs, by_column=_by_column(dialect))


def _quoted(dialect: Dialect, name: str) -> str:
    return dialect.identifier_preparer.quote(name)


def _processor(target: Column[Any], dialect: Dialect) -> Processor:
    """What SQLAlchemy would do to a value of this column before the driver sees it."""
    return target.type.dialect_impl(dialect).bind_processor(dialect)


def _with_defaults(table: Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with the Python-side defaults of the columns it leaves out, as the ORM and
    Core fill them in."""
    defaulted = _defaulted(table)
    return [
        row | {c.name: _default_value(c) for c in defaulted if c.name not in row} for row in rows
    ]


@lru_cache(maxsize=64)
def _defaulted(table: Table) -> tuple[Column[Any], ...]:
    """The columns with a Python-side default: looked for once per table, not per insert."""
    return tuple(c for c in table.columns if c.default is not None)


def _default_value(target: Column[Any]) -> Any:
    default: Any = target.default  # a ColumnDefault: its stubs do not give it ``arg``
    if default.is_callable:
        return default.arg(None)  # SQLAlchemy wraps the callable to take an execution context
    if default.is_scalar:
        return default.arg
    raise TypeError(f"{target.table.name}.{target.name}: a SQL default is not written here")


def _same_columns(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    return list(groups.values())

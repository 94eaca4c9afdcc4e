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

- PostgreSQL: one statement for the whole batch, its rows one JSON parameter
  (``… FROM json_to_recordset(%s) AS given(started_at FLOAT, …)``), so its text and number
  of parameters do not grow with the batch and psycopg parses it once. A value list per
  column (``unnest(%s::FLOAT[], …)``) did the same, but psycopg looks at every element of
  every list to type it: a two-task claim or exit spent more CPU adapting its arrays than
  ``json.dumps`` spends on the whole batch.
- SQLite: one row's statement, which sqlite3's ``executemany`` runs for each row in C.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, Column, Null, Table, inspect
from sqlalchemy.engine import Dialect
from sqlmodel import Session, SQLModel

from relay_engine.store.db import table_of
from relay_engine.store.storable import storable_json

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Shape:
    """One statement's SQL, and how a batch of rows becomes its parameters."""

    sql: str
    pairs: tuple[tuple[str, Processor], ...]  # each column and its processor, in SQL order
    as_json: bool  # the rows as one JSON parameter (PostgreSQL), else one tuple per row

    def parameters(self, rows: Sequence[dict[str, Any]]) -> Any:
        pairs = self.pairs
        if self.as_json:
            given = [{n: row[n] if p is None else p(row[n]) for n, p in pairs} for row in rows]
            return (storable_json(given, separators=(",", ":")),)  # it writes no NaN itself
        # An 8-slot engine on SQLite sends every value of every claim and exit through here.
        return [tuple([row[n] if p is None else p(row[n]) for n, p in pairs]) for row in rows]


@dataclass(frozen=True)
class Rows:
    """One table's rows for :func:`write_rows`: inserted, or updated by their primary key
    (each row gives it)."""

    model: type[SQLModel]
    rows: list[dict[str, Any]]
    update: bool = False


def insert_rows(session: Session, model: type[SQLModel], rows: list[dict[str, Any]]) -> None:
    """INSERT these rows: columns they leave out take their defaults, no keys are returned,
    and nothing is sent for no rows."""
    write_rows(session, Rows(model, rows))


def update_by_id(session: Session, model: type[SQLModel], rows: list[dict[str, Any]]) -> None:
    """UPDATE each row (its primary key and new values; each row once), one statement
    per set of columns (together on PostgreSQL, see :func:`write_rows`). The session's
    objects of these rows are not touched: use this only where the session holds none of
    them, or holds them with these values already committed (as a claim does with
    ``set_committed_value``)."""
    write_rows(session, Rows(model, rows, update=True))


def changed_rows(session: Session, model: type[SQLModel]) -> Rows:
    """What the session's ``model`` objects changed since they were read or flushed, as an
    update to send with other writes (:func:`write_rows`); the objects then leave the
    session, which would otherwise write them again. For the exit write: the unit of work's
    flush of two tasks cost it more CPU than the UPDATE it sent. Use it where the objects
    are not needed again in the transaction: a later ``get`` reads them anew."""
    key, rows = _primary_key(table_of(model)), []
    for obj in [o for o in session.dirty if isinstance(o, model)]:
        state = inspect(obj)
        # Only what was set since the read can have changed (as the flush itself looks):
        # asking every one of a task's 51 columns for its history cost more than the write.
        attrs = [state.attrs[name] for name in state.committed_state]
        changes = {a.key: a.value for a in attrs if a.history.has_changes()}
        if changes:
            rows.append(changes | {key: getattr(obj, key)})
        session.expunge(obj)
    return Rows(model, rows, update=True)


def write_rows(session: Session, *writes: Rows) -> None:
    """These writes, in this order. On PostgreSQL they go out as one statement, each write
    but the last a data-modifying ``WITH`` query of it: a claim's tasks, events and
    executions, sent one by one, cost two more round trips and two more passes through
    SQLAlchemy's execution (together about 0.4 ms of a two-task claim's CPU). They must not
    depend on each other's rows (in one statement, none sees another's changes); foreign
    keys and unique indexes are still checked. On SQLite, one ``executemany`` each."""
    connection = session.connection()
    dialect = connection.dialect
    parts = [part for write in writes for part in _shaped(write, dialect)]
    if not parts:
        return
    if not _as_json(dialect):
        for shape, group in parts:
            connection.exec_driver_sql(shape.sql, shape.parameters(group))
        return
    sql = _together(tuple(shape.sql for shape, _ in parts))
    parameters = tuple(value for shape, group in parts for value in shape.parameters(group))
    connection.exec_driver_sql(sql, parameters)


def _shaped(write: Rows, dialect: Dialect) -> Iterator[tuple[_Shape, list[dict[str, Any]]]]:
    """A write's statements: one per set of columns its rows give."""
    table = table_of(write.model)
    if not write.update:
        for group in _same_columns(_with_defaults(table, write.rows)):
            yield _insert_shape(table, tuple(sorted(group[0])), dialect), group
        return
    key = _primary_key(table)
    for group in _same_columns(write.rows):
        columns = (*sorted(name for name in group[0] if name != key), key)
        yield _update_shape(table, columns, dialect), group


def _primary_key(table: Table) -> str:
    (column,) = table.primary_key.columns  # every relay table has a one-column key
    return str(column.name)


@lru_cache(maxsize=256)
def _together(statements: tuple[str, ...]) -> str:
    """PostgreSQL statements as one: all but the last as ``WITH`` queries of the last."""
    *first, last = statements
    if not first:
        return last
    queries = ", ".join(f"w{i} AS ({sql})" for i, sql in enumerate(first))
    return f"WITH {queries} {last}"


@lru_cache(maxsize=256)
def _insert_shape(table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    names = ", ".join(_quoted(dialect, name) for name in columns)
    if _as_json(dialect):
        values = ", ".join(_given(table, name, dialect) for name in columns)
        given = f"SELECT {values} FROM {_recordset(table, columns, dialect)}"
    else:
        given = f"VALUES ({', '.join('?' for _ in columns)})"
    sql = f"INSERT INTO {_quoted(dialect, table.name)} ({names}) {given}"
    return _shape(sql, table, columns, dialect)


@lru_cache(maxsize=256)
def _update_shape(table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    """``columns``: the changed ones, then the key."""
    *changed, key = columns
    target, quoted_key = _quoted(dialect, table.name), _quoted(dialect, key)
    if _as_json(dialect):
        sets = ", ".join(f"{_quoted(dialect, n)} = {_given(table, n, dialect)}" for n in changed)
        given = _recordset(table, columns, dialect)
        sql = (
            f"UPDATE {target} SET {sets} FROM {given} "
            f"WHERE {target}.{quoted_key} = given.{quoted_key}"
        )
    else:
        sets = ", ".join(f"{_quoted(dialect, n)} = ?" for n in changed)
        sql = f"UPDATE {target} SET {sets} WHERE {quoted_key} = ?"
    return _shape(sql, table, columns, dialect)


def _as_json(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


def _recordset(table: Table, columns: Iterable[str], dialect: Dialect) -> str:
    """The JSON parameter as a table named ``given``, each column typed as its target (a
    JSON column's value arrives as the text its bind processor made, cast in
    :func:`_given`)."""
    typed = ", ".join(
        f"{_quoted(dialect, name)} {_carried(table, name, dialect)}" for name in columns
    )
    return f"json_to_recordset(%s) AS given({typed})"


def _given(table: Table, name: str, dialect: Dialect) -> str:
    """``given``'s value for a column, as the column's own type."""
    value = f"given.{_quoted(dialect, name)}"
    carried, target = _carried(table, name, dialect), _type_name(table, name, dialect)
    return value if carried == target else f"CAST({value} AS {target})"


def _carried(table: Table, name: str, dialect: Dialect) -> str:
    """The type a column's values have in the JSON parameter: their own, but text for
    those the bind processor already serialised (JSON)."""
    target = _type_name(table, name, dialect)
    return "TEXT" if isinstance(table.c[name].type, JSON) else target


def _type_name(table: Table, name: str, dialect: Dialect) -> str:
    return table.c[name].type.compile(dialect=dialect)


def _shape(sql: str, table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Shape:
    pairs = tuple((name, _processor(table.c[name], dialect)) for name in columns)
    return _Shape(sql, pairs, as_json=_as_json(dialect))


def _quoted(dialect: Dialect, name: str) -> str:
    return dialect.identifier_preparer.quote(name)


def _processor(target: Column[Any], dialect: Dialect) -> Processor:
    """What SQLAlchemy would do to a value of this column before the driver sees it; for a
    JSON column carried in a JSON parameter, the text the ORM's value becomes (psycopg's
    own processor wraps it for the driver to serialise instead)."""
    if _as_json(dialect) and isinstance(target.type, JSON):
        return _json_text
    return target.type.dialect_impl(dialect).bind_processor(dialect)


def _json_text(value: Any) -> str | None:
    """A JSON column's value as SQLAlchemy binds it (``none_as_null`` off): None is JSON
    ``null``, only an explicit SQL ``null()`` is NULL."""
    if isinstance(value, Null):
        return None
    return storable_json(None if value is JSON.NULL else value)


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

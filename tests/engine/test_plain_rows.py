"""Plain-row writes (claims, exits, events) against the ORM's: same rows, fewer statements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import Workspace, job_toml
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from relay_engine.contracts.job_file import parse_job_text
from relay_engine.core.states import TaskState
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store, table_of
from relay_engine.store.plain_rows import (
    Rows,
    changed_rows,
    insert_rows,
    update_by_id,
    write_rows,
)
from relay_engine.store.schema import Event, Execution, Job, Task
from relay_engine.store.task_rows import add_tasks

ODD_TEXT = 'it\'s 100% "quoted"; -- not a comment ☃'


def _columns(store: Store, model: type[Any], where: Any, skip: str) -> list[dict[str, Any]]:
    """Every column of the rows ``where`` picks, as a read gives them, less the one that
    tells twins apart."""
    names = [c.name for c in table_of(model).columns if c.name != skip]
    with store.read() as session:
        rows = session.exec(select(model).where(where)).all()
        return sorted(({n: getattr(r, n) for n in names} for r in rows), key=repr)


def _counted(store: Store, write: Any) -> int:
    before = store.stats.statements
    with store.write() as session:
        write(session)
    return store.stats.statements - before - (1 if store.is_sqlite else 0)  # BEGIN IMMEDIATE


def test_inserted_rows_read_back_as_the_orm_writes_them(workspace: Workspace) -> None:
    """Defaults filled in (argv, denials, cost_estimated, attempt), JSON, booleans, text
    that needs quoting, and a float column NULL in every row (PostgreSQL would type it as
    text without a cast): one statement for the lot."""
    store = workspace.store()
    given = [
        {"job_id": "plain", "task_key": f"plain/t{i}", "started_at": 1.5 + i,
         "agent": ODD_TEXT, "ended_at": None, "argv": ["a", {"b": i}]}
        for i in range(3)
    ]  # fmt: skip
    given[1] = {k: v for k, v in given[1].items() if k != "argv"}  # left to its default
    assert _counted(store, lambda s: insert_rows(s, Execution, [r | {"id": f"p{i}"} for i, r in enumerate(given)])) == 1  # fmt: skip
    with store.write() as session:
        for i, row in enumerate(given):
            session.add(Execution(id=f"o{i}", **(row | {"job_id": "orm"})))
    plain = _columns(store, Execution, col(Execution.job_id) == "plain", skip="id")
    orm = _columns(store, Execution, col(Execution.job_id) == "orm", skip="id")
    assert [r | {"job_id": "orm"} for r in plain] == orm
    assert {r["cost_estimated"] for r in plain} == {False} and [] in [r["argv"] for r in plain]


def test_updated_rows_read_back_as_the_orm_writes_them(workspace: Workspace) -> None:
    """A claim's values on three tasks (one of them with a column set of its own), in one
    statement per set on SQLite and one in all on PostgreSQL, equal the same values set on twin tasks through the ORM; the rows
    left out are untouched."""
    store = workspace.store()
    with store.write() as session:
        for prefix in ("plain", "orm"):
            for i in range(4):
                session.add(Task(key=f"{prefix}/t{i}", job_id=prefix, task_id=f"t{i}",
                                 state=TaskState.QUEUED, lease_expires_at=9.0))  # fmt: skip
    values = [
        {"state": TaskState.RUNNING, "attempt": 1, "execution_id": f"e{i}",
         "execution_history": [f"e{i}", ODD_TEXT], "lease_expires_at": None,
         "keep_work": True, "lock_dir": None, "updated_at": 2.0 + i}
        for i in range(3)
    ]  # fmt: skip
    values[2] = {"state": TaskState.FAILED, "error": ODD_TEXT, "lease_expires_at": None}
    rows = [{"key": f"plain/t{i}", **v} for i, v in enumerate(values)]
    sets = _counted(store, lambda s: update_by_id(s, Task, rows))
    assert sets == (2 if store.is_sqlite else 1)
    with store.write() as session:
        for i, changes in enumerate(values):
            task = session.get(Task, f"orm/t{i}")
            assert task is not None
            for name, value in changes.items():
                setattr(task, name, value)
    strip = ("key", "job_id")
    plain = _columns(store, Task, col(Task.job_id) == "plain", skip="key")
    orm = _columns(store, Task, col(Task.job_id) == "orm", skip="key")
    assert [{k: v for k, v in r.items() if k not in strip} for r in plain] == [
        {k: v for k, v in r.items() if k not in strip} for r in orm
    ]
    assert [r["state"] for r in plain].count("QUEUED") == 1  # t3 was not in the rows


def test_a_batch_of_any_length_is_one_statement(workspace: Workspace) -> None:
    """On PostgreSQL one statement whose text does not grow with the rows (a value list per
    column), on SQLite one executemany: 450 rows or 2, a claim or an exit writes each table
    once."""
    store = workspace.store()
    count = 450
    rows = [{"id": f"b{i}", "job_id": "many", "task_key": f"many/t{i}"} for i in range(count)]
    assert _counted(store, lambda s: insert_rows(s, Execution, rows)) == 1
    ended = [{"id": f"b{i}", "ended_at": float(i)} for i in range(count)]
    assert _counted(store, lambda s: update_by_id(s, Execution, ended)) == 1
    with store.read() as session:
        got = session.exec(select(Execution.ended_at).where(Execution.job_id == "many")).all()
    assert sorted(got) == [float(i) for i in range(count)]


def test_a_refused_write_raises_as_any_statement_and_writes_nothing(workspace: Workspace) -> None:
    """The engine tells a conflict from a fault by SQLAlchemy's exceptions: a row the
    database refuses raises one, and the transaction writes none of its rows."""
    store = workspace.store()
    with store.write() as session:
        insert_rows(session, Execution, [{"id": "dup", "job_id": "j", "task_key": "j/a"}])
    with pytest.raises(IntegrityError), store.write() as session:
        rows = [{"id": "new", "job_id": "j", "task_key": "j/b"}, {"id": "dup", "job_id": "j", "task_key": "j/c"}]  # fmt: skip
        insert_rows(session, Execution, rows)
    with store.read() as session:
        assert session.get(Execution, "new") is None


def test_a_json_value_of_none_is_stored_as_the_orm_stores_it(workspace: Workspace) -> None:
    """None in a JSON column is JSON ``null`` whichever way the row was written, so a
    query for SQL NULL finds plain and ORM rows alike; a document with quotes, unicode
    and nesting comes back whole."""
    store = workspace.store()
    document = {"text": ODD_TEXT, "nested": [1, 2.5, {"deep": None}], "yes": True}
    with store.write() as session:
        rows = [{"kind": "plain", "message": "m", "data": data} for data in (None, document)]
        insert_rows(session, Event, rows)
        for data in (None, document):
            session.add(Event(kind="orm", message="m", data=data))
    with store.read() as session:
        for kind in ("plain", "orm"):
            of_kind = select(Event).where(Event.kind == kind)
            sql_null = of_kind.where(col(Event.data).is_(None))
            assert len(session.exec(sql_null).all()) == 0
            assert sorted((e.data for e in session.exec(of_kind)), key=repr) == [None, document]


def test_writes_sent_together_are_one_statement_on_postgresql(workspace: Workspace) -> None:
    """A claim's three writes (its tasks, their events, their executions) reach PostgreSQL
    as one statement and SQLite as three; every row lands, and when the database refuses
    one of them, none does."""
    store = workspace.store()
    with store.write() as session:
        session.add(Task(key="w/t0", job_id="w", task_id="t0", state=TaskState.QUEUED))
        insert_rows(session, Execution, [{"id": "taken", "job_id": "w", "task_key": "w/t9"}])

    def claim(execution_id: str) -> Any:
        return lambda session: write_rows(
            session,
            Rows(
                Task,
                [{"key": "w/t0", "state": TaskState.RUNNING, "execution_id": execution_id}],
                update=True,
            ),
            Rows(Event, [{"kind": "task.started", "message": ODD_TEXT, "task_key": "w/t0"}]),
            Rows(Execution, [{"id": execution_id, "job_id": "w", "task_key": "w/t0"}]),
        )

    with pytest.raises(IntegrityError):
        _counted(store, claim("taken"))
    with store.read() as session:
        assert session.get(Task, "w/t0").state == TaskState.QUEUED  # type: ignore[union-attr]
        assert session.exec(select(Event).where(Event.task_key == "w/t0")).all() == []
    assert _counted(store, claim("e1")) == (3 if store.is_sqlite else 1)
    with store.read() as session:
        task = session.get(Task, "w/t0")
        assert task is not None and (task.state, task.execution_id) == (TaskState.RUNNING, "e1")
        assert [e.message for e in session.exec(select(Event).where(Event.task_key == "w/t0"))] == [ODD_TEXT]  # fmt: skip
        assert session.get(Execution, "e1") is not None


def test_changed_rows_write_what_the_session_changed_and_let_the_objects_go(
    workspace: Workspace,
) -> None:
    """An exit's task changes leave through ``changed_rows``: only the objects changed and
    only their changed columns (a value set back to what it was is no change), after which
    the session holds none of them, so its flush at commit writes nothing twice."""
    store = workspace.store()
    with store.write() as session:
        for i in range(3):
            session.add(Task(key=f"c/t{i}", job_id="c", task_id=f"t{i}", state=TaskState.RUNNING,
                             error="old"))  # fmt: skip
    with store.write() as session:
        tasks = [session.get(Task, f"c/t{i}") for i in range(3)]
        assert all(task is not None for task in tasks)
        first, second, untouched = tasks
        first.state, first.error = TaskState.SUCCEEDED, ODD_TEXT  # type: ignore[union-attr]
        second.error = "new"  # type: ignore[union-attr]
        second.error = "old"  # type: ignore[union-attr]  # back to what it was
        changes = changed_rows(session, Task)
        assert changes.rows == [{"state": TaskState.SUCCEEDED, "error": ODD_TEXT, "key": "c/t0"}]
        assert first not in session and second not in session and untouched in session
        write_rows(session, changes)
    with store.read() as session:
        rows = session.exec(select(Task).where(Task.job_id == "c").order_by(Task.key)).all()
        assert [(t.state, t.error) for t in rows] == [
            (TaskState.SUCCEEDED, ODD_TEXT), (TaskState.RUNNING, "old"), (TaskState.RUNNING, "old"),
        ]  # fmt: skip


def test_a_submitted_jobs_tasks_read_back_as_the_orm_writes_them(workspace: Workspace) -> None:
    """A submit inserts its tasks as plain rows; a plan adds its children as ORM objects:
    both must leave the same rows (defaults, JSON lists and dicts, NULL and JSON null)."""
    text = job_toml(
        "plain",
        [
            {"id": "a", "title": ODD_TEXT, "input": ODD_TEXT, "priority": "P0", "timeout": 90},
            {"id": "b", "depends_on": ["a"], "workstream": "api", "sim": {"duration": 0.1}},
            {"id": "c", "depends_on": ["a", "b"], "agent": "sim", "size": "L"},
        ],
    )
    spec = parse_job_text(text, Path("job.toml"))
    store = workspace.store()
    submit_job(store, spec, now=100.0)
    with store.write() as session:
        session.add(Job(id="orm", title="orm", created_at=100.0, updated_at=100.0))
        session.flush()
        add_tasks(session, "orm", spec.job.priority, spec.tasks, now=100.0)
    plain = _columns(store, Task, col(Task.job_id) == "plain", skip="key")
    orm = _columns(store, Task, col(Task.job_id) == "orm", skip="key")
    assert [r | {"job_id": "orm"} for r in plain] == orm
    assert [r["dependencies"] for r in plain] == [[], ["a"], ["a", "b"]]

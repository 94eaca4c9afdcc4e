"""The store under concurrency: rows two engines create at the same moment."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest
from helpers import Workspace, job_toml, running_engine, sim, task_state, wait_for
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.loop.health import BAD_VALUE
from relay_engine.ops.completion import fenced_tasks
from relay_engine.store.db import PING_AFTER_IDLE_S, Store, ensure_row
from relay_engine.store.schema import (
    AgentRecord,
    ProviderLimit,
    Task,
)
from relay_engine.store.task_rows import draft_dependents, tasks_by_key


def test_two_engines_creating_the_same_row_at_once_do_not_collide(workspace: Workspace) -> None:
    store = workspace.store()
    other_done = threading.Event()
    errors: list[BaseException] = []

    def other_engine() -> None:
        try:
            with store.write() as session:
                ensure_row(session, ProviderLimit, provider="claude")
                ensure_row(session, AgentRecord, engine_id="e1", id="claude-a")
        except BaseException as error:
            errors.append(error)
        finally:
            other_done.set()

    with store.write() as session:
        ensure_row(session, ProviderLimit, provider="claude")
        ensure_row(session, AgentRecord, engine_id="e1", id="claude-a")
        thread = threading.Thread(target=other_engine)
        thread.start()
        other_done.wait(0.5)  # the other engine is now blocked on (or racing) our rows
    thread.join(10)

    assert errors == []
    with store.read() as session:
        assert session.get(ProviderLimit, "claude") is not None
        assert session.get(AgentRecord, ("e1", "claude-a")) is not None


def test_a_json_value_written_by_hand_is_named_in_one_line_and_the_engine_waits_for_it(
    sqlite_workspace: Workspace,
) -> None:
    """SQLite keeps JSON as text and checks none of it: a task's dependencies edited by
    hand into something that does not parse. relay status says so in one line, not a
    decoder's trace; an engine holds up with that condition instead of dying, and goes back
    to work once the value is corrected."""
    workspace = sqlite_workspace
    workspace.configure(capacity=1, tick=0.05)
    workspace.submit(job_toml("j", [{"id": "t", "sim": sim(0.01)}]))
    database = sqlite3.connect(workspace.path / ".relay" / "relay.db", isolation_level=None)
    database.execute("UPDATE relay_task SET dependencies = 'not json' WHERE key = 'j/t'")

    status = workspace.cli("status")
    said = "the database holds a JSON value that does not parse, 'not json'"
    assert status.returncode == 2 and status.stderr.startswith(f"error: {said}"), status.stderr
    assert len(status.stderr.strip().splitlines()) == 1
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: engine.condition == BAD_VALUE, timeout=15, what="the condition")
        engines = workspace.cli("engines", "--json")
        assert [e["condition"] for e in json.loads(engines.stdout)] == [BAD_VALUE]
        database.execute("UPDATE relay_task SET dependencies = '[]' WHERE key = 'j/t'")
        wait_for(lambda: task_state(workspace.store(), "j/t") == "SUCCEEDED", timeout=30)
        assert engine.condition is None
    database.close()


@pytest.mark.slow
def test_status_answers_while_another_process_holds_the_write_lock(
    sqlite_workspace: Workspace,
) -> None:
    sqlite_workspace.submit(job_toml("j", [{"id": "t"}]))
    holder = sqlite3.connect(sqlite_workspace.path / ".relay" / "relay.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        status = sqlite_workspace.cli("status", "--json", timeout=10)
        assert status.returncode == 0, status.stderr
        assert [t["id"] for t in json.loads(status.stdout)["tasks"]] == ["t"]
        cancel = sqlite_workspace.cli("cancel", "j/t", timeout=30)
        assert cancel.returncode == 2
        assert cancel.stderr.strip().startswith("error: database busy")
        assert "Traceback" not in cancel.stderr
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.slow
def test_a_read_only_workspace_still_shows_status_and_events(
    read_only_workspace: Workspace,
) -> None:
    workspace = read_only_workspace
    assert not os.access(workspace.path, os.W_OK)
    status = workspace.cli("status", "--json")
    assert status.returncode == 0, status.stderr
    assert [t["state"] for t in json.loads(status.stdout)["tasks"]] == ["SUCCEEDED"]
    events = workspace.cli("events")
    assert events.returncode == 0 and "job j succeeded" in events.stdout
    with Store.for_workspace(workspace.path).read() as session:  # what an attached console does
        assert session.get(Task, "j/t") is not None
    run = workspace.cli("run", "--until-idle")
    assert run.returncode == 2
    assert "is read-only" in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.postgres
def test_connections_the_server_dropped_are_replaced_without_an_error(pg_url: str) -> None:
    """A PostgreSQL restart (here: every backend terminated) costs an idle engine nothing:
    its pooled connections are checked after sitting idle and replaced before use. Without
    the idle wait at most one transaction fails, and the next one works."""
    import psycopg
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    store = Store(pg_url)
    database = store.url.rsplit("/", 1)[1]
    admin_url = make_url(pg_url).set(drivername="postgresql", database="postgres")

    def drop_every_connection() -> int:
        conninfo = admin_url.render_as_string(hide_password=False)
        with psycopg.connect(conninfo, autocommit=True) as admin:
            query = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
            return len(admin.execute(query, (database,)).fetchall())

    def ask() -> int:
        with store.read() as session:
            return session.execute(text("SELECT 41 + 1")).scalar_one()

    try:
        assert ask() == 42
        assert drop_every_connection() >= 1
        time.sleep(PING_AFTER_IDLE_S + 0.2)
        assert ask() == 42  # no error: the idle connection was checked and replaced

        assert drop_every_connection() >= 1
        outcomes = []
        for _ in range(2):
            try:
                outcomes.append(ask())
            except SQLAlchemyError:
                outcomes.append("failed")
        assert outcomes[-1] == 42, outcomes
    finally:
        store.dispose()


def test_the_store_counts_every_statement_it_sends(tmp_path: Path) -> None:
    """The benches read the engine's own count: one per statement, reads and writes."""
    from sqlmodel import select as select_

    from relay_engine.store.schema import Job

    store = Store.for_workspace(tmp_path)
    before = store.stats.statements
    with store.read() as session:
        session.exec(select_(Job)).all()
        session.exec(select_(Job).where(Job.id == "x")).all()
    assert store.stats.statements - before == 2 + (1 if store.is_sqlite else 0)  # BEGIN
    top = dict(store.stats.top_statements())
    by_id = [text for text in top if text.startswith("SELECT") and "WHERE relay_job.id" in text]
    assert len(by_id) == 1 and top[by_id[0]] == 1  # which statements, folded to one line
    store.dispose()


@pytest.mark.postgres
def test_a_postgres_read_holds_no_transaction_open(pg_url: str) -> None:
    """A read session on PostgreSQL runs each statement on its own (autocommit): no BEGIN
    and ROLLBACK round trips around it, and a console or engine that keeps a read session
    while it works holds back neither vacuum nor the server's idle-in-transaction timeout."""
    from sqlalchemy import text

    store = Store(pg_url)
    try:
        with store.read() as session:
            session.execute(text("SELECT 1"))
            time.sleep(0.2)
            age = session.execute(text("SELECT extract(epoch FROM clock_timestamp() - now())"))
            assert float(age.scalar_one()) < 0.1  # now() is this statement's, not a transaction's
        with store.write() as session:
            session.execute(text("SELECT 1"))
            time.sleep(0.2)
            age = session.execute(text("SELECT extract(epoch FROM clock_timestamp() - now())"))
            assert float(age.scalar_one()) >= 0.2  # writes keep their transaction
    finally:
        store.dispose()


def test_events_appended_in_one_statement_keep_the_order_they_were_recorded_in(
    workspace: Workspace,
) -> None:
    """A claim appends its task.started events in one INSERT; an event the transaction
    recorded before them, still pending in the session, lands before them in the feed."""
    from sqlmodel import col, select

    from relay_engine.store.events import EventKind, NewEvent, append_events, record_event
    from relay_engine.store.schema import Event

    store = workspace.store()
    with store.write() as session:
        record_event(session, EventKind.JOB_STARTED, "first", now=1.0, job_id="j")
        later = [NewEvent(EventKind.TASK_STARTED, f"then {i}", 2.0, job_id="j") for i in (1, 2)]
        append_events(session, later)
        record_event(session, EventKind.JOB_FINISHED, "last", now=3.0, job_id="j")
    with store.read() as session:
        rows = session.exec(select(Event).where(Event.job_id == "j").order_by(col(Event.id)))
        assert [(e.kind, e.message) for e in rows] == [
            ("job.started", "first"),
            ("task.started", "then 1"),
            ("task.started", "then 2"),
            ("job.finished", "last"),
        ]


def test_events_recorded_together_land_in_one_insert_in_order_and_not_on_an_error(
    workspace: Workspace,
) -> None:
    """An exit write records its events inside ``events_together``: the block's events are
    one INSERT, between the transaction's events before and after it in the feed; a block
    that raises appends none of its events."""
    from sqlmodel import col, select

    from relay_engine.store.events import EventKind, events_together, record_event
    from relay_engine.store.schema import Event

    store = workspace.store()
    with store.write() as session:
        record_event(session, EventKind.JOB_STARTED, "before", now=1.0, job_id="j")
        session.flush()
        sent = store.stats.statements
        with events_together(session):
            for i in (1, 2, 3):
                record_event(session, EventKind.TASK_SUCCEEDED, f"in {i}", now=2.0, job_id="j")
            with events_together(session):  # nested: the outer block appends it
                record_event(session, EventKind.TASK_FAILED, "in 4", now=2.0, job_id="j")
        assert store.stats.statements - sent == 1
        record_event(session, EventKind.JOB_FINISHED, "after", now=3.0, job_id="j")
    with store.write() as session:
        with suppress(RuntimeError), events_together(session):
            record_event(session, EventKind.TASK_FAILED, "dropped", now=4.0, job_id="j")
            raise RuntimeError("the block fails; the transaction goes on")
        record_event(session, EventKind.JOB_STARTED, "kept", now=5.0, job_id="j")
    with store.read() as session:
        rows = session.exec(select(Event).where(Event.job_id == "j").order_by(col(Event.id)))
        in_feed = [e.message for e in rows]
    assert in_feed == ["before", "in 1", "in 2", "in 3", "in 4", "after", "kept"]


def test_ready_drafts_are_queued_together_and_only_while_still_drafts(
    workspace: Workspace,
) -> None:
    """Readiness queues a job's ready drafts in one statement: each gets its state and one
    ``task.queued`` event; a dependent stays a draft; a draft another engine moved on since
    readiness read it (here: cancelled) is neither queued nor given an event."""
    from helpers import events, tasks

    from relay_engine.core.states import TaskState
    from relay_engine.loop.readiness import promote_ready
    from relay_engine.store.events import EventKind
    from relay_engine.store.task_rows import move_task, queue_drafts

    workspace.submit(
        job_toml("j", [{"id": "a"}, {"id": "b"}, {"id": "c", "depends_on": ["a"]}, {"id": "d"}])
    )
    store = workspace.store()
    with store.write() as session:
        gone = session.get(Task, "j/d")
        assert gone is not None
        cancelled = EventKind.TASK_CANCELLED
        move_task(session, gone, TaskState.CANCELLED, now=1.0, kind=cancelled, message="gone")
        assert queue_drafts(session, ["j/d"], now=2.0) == []
    assert promote_ready(store, 3.0)

    states = {key: task.state for key, task in tasks(store).items()}
    assert states == {"j/a": "QUEUED", "j/b": "QUEUED", "j/c": "DRAFT", "j/d": "CANCELLED"}
    assert sorted(e.task_key or "" for e in events(store, "task.queued")) == ["j/a", "j/b"]
    assert {t.updated_at for k, t in tasks(store).items() if k in ("j/a", "j/b")} == {3.0}


def test_a_completion_reads_exactly_the_drafts_that_name_its_task(workspace: Workspace) -> None:
    """Dependents are found by the database, by a LIKE on each draft's dependency list:
    ``_`` is a wildcard there, ``t1`` is a prefix of ``t10``, and another job has a task of
    the same name. Read one task at a time and preloaded for a batch, they agree."""
    names = {"d1": ["a_b"], "d2": ["aXb"], "d3": ["t10"], "d4": ["t1", "x"], "d5": ["x"]}
    roots = [{"id": name} for name in ("a_b", "aXb", "t1", "t10", "x")]
    drafts = [{"id": name, "depends_on": deps} for name, deps in names.items()]
    workspace.submit(job_toml("j", [*roots, *drafts]))
    workspace.submit(job_toml("k", [{"id": "t1"}, {"id": "d9", "depends_on": ["t1"]}]))
    expected = {"a_b": {"d1"}, "aXb": {"d2"}, "t1": {"d4"}, "t10": {"d3"}, "x": {"d4", "d5"}}
    store = workspace.store()
    with store.read() as session:
        roots_by_key = tasks_by_key(session, [f"j/{name}" for name in expected])
        one_by_one = {
            task.task_id: {t.task_id for t in draft_dependents(session, task)}
            for task in roots_by_key.values()
        }
    assert one_by_one == expected
    with store.read() as session:
        claims = {key: task.execution_id or "" for key, task in roots_by_key.items()}
        claims["k/t1"] = ""
        fenced_tasks(session, claims, with_dependents=True)
        batched = {
            task.task_id: {t.task_id for t in draft_dependents(session, task)}
            for task in tasks_by_key(session, claims).values()
            if task.job_id == "j"
        }
        assert session.info["relay.dependents"]["k/t1"][0].key == "k/d9"
    assert batched == expected

"""The store under concurrency: rows two engines create at the same moment."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from helpers import Workspace, job_toml
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.store.db import PING_AFTER_IDLE_S, Store, ensure_row
from relay_engine.store.schema import (
    AgentRecord,
    ProviderLimit,
    Task,
)


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

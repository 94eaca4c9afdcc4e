"""The store under concurrency: rows two engines create at the same moment."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Workspace, job_toml, sim
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.model import (
    AgentRecord,
    ProviderLimit,
    Task,
)
from relay_engine.store import PING_AFTER_IDLE_S, Store, ensure_row


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


@pytest.fixture
def read_only_workspace(sqlite_workspace: Workspace, tmp_path: Path) -> Iterator[Workspace]:
    """The workspace, seen through a read-only bind mount."""
    sqlite_workspace.submit(job_toml("j", [{"id": "t", "sim": sim(0.05)}]))
    assert sqlite_workspace.cli("run", "--until-idle", "--quiet").returncode == 0
    view = tmp_path / "read-only"
    view.mkdir()
    mounts = (
        ["mount", "--bind", str(sqlite_workspace.path), str(view)],
        ["mount", "-o", "remount,bind,ro", str(view)],
    )
    for argv in mounts:
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            subprocess.run(["umount", str(view)], capture_output=True, check=False)
            pytest.skip(f"cannot make a read-only bind mount here: {result.stderr.strip()}")
    try:
        yield Workspace(view)
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


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
    from conftest import _psycopg_conninfo
    from sqlalchemy import text

    store = Store(pg_url)
    database = store.url.rsplit("/", 1)[1]

    def drop_every_connection() -> int:
        with psycopg.connect(_psycopg_conninfo(pg_url, "postgres"), autocommit=True) as admin:
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

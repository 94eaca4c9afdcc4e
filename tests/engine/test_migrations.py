"""Schema migrations as an operator meets them: a database made by relay 0.1.0, upgraded
with its work intact; a shared PostgreSQL refused until `relay db upgrade`; an upgrade
refused while an engine runs on the database; a database from a newer relay refused.

The 0.1.0 fixture (tests/fixtures/release-0.1.0/relay-0.1.0.db) was made by that release's
own code: `relay submit example-job.toml`, `relay run --until-idle`, `relay submit
pending.toml` — one finished job and one that was still waiting when relay was upgraded.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from helpers import Workspace
from sqlalchemy import create_engine, text
from sqlmodel import SQLModel, select

from relay_engine.store import migrate
from relay_engine.store.db import SchemaError, Store
from relay_engine.store.schema import Job, SchemaInfo, Task

FIXTURE = Path(__file__).parents[1] / "fixtures" / "release-0.1.0"
HEAD = migrate.head_revision()  # this relay's schema revision


@pytest.fixture
def legacy(sqlite_workspace: Workspace) -> Workspace:
    """A workspace whose database relay 0.1.0 wrote."""
    target = sqlite_workspace.path / ".relay"
    target.mkdir(exist_ok=True)
    shutil.copy(FIXTURE / "relay-0.1.0.db", target / "relay.db")
    for name in ("example-job.toml", "pending.toml"):
        shutil.copy(FIXTURE / name, sqlite_workspace.path / name)
    return sqlite_workspace


def _revision(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]


@pytest.mark.slow
def test_a_0_1_0_database_is_upgraded_and_its_waiting_job_then_runs(legacy: Workspace) -> None:
    result = legacy.cli("status", "--json")  # read-only: refuses, and says what to run
    assert result.returncode == 2
    assert f"0001_release_0_1_0 is older than this relay's {HEAD}" in result.stderr
    assert "relay db upgrade" in result.stderr

    upgraded = legacy.cli("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"upgraded from 0001_release_0_1_0 to {HEAD}" in upgraded.stdout
    assert _revision(legacy.path / ".relay" / "relay.db") == migrate.head_revision()

    store = legacy.store()
    with store.read() as session:
        jobs = {job.id: job for job in session.exec(select(Job))}
        tasks = {task.key: task for task in session.exec(select(Task))}
        assert session.get(SchemaInfo, 1).version == 2  # type: ignore[union-attr] # fences 0.1.0
    assert jobs["example"].state == "SUCCEEDED" and jobs["pending"].state == "ACTIVE"
    assert len(tasks) == 7 and tasks["example/implement"].state == "SUCCEEDED"
    assert tasks["pending/second"].dependencies == ["first"]
    assert (tasks["pending/first"].external_deps, tasks["pending/first"].recoveries) == ([], 0)
    assert jobs["pending"].after == [] and jobs["pending"].troubleshoot is True

    again = legacy.cli(
        "submit", str(legacy.path / "example-job.toml")
    )  # the same file means the same job
    assert again.returncode == 0, again.stderr
    assert "unchanged (already submitted)" in again.stdout

    run = legacy.cli("run", "--until-idle", "--quiet", timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    with store.read() as session:
        states = {
            t.key: t.state for t in session.exec(select(Task).where(Task.job_id == "pending"))
        }
    assert states == {"pending/first": "SUCCEEDED", "pending/second": "SUCCEEDED"}


@pytest.mark.slow
def test_an_engine_upgrades_a_sqlite_workspace_itself_unless_told_not_to(
    legacy: Workspace,
) -> None:
    legacy.configure(auto_migrate=False)
    refused = legacy.cli("run", "--until-idle", "--quiet")
    assert refused.returncode == 2
    assert "run `relay db upgrade`" in refused.stderr and "Traceback" not in refused.stderr

    legacy.configure()  # SQLite's default: the engine upgrades its own workspace
    run = legacy.cli("run", "--until-idle", "--quiet", timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _revision(legacy.path / ".relay" / "relay.db") == migrate.head_revision()


def test_upgrade_is_refused_while_an_engine_heartbeats(legacy: Workspace) -> None:
    db = legacy.path / ".relay" / "relay.db"
    with sqlite3.connect(db) as connection:  # an engine of the old release, alive right now
        connection.execute(
            "INSERT INTO relay_engine (id, host, pid, started_at, heartbeat_at, role) "
            "VALUES ('old-engine', 'build-7', 4242, ?, ?, 'run')",
            (time.time() - 600, time.time()),
        )
    refused = legacy.cli("db", "upgrade")
    assert refused.returncode == 2
    assert f"not upgrading from 0001_release_0_1_0 to {HEAD}" in refused.stderr
    assert "old-engine on build-7 pid 4242" in refused.stderr
    assert "Traceback" not in refused.stderr
    with sqlite3.connect(db) as connection:  # nothing was half done
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
    assert "alembic_version" not in tables and "relay_review" not in tables

    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE relay_engine SET stopped_at = heartbeat_at")
    assert legacy.cli("db", "upgrade").returncode == 0


def test_a_database_from_a_newer_relay_is_refused(workspace: Workspace) -> None:
    store = workspace.store()
    with store.write() as session:
        session.exec(text("UPDATE alembic_version SET version_num = '0042_from_the_future'"))  # type: ignore[call-overload]
    store.dispose()
    with pytest.raises(SchemaError) as caught:
        Store(store.url)
    assert "schema revision 0042_from_the_future was written by a newer relay" in str(caught.value)
    assert f"knows up to {HEAD}" in str(caught.value)
    result = workspace.cli("status")
    assert result.returncode == 2 and "newer relay" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_a_shared_postgres_of_the_previous_release_waits_for_relay_db_upgrade(
    pg_url: str, tmp_path: Path
) -> None:
    """Made with the previous release's schema (revision 0001), holding a queued task."""
    _make_release_0_1_0(pg_url)
    workspace = Workspace(tmp_path, pg_url)
    workspace.configure()

    refused = workspace.cli("run", "--until-idle", "--quiet")  # PostgreSQL: no auto-upgrade
    assert refused.returncode == 2
    assert f"0001_release_0_1_0 is older than this relay's {HEAD}" in refused.stderr
    assert "relay db upgrade" in refused.stderr

    upgraded = workspace.cli("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    current = workspace.cli("db", "current")
    assert current.returncode == 0 and f"{HEAD} (up to date)" in current.stdout
    run = workspace.cli("run", "--until-idle", "--quiet", timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    store = workspace.store()
    with store.read() as session:
        task = session.get(Task, "old/t")
    assert task is not None and task.state == "SUCCEEDED" and task.input == "kept"
    workspace.close()


def _make_release_0_1_0(url: str) -> None:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        command.upgrade(migrate._config(connection), migrate.LEGACY_REVISION)
        connection.execute(text("DROP TABLE alembic_version"))  # 0.1.0 had none
        connection.execute(text("INSERT INTO relay_schema (id, version) VALUES (1, 1)"))
        connection.execute(
            text(
                "INSERT INTO relay_job (id, title, objective, state, priority, mode, "
                "base_branch, wave_gate, auto_merge, review_enabled, approved_wave, "
                "max_plan_rounds, spec_hash, created_at, updated_at) VALUES ('old', 'old', '', "
                "'ACTIVE', 'P2', 'manual', 'main', 'auto', false, false, 0, 3, '', 0, 0)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO relay_task (key, job_id, task_id, kind, title, input, role, "
                "priority, story_size, dependencies, state, attempt, max_attempts, "
                "execution_history, wave, spec_hash, created_at, updated_at) VALUES "
                "('old/t', 'old', 't', 'work', 't', 'kept', 'implementer', 'P2', 'M', "
                "'[]', 'QUEUED', 0, 3, '[]', 1, '', 0, 0)"
            )
        )
    engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_migrations_build_exactly_the_schema_of_the_models(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A database upgraded from 0.1.0 and a new one are the same schema: nothing for
    autogenerate to add, change or drop."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'up.db'}"
    else:
        url = request.getfixturevalue("pg_url").replace("postgresql://", "postgresql+psycopg://")
    engine = create_engine(url)
    with engine.begin() as connection:
        command.upgrade(migrate._config(connection), "head")
        diff = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), SQLModel.metadata
        )
    engine.dispose()
    assert diff == []

"""Fixtures for the engine's integration tests.

``db_url`` runs a test on SQLite (the workspace's own file) and, when RELAY_TEST_PG_URL
is set, again on PostgreSQL in a fresh database of its own (so xdist workers never share
tables); without CREATEDB rights it falls back to dropping every relay table first.
"""

from __future__ import annotations

import compileall
import gc
import os
import resource
import subprocess
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from helpers import Workspace, job_toml, psycopg_conninfo, sim
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel, create_engine

PG_ENV = "RELAY_TEST_PG_URL"
DB_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Write relay's bytecode once, before any worker starts: hundreds of tests start
    relay, relay-tui, engines and sim agents in fresh interpreters, and where
    PYTHONDONTWRITEBYTECODE is set (as on the CI box) each of them compiled every module
    it imported again (an editable install leaves no .pyc behind)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller compiled before it started
    for package in ("relay_engine", "relay_tui"):
        compileall.compile_dir(ROOT / package, quiet=1)
    compileall.compile_dir(ROOT / "tests", maxlevels=0, quiet=1)


@pytest.fixture(autouse=True)
def _no_ambient_db(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's RELAY_DB must never point a test at a real database."""
    monkeypatch.delenv("RELAY_DB", raising=False)


@pytest.fixture
def pg_url() -> Iterator[str]:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} not set")
    import psycopg

    name = f"relay_t_{uuid.uuid4().hex[:12]}"
    admin = psycopg_conninfo(base, "postgres")
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error:
        yield _reset_shared_database(base)
        return
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _reset_shared_database(url: str) -> str:
    import relay_engine.store.schema  # noqa: F401 - registers the tables on SQLModel.metadata

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    SQLModel.metadata.drop_all(engine)
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
    engine.dispose()
    return url


@pytest.fixture(params=DB_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str | None:
    """None: the workspace's default SQLite file; otherwise a PostgreSQL URL."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_url")


@pytest.fixture
def workspace(tmp_path: Path, db_url: str | None) -> Iterator[Workspace]:
    ws = Workspace(tmp_path / "ws", db_url)
    ws.path.mkdir()
    ws.configure()
    yield ws
    ws.close()


@pytest.fixture
def sqlite_workspace(tmp_path: Path) -> Iterator[Workspace]:
    """For tests about the workspace's own SQLite file (or that need no second backend)."""
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    ws.configure()
    yield ws
    ws.close()


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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of minutes (allowed ten) first, the rest in collection order: xdist hands
    tests out from the front, and one collected near the end (the demo left open for five
    minutes) could start when the other worker had little left, which then waited idle."""
    items.sort(key=lambda item: not _takes_minutes(item))


def _takes_minutes(item: pytest.Item) -> bool:
    timeout = item.get_closest_marker("timeout")
    return bool(timeout and timeout.args and timeout.args[0] >= 600)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported (Textual, SQLAlchemy, every test module) out of the
    garbage collector: each full collection of a worker walked all of it again, for every
    test that follows (:mod:`relay_engine.cli.startup` does the same for relay's CLIs)."""
    gc.collect()
    gc.freeze()


CPU_LOG = os.environ.get("RELAY_TEST_CPU_LOG")
"""Where each test's CPU seconds are appended, when set: the suite is bound by the CPU of
two cores, and wall times (``--durations``) do not tell a test that sleeps from one that
computes."""


def _cpu_seconds() -> float:
    """This worker's CPU and that of the children it reaped (CLIs, engines, agents)."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    if not CPU_LOG:
        return (yield)
    began = _cpu_seconds()
    try:
        return (yield)
    finally:
        with open(CPU_LOG, "a") as log:
            log.write(f"{_cpu_seconds() - began:.2f} {item.nodeid}\n")

"""Shared helpers for the engine's integration tests: workspaces, the CLI, engines in threads.

Everything here drives the real thing: the sim agent as a real subprocess, a real database
(SQLite in the test's tmp_path, or PostgreSQL when RELAY_TEST_PG_URL is set).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import tomli_w
from sqlalchemy.engine import make_url
from sqlmodel import select

from relay_engine.agents.sandbox import host_sandbox
from relay_engine.contracts.config import KNOWN_ROLES, load_config
from relay_engine.core.availability import config_hash
from relay_engine.core.states import JobState, TaskState
from relay_engine.loop.engine import Engine
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind
from relay_engine.store.schema import (
    AgentStatus,
    Ask,
    EngineRecord,
    Event,
    Execution,
    Job,
    Schedule,
    Task,
)

# Events that end a task's hold on a slot (and on its workstream).
SLOT_RELEASES = frozenset(
    {
        "task.succeeded",
        "task.retrying",
        "task.failed",
        "task.recovered",
        "task.released",
        "task.cancelled",
        "task.parked",
        "task.swapped",
    }
)


def relay_toml(
    *,
    capacity: int = 4,
    tick: float = 0.05,
    lease: float = 30.0,
    heartbeat: float = 0.5,
    grace: float = 0.5,
    agents: list[dict[str, Any]] | None = None,
    notifications: dict[str, Any] | None = None,
    git: dict[str, Any] | None = None,
    permissions: dict[str, Any] | None = None,
    **engine: Any,
) -> str:
    """A relay.toml with fast ticks and, by default, one sim agent taking every role;
    other keyword arguments are more ``[engine]`` settings."""
    config: dict[str, Any] = {
        "engine": {
            "max_concurrent_agents": capacity,
            "tick_seconds": tick,
            "lease_seconds": lease,
            "heartbeat_seconds": heartbeat,
            "cancel_grace_seconds": grace,
            **engine,
        },
        "agents": agents
        if agents is not None
        else [{"id": "sim", "provider": "sim", "roles": list(KNOWN_ROLES)}],
    }
    if notifications is not None:
        config["notifications"] = notifications
    if git is not None:
        config["git"] = git
    if permissions is not None:
        config["permissions"] = permissions
    return tomli_w.dumps(config)


def job_toml(job_id: str, tasks: list[dict[str, Any]], **job: Any) -> str:
    return tomli_w.dumps({"job": {"id": job_id, **job}, "tasks": tasks})


def sim(duration: float = 0.05, lines: int = 1, **script: Any) -> dict[str, Any]:
    return {"duration": duration, "lines": lines, **script}


@dataclass
class Workspace:
    """A relay workspace in a temp dir; ``db_url`` None means the default SQLite file."""

    path: Path
    db_url: str | None = None
    _stores: list[Store] = field(default_factory=list)

    def configure(self, **options: Any) -> Workspace:
        """Write relay.toml at once (a running engine never reads it half written)."""
        partial = self.path / "relay.toml.partial"
        partial.write_text(relay_toml(**options), encoding="utf-8")
        partial.replace(self.path / "relay.toml")
        return self

    def write_job(self, text: str, name: str = "job.toml") -> Path:
        path = self.path / name
        path.write_text(text, encoding="utf-8")
        return path

    def store(self) -> Store:
        store = Store.for_workspace(self.path, self.db_url)
        self._stores.append(store)
        return store

    def engine(self, **kwargs: Any) -> Engine:
        return Engine(self.path, store=self.store(), **kwargs)

    def cli_argv(self, *args: str) -> list[str]:
        argv = [sys.executable, "-m", "relay_engine.cli", "--workspace", str(self.path)]
        if self.db_url:
            argv += ["--db", self.db_url]
        return [*argv, *args]

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.cli_argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=cli_env(),
            check=False,
        )

    def popen(
        self, *args: str, log_name: str = "engine.log", env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.path / log_name, "wb")  # noqa: SIM115 - closed with the process
        try:
            return subprocess.Popen(
                self.cli_argv(*args),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**cli_env(), **(env or {})},
            )
        finally:
            log.close()

    def submit(self, text: str, name: str = "job.toml") -> None:
        path = self.write_job(text, name)
        result = self.cli("submit", str(path))
        assert result.returncode == 0, result.stderr

    def status(self) -> dict[str, Any]:
        result = self.cli("status", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def close(self) -> None:
        for store in self._stores:
            store.dispose()


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAY_DB"}
    env["COLUMNS"] = "200"
    return env


def wait_for(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll until ``predicate`` returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


class EngineThread:
    """An Engine running in a background thread, with a deadline on its join."""

    def __init__(self, engine: Engine, *, until_idle: bool = False) -> None:
        self.engine = engine
        self.result: bool | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, args=(until_idle,), name="test-engine", daemon=True
        )

    def _run(self, until_idle: bool) -> None:
        try:
            self.result = self.engine.run(until_idle=until_idle)
        except BaseException as error:  # surfaced by join()
            self.error = error

    def start(self) -> EngineThread:
        self.thread.start()
        return self

    def join(self, timeout: float = 60.0) -> bool | None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.engine.stop(timeout=10)
            raise AssertionError(f"engine still running after {timeout}s")
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self) -> None:
        if self.thread.is_alive():
            self.engine.stop(timeout=15)
            self.thread.join(15)


@contextmanager
def running_engine(engine: Engine) -> Iterator[EngineThread]:
    """Run ``engine`` until the block ends (then stop it, releasing live agents)."""
    handle = EngineThread(engine).start()
    try:
        yield handle
    finally:
        handle.stop()


def run_until_idle(engine: Engine, timeout: float = 60.0) -> bool:
    result = EngineThread(engine, until_idle=True).start().join(timeout)
    assert result is not None
    return result


# -- reading what happened -----------------------------------------------------------------
def tasks(store: Store) -> dict[str, Task]:
    with store.read() as session:
        return {t.key: t for t in session.exec(select(Task))}


def task_state(store: Store, key: str) -> str | None:
    with store.read() as session:
        task = session.get(Task, key)
        return task.state if task else None


def jobs(store: Store) -> dict[str, Job]:
    with store.read() as session:
        return {j.id: j for j in session.exec(select(Job))}


def executions(store: Store) -> list[Execution]:
    with store.read() as session:
        return list(session.exec(select(Execution)))


def events(store: Store, *kinds: str) -> list[Event]:
    with store.read() as session:
        query = select(Event).order_by(Event.id)  # type: ignore[arg-type]
        rows = list(session.exec(query))
    return [e for e in rows if not kinds or e.kind in kinds]


def engine_records(store: Store) -> list[EngineRecord]:
    with store.read() as session:
        return list(session.exec(select(EngineRecord)))


def count_by_task(items: Iterable[Any]) -> Counter[str]:
    return Counter(item.task_key for item in items)


def max_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """Most intervals open at one instant; one ending exactly when another starts is no overlap."""
    points = sorted(p for start, end in intervals for p in ((start, 1), (end, -1)))
    # (t, -1) sorts before (t, 1): ends are counted first at equal times.
    best = open_now = 0
    for _, delta in points:
        open_now += delta
        best = max(best, open_now)
    return best


def occupancy_by_events(
    event_log: Iterable[Event], group: Callable[[str], str | None] = lambda _key: ""
) -> dict[str, int]:
    """Peak number of started-and-not-yet-ended tasks per group, replaying the event log.

    The log is in commit order for the transitions that matter (a slot is released in the
    same transaction as its event, and a new claim can only follow that commit), so a peak
    above the limit proves the limit was broken.
    """
    holding: dict[str, set[str]] = defaultdict(set)
    peak: dict[str, int] = defaultdict(int)
    for event in event_log:
        key = event.task_key
        if key is None:
            continue
        name = group(key)
        if name is None:
            continue
        if event.kind == "task.started":
            holding[name].add(key)
            peak[name] = max(peak[name], len(holding[name]))
        elif event.kind in SLOT_RELEASES:
            holding[name].discard(key)
    return dict(peak)


# -- git -------------------------------------------------------------------------------------
def init_repo(path: Path) -> Path:
    """A git repository with one commit on ``main``."""
    from gitrepos import git

    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


# -- processes -------------------------------------------------------------------------------
requires_sandbox = pytest.mark.skipif(
    host_sandbox().problem is not None, reason=f"no sandbox here: {host_sandbox().problem}"
)


def host_pid(ns_pid: int, execution_id: str) -> int | None:
    """The pid, as this host sees it, of the process of ``execution_id`` that calls itself
    ``ns_pid`` (a sandboxed agent has a pid namespace of its own); None once it is gone."""
    from relay_engine.agents.runner import tagged_processes

    for pid in tagged_processes(execution_id):
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                line = next(row for row in status if row.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(line.split()[-1]) == ns_pid:
            return pid
    return None


def pid_gone(pid: int) -> bool:
    """A reparented zombie nobody has reaped yet counts as gone: it no longer runs."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_quietly(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def psycopg_conninfo(url: str, database: str) -> str:
    """A SQLAlchemy PostgreSQL URL as psycopg takes it, naming ``database``."""
    parsed = make_url(url).set(drivername="postgresql", database=database)
    return parsed.render_as_string(hide_password=False)


BRACKETED = "cannot read [/usr/bin/claude] [bold]as is[/bold] [red]"
"""Text relay did not write, as an agent or a CLI might word it: rich and Textual read
``[...]`` as markup, and a closing tag that matches nothing raises."""


ESCAPES = "see \x1b[2J\x1b[H\u202e\x1b]52;c;cm0gLXJm\x07\x9b31m end"
"""Text with terminal controls, as an agent or a CLI might print them: clear the screen,
home the cursor, reverse the direction, write the clipboard, and a one-character CSI."""
ESCAPES_SHOWN = "see [2J[H]52;c;cm0gLXJm31m end"
""":data:`ESCAPES` as drawn: the control characters gone, their printable rest kept."""


def seed_bracketed_text(store: Store, workspace: Path, words: str = BRACKETED) -> None:
    """A job, task, agent status, schedule, ask and event whose words are ``words``
    (:data:`BRACKETED` or :data:`ESCAPES`), each after the field's name ("title cannot
    read ...")."""
    now = time.time()
    agent = load_config(workspace).agents[0]
    with store.write() as session:
        session.add(Job(id="j", title=f"title {words}", state=JobState.ACTIVE))
        session.add(Task(key="j/t", job_id="j", task_id="t", title=f"task {words}",
                         state=TaskState.FAILED, error=f"error {words}"))  # fmt: skip
        session.add(AgentStatus(agent_id=agent.id, provider=agent.provider, status="auth",
                                reason=f"reason {words}", fix=f"fix {words}",
                                config_hash=config_hash(agent), since=now))  # fmt: skip
        session.add(Schedule(id="s", cron="0 3 * * *", cursor_at=now, problem=f"p {words}"))
        session.add(Ask(job_id="j", task_key="j/t", agent=agent.id, summary=f"ask {words}",
                        suggested_rule=f"rule {words}", asked_at=now))  # fmt: skip
        session.add(Event(at=now, job_id="j", kind=EventKind.TASK_FAILED, level="error",
                          message=f"event {words}"))  # fmt: skip

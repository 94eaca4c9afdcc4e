"""Every write of an execution is fenced by its execution id; a crash is not the task's fault.

A stale owner (an engine paused past its lease, whose task was recovered and run again
elsewhere) may still judge its agent's exit when it resumes: its late result is recorded
as lost and changes nothing else -- not the task, not the job branch, not the workstream's
memory or provider session.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from gitrepos import git
from helpers import Workspace, events, executions, init_repo, job_toml, sim, tasks
from sqlmodel import select

from relay_engine.loop.engine import Engine
from relay_engine.loop.reclaim import recover_tasks
from relay_engine.store.db import Store
from relay_engine.store.schema import EngineRecord, Execution, Memory, Task


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def submit_repo_job(workspace: Workspace, repo: Path, duration: float) -> None:
    script = sim(duration, write_files={"out.txt": "work\n"}, session_id="sess-1")
    task = {"id": "t", "workstream": "w", "sim": script}
    workspace.submit(job_toml("stale", [task], repo=str(repo)))


def merges(repo: Path) -> list[str]:
    log = git(repo, "log", "--format=%s", "relay/stale")
    return [line for line in log.splitlines() if line.startswith("relay: merge")]


def tick_until(engine: Engine, done: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        engine.tick()
        time.sleep(0.05)


@pytest.mark.slow
def test_a_stale_owners_late_exit_is_lost_and_merges_nothing(
    workspace: Workspace, repo: Path
) -> None:
    workspace.configure(capacity=1, lease=5.0, heartbeat=0.2)
    submit_repo_job(workspace, repo, duration=1.5)
    store = workspace.store()
    stale = workspace.engine()
    stale.register()
    stale.tick()
    (first,) = stale.live.values()
    assert first.process.wait(30) == 0  # its agent finished; its engine has not looked yet

    # Another engine, whose clock is a minute later, finds the lease long expired.
    later = workspace.engine(clock=lambda: time.time() + 60)
    later.register()
    try:
        tick_until(later, lambda: later.live, timeout=30)  # recovered, and running again
        assert Path(workspace.path / ".relay/worktrees/stale/t").exists()  # the new run's tree
        stale.tick(full=False)  # the stale engine resumes with its exit judged
        assert not stale.live and not stale.runtime.exited
        tick_until(later, lambda: tasks(store)["stale/t"].state == "SUCCEEDED")
    finally:
        stale.shutdown(release=True)
        later.shutdown(release=True)

    runs = {r.id: r for r in executions(store)}
    assert runs[first.execution_id].outcome == "lost"
    assert "after its task moved on" in (runs[first.execution_id].error or "")
    assert sorted(r.outcome or "" for r in runs.values()) == ["lost", "succeeded"]
    (lost,) = events(store, "execution.lost")
    assert first.execution_id[:8] in lost.message
    assert merges(repo) == ["relay: merge t (t)"]  # merged once, by the owner
    assert git(repo, "show", "relay/stale:out.txt") == "work"
    task = tasks(store)["stale/t"]
    assert (task.attempt, task.recoveries) == (1, 1)
    with store.read() as session:
        notes = session.exec(select(Memory).where(Memory.job_id == "stale")).all()
    assert len(notes) == 1  # the workstream remembers the run that counted, once


def test_a_merge_whose_task_moved_on_before_the_write_is_taken_back(
    sqlite_workspace: Workspace, repo: Path
) -> None:
    """The narrow window: owned when merging, cancelled before the fenced write."""
    workspace = sqlite_workspace
    submit_repo_job(workspace, repo, duration=0.1)
    store = workspace.store()
    engine = workspace.engine()
    engine.register()
    try:
        engine.tick()
        (live,) = engine.live.values()
        assert live.process.wait(30) == 0
        now = time.time()
        # The reap step by step, with the cancel landing between its merge and its write.
        judged = engine.reaper._judge(live, datetime.now().astimezone())
        del engine.runtime.live[live.execution_id]
        engine.runtime.exited[live.execution_id] = judged
        engine.reaper._settle_worktrees(now)
        assert merges(repo) == ["relay: merge t (t)"]
        assert workspace.cli("cancel", "stale/t").returncode == 0
        engine.reaper._write_exits(now)
    finally:
        engine.shutdown(release=True)
    assert merges(repo) == []
    assert "out.txt" not in git(repo, "ls-tree", "--name-only", "relay/stale")
    (run,) = executions(store)
    assert run.outcome == "cancelled"
    assert "after its task was cancelled: result discarded" in (run.error or "")
    assert tasks(store)["stale/t"].state == "CANCELLED"


def _lose_runner(store: Store, key: str) -> None:
    """Claim ``key`` for an engine on another host that then falls silent."""
    now = time.time()
    owner, execution_id = f"gone-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    with store.write() as session:
        session.add(
            EngineRecord(id=owner, host="elsewhere", pid=1, started_at=now, heartbeat_at=now - 60)
        )
        task = session.get(Task, key)
        assert task is not None
        task.state, task.attempt = "RUNNING", task.attempt + 1
        task.execution_id, task.lease_owner, task.lease_expires_at = execution_id, owner, now + 60
        session.add(task)
        session.add(Execution(id=execution_id, job_id=task.job_id, task_key=key, engine_id=owner))


def test_recoveries_refund_the_attempt_until_the_recovery_budget_is_spent(
    workspace: Workspace,
) -> None:
    workspace.configure(lease=5.0, max_recoveries=2)
    workspace.submit(
        job_toml("b", [{"id": "t", "max_attempts": 1}, {"id": "u", "depends_on": ["t"]}])
    )
    store = workspace.store()
    engine = workspace.engine()
    engine.register()
    try:
        for round_ in (1, 2, 3):
            _lose_runner(store, "b/t")
            assert recover_tasks(engine.runtime, time.time())
            task = tasks(store)["b/t"]
            assert task.recoveries == round_
            if round_ < 3:  # max_attempts = 1, yet the task is still queued: nothing charged
                assert (task.state, task.attempt) == ("QUEUED", 0)
    finally:
        engine.shutdown(release=True)
    task = tasks(store)["b/t"]
    assert task.state == "FAILED"
    assert task.error is not None
    assert task.error.startswith("recovered 3 times (max_recoveries)")
    assert "silent for" in task.error
    assert tasks(store)["b/u"].blocked_by == "t"
    assert {r.outcome for r in executions(store)} == {"lost"}

"""Jobs an operator can leave alone: one task does not kill a job, a failure waits for the
operator instead of failing the job, and no agent works in relay's own workspace.

Real engines, real sim agents, real git repositories with a bare remote.
"""

from __future__ import annotations

import time

from gitrepos import Repos
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    jobs,
    occupancy_by_events,
    run_until_idle,
    running_engine,
    sim,
    task_state,
    tasks,
    wait_for,
)

from relay_engine.contracts.job_file import load_job_file
from relay_engine.ops.commands import CancelTask, DropTask, Merge, RetryTask
from relay_engine.ops.jobs import submit_job
from relay_engine.store.schema import Task

WORKER = {"id": "worker", "provider": "sim", "roles": ["implementer", "reviewer"]}


def submit(ws: Workspace, text: str) -> None:
    submit_job(ws.store(), load_job_file(ws.write_job(text)), now=time.time())


def test_a_cancelled_optional_task_drops_its_dependents_and_the_job_still_merges(
    workspace: Workspace, repos: Repos
) -> None:
    workspace.configure(git={"check_seconds": 0.2, "remote": "origin"})
    work = [
        {"id": "code", "sim": sim(write_files={"greet.py": "def greet(n): return n\n"})},
        {"id": "extra", "sim": sim(duration=30, write_files={"extra.py": "x = 1\n"})},
        {"id": "extra-docs", "depends_on": ["extra"], "sim": sim()},
    ]
    submit(workspace, job_toml("j", work, repo=str(repos.repo), auto_merge=True))
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: task_state(store, "j/extra") == "RUNNING", what="extra to start")
        engine.submit(CancelTask(task="j/extra"))
        wait_for(lambda: jobs(store)["j"].state == "MERGED", timeout=90, what="the merge")

    states = {t.task_id: t.state for t in tasks(store).values() if t.kind == "work"}
    assert states == {"code": "SUCCEEDED", "extra": "CANCELLED", "extra-docs": "DROPPED"}
    (cancelled,) = events(store, "task.cancelled")
    assert "extra-docs" in cancelled.message  # the dependents it takes with it are named
    assert "greet.py" in repos.remote_files("main")
    assert "extra.py" not in repos.remote_files("main")
    (run,) = [e for e in executions(store) if e.task_key == "j/extra"]
    assert run.outcome == "cancelled"


def test_a_task_failed_for_good_blocks_the_job_until_a_retry_revives_it(
    workspace: Workspace,
) -> None:
    workspace.configure(agents=[WORKER])  # nobody troubleshoots
    work = [
        {"id": "broken", "max_attempts": 1, "sim": sim(fail_attempts=1)},
        {"id": "after", "depends_on": ["broken"], "sim": sim()},
    ]
    submit(workspace, job_toml("j", work))
    store = workspace.store()
    engine = workspace.engine()

    assert run_until_idle(engine) is False
    job = jobs(store)["j"]
    assert job.state == "BLOCKED"
    assert (job.blocked_by or "").startswith("broken failed: ")
    assert "relay retry j/broken" in (job.blocked_by or "")
    assert "troubleshoot" not in " ".join(tasks(store))  # no helper nobody could run

    engine.submit(RetryTask(task="j/broken"))
    assert run_until_idle(workspace.engine()) is True
    assert jobs(store)["j"].state == "SUCCEEDED"
    assert task_state(store, "j/after") == "SUCCEEDED"


def test_a_dropped_task_lets_its_dependents_go_on(workspace: Workspace) -> None:
    workspace.configure(agents=[WORKER])
    work = [
        {"id": "broken", "max_attempts": 1, "sim": sim(fail_attempts=9)},
        {"id": "after", "depends_on": ["broken"], "sim": sim()},
    ]
    submit(workspace, job_toml("j", work))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is False
    assert jobs(store)["j"].state == "BLOCKED"

    engine = workspace.engine()
    engine.submit(DropTask(task="j/broken"))
    assert run_until_idle(engine) is True
    assert (task_state(store, "j/broken"), task_state(store, "j/after")) == (
        "DROPPED",
        "SUCCEEDED",
    )
    assert jobs(store)["j"].state == "SUCCEEDED"


def test_merge_force_merges_what_a_blocked_job_branch_holds(
    workspace: Workspace, repos: Repos
) -> None:
    workspace.configure(agents=[WORKER], git={"check_seconds": 0.2, "remote": "origin"})
    work = [
        {"id": "code", "sim": sim(write_files={"greet.py": "def greet(n): return n\n"})},
        {"id": "broken", "max_attempts": 1, "sim": sim(fail_attempts=9)},
    ]
    submit(workspace, job_toml("j", work, repo=str(repos.repo)))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is False
    assert jobs(store)["j"].state == "BLOCKED"

    engine = workspace.engine()
    engine.submit(Merge(job="j", force=True))
    with running_engine(engine):
        wait_for(lambda: jobs(store)["j"].state == "MERGED", timeout=60, what="the merge")
    assert "greet.py" in repos.remote_files("main")


def test_a_job_without_a_repo_works_in_a_directory_of_its_own(workspace: Workspace) -> None:
    work = [{"id": name, "sim": sim(0.3, write_files={f"{name}.txt": name})} for name in "abc"]
    submit(workspace, job_toml("j", work))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    own = workspace.path / ".relay" / "jobs" / "j" / "work"
    assert {e.task_key: e.cwd for e in executions(store)} == {
        f"j/{name}": str(own / name) for name in "abc"
    }
    assert sorted(str(p.relative_to(own)) for p in own.glob("*/*")) == ["a/a.txt", "b/b.txt",
                                                                       "c/c.txt"]  # fmt: skip
    assert not any((workspace.path / f"{name}.txt").exists() for name in "abc")
    # Scratch folders of their own: the tasks ran side by side, none in another's folder.
    assert occupancy_by_events(events(store)) == {"": 3}


def test_retrying_a_cancelled_task_brings_back_what_was_dropped_with_it(
    workspace: Workspace,
) -> None:
    work = [
        {"id": "first", "sim": sim(duration=30)},
        {"id": "second", "depends_on": ["first"], "sim": sim()},
        {"id": "third", "depends_on": ["second"], "sim": sim()},
    ]
    submit(workspace, job_toml("j", work))
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: task_state(store, "j/first") == "RUNNING", what="first to start")
        engine.submit(CancelTask(task="j/first"))
        wait_for(lambda: task_state(store, "j/third") == "DROPPED", what="the drop")
    assert task_state(store, "j/second") == "DROPPED"

    engine = workspace.engine()
    with store.write() as session:  # the retry runs a quick first
        row = session.get(Task, "j/first")
        assert row is not None
        row.sim = sim()
        session.add(row)
    engine.submit(RetryTask(task="j/first"))
    assert run_until_idle(engine) is True
    assert [task_state(store, f"j/{t}") for t in ("first", "second", "third")] == ["SUCCEEDED"] * 3

"""Blockers a planner declares: a child of its round waits on another job's task, or on that
job's merge, like any wait across jobs; and a blocker that would close a circle is refused."""

from __future__ import annotations

from typing import Any

from gitrepos import Repos
from helpers import Workspace, events, job_toml, run_until_idle, sim, tasks
from sqlmodel import select
from test_planning_engine import plan_of, planned_job, work
from test_pull_requests import greet_job, state, submit

from relay_engine.store.schema import Plan

DONE = plan_of(status="satisfied")


def blocked_plan(on: str) -> dict[str, Any]:
    return {**plan_of(work("use")), "blockers": [{"task": "use", "on": on}]}


def started(ws: Workspace, key: str) -> float:
    (event,) = [e for e in events(ws.store(), "task.started") if e.task_key == key]
    return event.at


def test_a_planned_task_waits_on_another_jobs_task_until_it_succeeds(
    workspace: Workspace,
) -> None:
    workspace.submit(job_toml("lib", [{"id": "api", "input": "api", "sim": sim(0.6)}]), "lib.toml")
    workspace.submit(planned_job("app", {"1": blocked_plan("lib/api"), "2": DONE}), "app.toml")

    assert run_until_idle(workspace.engine()) is True

    done = tasks(workspace.store())
    assert done["app/use"].external_deps == ["lib/api"]
    assert done["app/use"].finished_at and done["lib/api"].finished_at
    assert started(workspace, "app/use") >= done["lib/api"].finished_at


def test_a_planned_task_waits_on_another_jobs_merge_and_starts_once_it_merges(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    ws.configure(git={"remote": "origin", "check_seconds": 0.2})
    submit(ws, greet_job(repos, job_id="lib"))  # reviewed, then READY: it waits for relay merge
    submit(ws, planned_job("app", {"1": blocked_plan("lib"), "2": DONE}))

    run_until_idle(ws.engine(), timeout=120)

    assert state(ws.store(), "lib") == "READY"
    assert tasks(ws.store())["app/use"].state == "DRAFT"
    status = {t["key"]: t for t in ws.status()["tasks"]}
    assert status["app/use"]["dependencies"] == ["job lib"]  # shown as the wait it is

    merged = ws.cli("merge", "lib")
    assert merged.returncode == 0, merged.stderr
    assert run_until_idle(ws.engine(), timeout=120) is True

    assert state(ws.store(), "lib") == "MERGED"
    assert tasks(ws.store())["app/use"].state == "SUCCEEDED"
    (merge,) = events(ws.store(), "pr.merged")
    assert started(ws, "app/use") >= merge.at


def test_a_blocker_that_closes_a_circle_is_refused_with_its_path(workspace: Workspace) -> None:
    # lib runs only after app; app's planner makes its child wait on lib's task: a circle
    workspace.submit(planned_job("app", {"1": blocked_plan("lib/api")}), "app.toml")
    workspace.submit(
        job_toml("lib", [{"id": "api", "input": "api", "sim": sim()}], after=["app"]), "lib.toml"
    )

    run_until_idle(workspace.engine())

    rejected = events(workspace.store(), "plan.rejected")
    assert rejected, "the plan was accepted"
    assert "blockers[0].on: cycle across jobs: app/use -> lib/api -> job app" in rejected[0].message
    assert "app/use" not in tasks(workspace.store())
    with workspace.store().read() as session:
        (plan,) = session.exec(select(Plan)).all()
    assert plan.status == "FAILED"


def test_a_blocker_on_nothing_that_exists_is_refused(workspace: Workspace) -> None:
    workspace.submit(planned_job("app", {"1": blocked_plan("ghost/api")}), "app.toml")
    run_until_idle(workspace.engine())
    (first, *_) = events(workspace.store(), "plan.rejected")
    assert "blockers[0].on: job 'ghost' has no task 'api'" in first.message

"""Jobs that wait on jobs (``after``) and tasks that wait on other jobs' tasks."""

from __future__ import annotations

import pytest
from helpers import Workspace, events, job_toml, jobs, run_until_idle, sim, tasks


def started(ws: Workspace, key: str) -> float:
    (event,) = [e for e in events(ws.store(), "task.started") if e.task_key == key]
    return event.at


def finished(ws: Workspace, key: str) -> float:
    task = tasks(ws.store())[key]
    assert task.finished_at is not None, f"{key} did not finish"
    return task.finished_at


@pytest.mark.slow
def test_a_job_after_another_runs_only_once_that_job_is_done(workspace: Workspace) -> None:
    workspace.submit(job_toml("a", [{"id": "x", "input": "first", "sim": sim(0.4)}]), "a.toml")
    workspace.submit(
        job_toml("b", [{"id": "y", "input": "second", "sim": sim(0.05)}], after=["a"]), "b.toml"
    )
    assert workspace.status()["jobs"][1]["state"] == "DRAFT"
    assert run_until_idle(workspace.engine()) is True
    assert started(workspace, "b/y") >= finished(workspace, "a/x")
    assert [e.message for e in events(workspace.store(), "job.started")] == [
        "job b started: a done"
    ]


@pytest.mark.slow
def test_a_failed_upstream_blocks_the_waiting_job_with_its_name(workspace: Workspace) -> None:
    failing = {"id": "x", "input": "breaks", "max_attempts": 1, "sim": sim(exit_code=2)}
    workspace.submit(job_toml("a", [failing]), "a.toml")
    workspace.submit(job_toml("b", [{"id": "y", "input": "never"}], after=["a"]), "b.toml")
    assert run_until_idle(workspace.engine()) is False
    b = jobs(workspace.store())["b"]
    assert (b.state, b.blocked_by) == ("DRAFT", "job a blocked")  # a waits on its operator
    assert tasks(workspace.store())["b/y"].state == "DRAFT"
    assert "executions" not in str(workspace.cli("status", "b").stdout)
    retried = workspace.cli("retry", "a/x")
    assert retried.returncode == 0, retried.stderr
    engine = workspace.engine()
    engine.tick()
    assert jobs(workspace.store())["b"].blocked_by is None  # waiting on a again, not blocked


@pytest.mark.slow
def test_a_task_waits_on_another_jobs_task(workspace: Workspace) -> None:
    workspace.submit(
        job_toml(
            "lib",
            [
                {"id": "api", "input": "api", "sim": sim(0.4)},
                {"id": "docs", "input": "docs", "sim": sim(1.5)},
            ],
        ),
        "lib.toml",
    )
    workspace.submit(
        job_toml(
            "app",
            [
                {"id": "prep", "input": "prep", "sim": sim(0.05)},
                {"id": "use", "input": "use", "depends_on": ["prep", "lib/api"], "sim": sim(0.05)},
            ],
        ),
        "app.toml",
    )
    assert run_until_idle(workspace.engine()) is True
    assert started(workspace, "app/use") >= finished(workspace, "lib/api")
    assert started(workspace, "app/use") < finished(workspace, "lib/docs")  # not the whole job
    status = {t["key"]: t for t in workspace.status()["tasks"]}
    assert status["app/use"]["dependencies"] == ["prep", "lib/api"]


@pytest.mark.slow
def test_another_jobs_failed_task_blocks_and_its_retry_unblocks(workspace: Workspace) -> None:
    workspace.submit(
        job_toml("lib", [{"id": "api", "input": "x", "max_attempts": 1, "sim": sim(exit_code=1)}]),
        "lib.toml",
    )
    workspace.submit(
        job_toml(
            "app",
            [
                {"id": "use", "input": "x", "depends_on": ["lib/api"]},
                {"id": "ship", "input": "x", "depends_on": ["use"]},
            ],
        ),
        "app.toml",
    )
    run_until_idle(workspace.engine())
    app = tasks(workspace.store())
    assert (app["app/use"].blocked_by, app["app/ship"].blocked_by) == ("lib/api", "lib/api")
    workspace.cli("retry", "lib/api")
    workspace.engine().tick()
    app = tasks(workspace.store())
    assert (app["app/use"].blocked_by, app["app/ship"].blocked_by) == (None, None)


def submit_files(ws: Workspace, *texts: str) -> object:
    paths = [str(ws.write_job(text, f"job{i}.toml")) for i, text in enumerate(texts)]
    return ws.cli("submit", *paths)


def test_a_cycle_across_jobs_is_refused_at_submit_with_its_path(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace
    a = job_toml("a", [{"id": "x", "input": "x", "depends_on": ["b/y"]}])
    b = job_toml("b", [{"id": "y", "input": "y"}], after=["a"])
    result = submit_files(ws, a, b)
    assert result.returncode == 2
    assert "job0.toml: tasks[0] (x).depends_on: cycle across jobs: " in result.stderr
    assert "job a -> a/x -> b/y -> job a" in result.stderr
    assert ws.status()["jobs"] == []  # nothing of the batch was stored


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job", "message"),
    [
        (
            job_toml("b", [{"id": "y", "input": "y"}], after=["ghost"]),
            "job.after[0]: unknown job 'ghost'",
        ),
        (job_toml("b", [{"id": "y", "input": "y"}], after=["b"]), "a job cannot wait on itself"),
        (
            job_toml("b", [{"id": "y", "input": "y", "depends_on": ["a/nope"]}]),
            "tasks[0] (y).depends_on: job 'a' has no task 'nope'",
        ),
        (
            job_toml("b", [{"id": "y", "input": "y", "depends_on": ["ghost/t"]}]),
            "depends on task 'ghost/t' of unknown job 'ghost'",
        ),
        (
            job_toml(
                "b", [{"id": "y", "input": "y"}, {"id": "z", "input": "z", "depends_on": ["b/y"]}]
            ),
            "'b/y' is in this job: write it as 'y'",
        ),
        (
            job_toml("b", [{"id": "y", "input": "y", "depends_on": ["a/x/z"]}]),
            "'a/x/z' is not JOB/TASK",
        ),
    ],
)
def test_bad_references_to_other_jobs_name_the_field(
    sqlite_workspace: Workspace, job: str, message: str
) -> None:
    ws = sqlite_workspace
    ws.submit(job_toml("a", [{"id": "x", "input": "x"}]), "a.toml")
    result = submit_files(ws, job)
    assert result.returncode == 2
    assert message in result.stderr

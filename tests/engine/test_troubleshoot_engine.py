"""Troubleshooters: a task that used its attempts gets one agent's verdict before the job gives up."""

from __future__ import annotations

from pathlib import Path

from helpers import Workspace, events, executions, job_toml, jobs, run_until_idle, sim, tasks
from test_planning_engine import DONE, plan_of, planned_job, plans, work

GUIDANCE = "Pass --legacy-peer-deps; the lockfile predates npm 7."


def answer(verdict: str, **extra: object) -> dict:
    return {"duration": 0.05, "lines": 1, "result": {"verdict": verdict, **extra}}


def flaky(attempts_failing: int, troubleshooter: dict | None, **extra: object) -> dict:
    """Fails its first attempts (with a line on stderr), then works."""
    script = sim(fail_attempts=attempts_failing, **extra)
    if troubleshooter is not None:
        script["troubleshooter"] = troubleshooter
    return script


def prompt_of(ws: Workspace, task_key: str, attempt: int = -1) -> str:
    runs = sorted(
        (e for e in executions(ws.store()) if e.task_key == task_key), key=lambda e: e.attempt
    )
    assert runs[attempt].artifact_dir, f"{task_key} has no artifacts"
    return (Path(runs[attempt].artifact_dir) / "prompt.md").read_text()


def test_retry_verdict_gives_fresh_attempts_with_the_guidance(workspace: Workspace) -> None:
    build = {
        "id": "build",
        "input": "npm install",
        "max_attempts": 2,
        "sim": flaky(2, answer("retry", guidance=GUIDANCE, reason="peer deps")),
    }
    workspace.submit(job_toml("ts", [build, {"id": "ship", "input": "x", "depends_on": ["build"]}]))
    assert run_until_idle(workspace.engine()) is True
    state = tasks(workspace.store())
    assert state["ts/build"].state == "SUCCEEDED"
    assert state["ts/build"].attempt == 3
    assert state["ts/ship"].state == "SUCCEEDED"
    assert state["ts/build.troubleshoot"].parent_key == "ts/build"
    assert GUIDANCE in prompt_of(workspace, "ts/build")
    brief = prompt_of(workspace, "ts/build.troubleshoot")
    assert "## The failed task: ts/build" in brief
    assert "simulated failure of ts/build on attempt 2" in brief  # the stderr tail
    assert '"verdict": "retry" | "replan" | "give_up"' in brief
    assert [
        e.kind for e in events(workspace.store(), "task.troubleshooting", "task.troubleshot")
    ] == [
        "task.troubleshooting",
        "task.troubleshot",
    ]


def test_give_up_fails_the_task_with_the_reason(workspace: Workspace) -> None:
    build = {
        "id": "build",
        "input": "x",
        "max_attempts": 1,
        "sim": flaky(5, answer("give_up", reason="the registry is gone")),
    }
    workspace.submit(job_toml("ts", [build, {"id": "ship", "input": "x", "depends_on": ["build"]}]))
    assert run_until_idle(workspace.engine()) is False
    state = tasks(workspace.store())
    assert state["ts/build"].state == "FAILED"
    assert "troubleshooter gave up: the registry is gone" in (state["ts/build"].error or "")
    assert state["ts/ship"].blocked_by == "build"
    assert jobs(workspace.store())["ts"].state == "BLOCKED"  # the operator can still save it


def test_a_failing_troubleshooter_means_give_up_without_a_loop(workspace: Workspace) -> None:
    broken = {"duration": 0.05, "lines": 1, "exit_code": 4}
    retry_forever = answer("retry", guidance="try again")
    build = {"id": "build", "input": "x", "max_attempts": 1, "sim": flaky(9, broken)}
    other = {"id": "other", "input": "x", "max_attempts": 1, "sim": flaky(9, retry_forever)}
    workspace.submit(job_toml("ts", [build, other]))
    assert run_until_idle(workspace.engine()) is False
    state = tasks(workspace.store())
    assert "its troubleshooter failed" in (state["ts/build"].error or "")
    # retried once on the troubleshooter's word, failed again: no second troubleshooter
    assert state["ts/other"].state == "FAILED"
    assert state["ts/other"].attempt == 2
    helpers = [key for key in state if key.endswith(".troubleshoot")]
    assert sorted(helpers) == ["ts/build.troubleshoot", "ts/other.troubleshoot"]


def test_an_unusable_answer_is_give_up_with_why(workspace: Workspace) -> None:
    mumbles = {"duration": 0.05, "lines": 1, "result": {"summary": "I looked at it"}}
    workspace.submit(
        job_toml("ts", [{"id": "b", "input": "x", "max_attempts": 1, "sim": flaky(9, mumbles)}])
    )
    run_until_idle(workspace.engine())
    assert "answer was unusable: verdict: Field required" in (
        tasks(workspace.store())["ts/b"].error or ""
    )


def test_troubleshoot_false_fails_at_once(workspace: Workspace) -> None:
    workspace.submit(
        job_toml(
            "ts",
            [{"id": "b", "input": "x", "max_attempts": 1, "sim": sim(exit_code=1)}],
            troubleshoot=False,
        )
    )
    run_until_idle(workspace.engine())
    assert list(tasks(workspace.store())) == ["ts/b"]


def test_replan_verdict_starts_a_planner_round_with_the_guidance(workspace: Workspace) -> None:
    failing = work("a")
    failing["max_attempts"] = 1
    failing["sim"] = flaky(9, answer("replan", guidance="split a into two smaller tasks"))
    workspace.submit(planned_job("auto", {"1": plan_of(failing), "2": DONE}))
    assert run_until_idle(workspace.engine()) is True
    rounds = plans(workspace.store(), "auto")
    assert [(p.round, p.trigger) for p in rounds][-1] == (2, "troubleshoot")
    assert rounds[-1].guidance == "split a into two smaller tasks"

"""Autonomous jobs end to end: planner rounds, waves, replan, wave gates, recovery.

The planner is the sim agent: the job's ``sim`` table scripts it, and ``results_by_round``
("1", or "1.2" for round 1 attempt 2) is what it answers in each round.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    Workspace,
    events,
    executions,
    init_repo,
    job_toml,
    jobs,
    pid_gone,
    run_until_idle,
    running_engine,
    sim,
    stop_process,
    task_state,
    tasks,
    wait_for,
)
from sqlmodel import select

import relay_engine.loop.engine as engine_module
from relay_engine.loop.engine import Engine
from relay_engine.ops import commands
from relay_engine.ops.commands import ApproveWave, InstallPlan, Replan
from relay_engine.store import feed
from relay_engine.store.db import Store
from relay_engine.store.feed import FeedMark
from relay_engine.store.schema import Command, Execution, Job, Plan


def planned_job(
    job_id: str, rounds: dict[str, Any], planner_duration: float = 0.1, **job: Any
) -> str:
    planner = {"duration": planner_duration, "lines": 1, "results_by_round": rounds}
    return job_toml(
        job_id, [], mode="autonomous", objective=f"objective of {job_id}", sim=planner, **job
    )


def plan_of(*next_tasks: dict[str, Any], status: str = "in_progress") -> dict[str, Any]:
    return {
        "objective_status": status,
        "assessment": "so far so good",
        "next_tasks": list(next_tasks),
    }


def work(task_id: str, *deps: str, duration: float = 0.1) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": f"do {task_id}",
        "dependencies": list(deps),
        "sim": sim(duration),
    }


DONE = plan_of(status="satisfied")


def plans(store: Any, job_id: str) -> list[Plan]:
    with store.read() as session:
        query = select(Plan).where(Plan.job_id == job_id).order_by(Plan.round)
        return list(session.exec(query))


def planner_runs(store: Any, plan_id: int | None) -> list[Execution]:
    runs = [e for e in executions(store) if e.plan_id == plan_id]
    return sorted(runs, key=lambda e: e.started_at or 0)


def prompt_of(run: Execution) -> str:
    assert run.artifact_dir, f"execution {run.id} has no artifact dir"
    return (Path(run.artifact_dir) / "prompt.md").read_text(encoding="utf-8")


def job_state(store: Any, job_id: str) -> str:
    return jobs(store)[job_id].state


def test_autonomous_job_plans_waves_then_continues_until_satisfied(workspace: Workspace) -> None:
    workspace.submit(
        planned_job(
            "auto",
            {
                "1": plan_of(work("a"), work("b", "a")),
                "2": plan_of(work("c", "b")),
                "3": DONE,
            },
        )
    )
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True

    rounds = plans(store, "auto")
    assert [(p.round, p.trigger, p.status) for p in rounds] == [
        (1, "initial", "SUCCEEDED"),
        (2, "continuation", "SUCCEEDED"),
        (3, "continuation", "SUCCEEDED"),
    ]
    assert [p.objective_status for p in rounds] == ["in_progress", "in_progress", "satisfied"]
    assert [p.generated_task_ids for p in rounds] == [["a", "b"], ["c"], []]
    assert all(p.children_stored for p in rounds[:2])
    final = tasks(store)
    assert {k: (t.state, t.wave) for k, t in final.items()} == {
        "auto/a": ("SUCCEEDED", 1),
        "auto/b": ("SUCCEEDED", 2),
        "auto/c": ("SUCCEEDED", 3),
    }
    assert final["auto/c"].plan_id == rounds[1].id
    assert job_state(store, "auto") == "SUCCEEDED"
    assert [len(planner_runs(store, p.id)) for p in rounds] == [1, 1, 1]
    # a continuation round is planned after the previous round's work is done
    started = [e for e in events(store) if e.kind in ("plan.started", "task.succeeded")]
    assert [e.task_key or f"plan {e.plan_id}" for e in started] == [
        f"plan {rounds[0].id}",
        "auto/a",
        "auto/b",
        f"plan {rounds[1].id}",
        "auto/c",
        f"plan {rounds[2].id}",
    ]


def test_planner_attempts_are_numbered_from_one(workspace: Workspace) -> None:
    workspace.submit(planned_job("num", {"1": DONE}))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True
    (plan,) = plans(store, "num")
    (run,) = planner_runs(store, plan.id)
    assert (plan.attempt, run.attempt) == (1, 1)
    packet = json.loads((Path(run.artifact_dir or "") / "prompt-packet.json").read_text())
    assert packet["env"]["RELAY_ATTEMPT"] == "1"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("invalid", "reason"),
    [
        ({"assessment": "forgot the status", "next_tasks": [work("a")]}, "objective_status"),
        (plan_of(work("a", "ghost")), "unknown task 'ghost'"),
    ],
    ids=["missing-objective-status", "unknown-dependency"],
)
def test_invalid_planner_output_is_retried_with_the_reason(
    workspace: Workspace, invalid: dict[str, Any], reason: str
) -> None:
    workspace.submit(planned_job("retry", {"1.1": invalid, "1.2": plan_of(work("a")), "2": DONE}))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True

    first = plans(store, "retry")[0]
    assert (first.status, first.attempt, first.generated_task_ids) == ("SUCCEEDED", 2, ["a"])
    (rejected,) = events(store, "plan.rejected")
    assert reason in rejected.message
    runs = planner_runs(store, first.id)
    assert [(r.attempt, r.outcome) for r in runs] == [(1, "succeeded"), (2, "succeeded")]
    assert "rejected" not in prompt_of(runs[0])
    retry_prompt = prompt_of(runs[1])
    assert "Your previous output was rejected" in retry_prompt
    assert reason in retry_prompt
    assert task_state(store, "retry/a") == "SUCCEEDED"
    assert job_state(store, "retry") == "SUCCEEDED"


def test_cyclic_plan_is_rejected_until_the_job_fails(workspace: Workspace) -> None:
    workspace.submit(planned_job("cyc", {"1": plan_of(work("a", "b"), work("b", "a"))}))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is False

    (plan,) = plans(store, "cyc")
    assert (plan.status, plan.attempt) == ("FAILED", 3)
    assert "a -> b -> a" in (plan.rejection or "")
    assert "a -> b -> a" in (plan.error or "")
    rejected = events(store, "plan.rejected")
    assert len(rejected) == 2 and all("a -> b -> a" in e.message for e in rejected)
    assert len(planner_runs(store, plan.id)) == 3
    job = jobs(store)["cyc"]
    assert job.state == "BLOCKED"  # a replan with guidance can still save it
    assert "planner round failed" in (job.blocked_by or "")
    assert f"relay replan {job.id}" in (job.blocked_by or "")
    assert "a -> b -> a" in (job.blocked_by or "")
    assert tasks(store) == {}


@pytest.mark.slow
def test_replan_mid_wave_supersedes_unstarted_tasks_and_keeps_finished_ones(
    workspace: Workspace,
) -> None:
    workspace.configure(capacity=1)
    guidance = "drop the report; add an export step instead"
    workspace.submit(
        planned_job(
            "rp",
            {
                "1": plan_of(
                    work("a"),
                    work("b1", "a", duration=2.5),
                    work("b2", "a"),
                    work("report", "b1", "b2"),
                ),
                "2": plan_of(work("export", "b1")),
                "3": DONE,
            },
        )
    )
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(
            lambda: (
                task_state(store, "rp/b1") == "RUNNING" and task_state(store, "rp/b2") == "QUEUED"
            ),
            what="b1 running while b2 waits for the only slot",
        )
        engine.submit(Replan(job="rp", guidance=guidance))
        wait_for(lambda: job_state(store, "rp") != "ACTIVE", timeout=30, what="job done")

    rounds = plans(store, "rp")
    assert [(p.round, p.trigger, p.status) for p in rounds] == [
        (1, "initial", "SUPERSEDED"),
        (2, "manual", "SUCCEEDED"),
        (3, "continuation", "SUCCEEDED"),
    ]
    assert rounds[1].guidance == guidance
    final = tasks(store)
    assert {k: t.state for k, t in final.items()} == {
        "rp/a": "SUCCEEDED",
        "rp/b1": "SUCCEEDED",  # already running: it ran on
        "rp/b2": "CANCELLED",
        "rp/report": "CANCELLED",
        "rp/export": "SUCCEEDED",
    }
    assert final["rp/b2"].error == "superseded by plan 2"
    assert final["rp/report"].error == "superseded by plan 2"
    assert final["rp/export"].plan_id == rounds[1].id
    assert job_state(store, "rp") == "SUCCEEDED"
    (replanner,) = planner_runs(store, rounds[1].id)
    prompt = prompt_of(replanner)
    assert guidance in prompt
    assert "Trigger: manual" in prompt


def test_operator_gate_holds_the_next_wave_until_approved(workspace: Workspace) -> None:
    workspace.submit(
        planned_job(
            "gate", {"1": plan_of(work("a"), work("b", "a")), "2": DONE}, wave_gate="operator"
        )
    )
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: task_state(store, "gate/a") == "SUCCEEDED", what="wave 1 done")
        time.sleep(0.5)  # ten ticks: room for the engine to (wrongly) start wave 2
        held = tasks(store)["gate/b"]
        assert (held.state, held.wave) == ("DRAFT", 2)
        assert [e for e in executions(store) if e.task_key == "gate/b"] == []
        assert job_state(store, "gate") == "ACTIVE"
        engine.submit(ApproveWave(job="gate"))
        wait_for(lambda: job_state(store, "gate") != "ACTIVE", timeout=10, what="job done")

    assert task_state(store, "gate/b") == "SUCCEEDED"
    assert job_state(store, "gate") == "SUCCEEDED"
    (approved,) = events(store, "wave.approved")  # one approval releases wave 2
    assert approved.data == {"wave": 2}
    b_started = [e.id for e in events(store, "task.started") if e.task_key == "gate/b"]
    assert approved.id is not None and b_started and approved.id < b_started[0]


def test_the_planner_reads_the_job_branch_at_its_head_and_changes_nothing(
    workspace: Workspace, tmp_path: Path
) -> None:
    from gitrepos import git

    repo = init_repo(tmp_path / "repo")
    seen = tmp_path / "seen.jsonl"
    a = {**work("a"), "sim": sim(0.05, write_files={"a.txt": "from a\n"})}
    planner = {"duration": 0.05, "lines": 1, "results_by_round": {"1": plan_of(a), "2": DONE},
               "record_cwd": str(seen), "write_files": {"scribble.txt": "planner\n"}}  # fmt: skip
    workspace.submit(
        job_toml("look", [], mode="autonomous", objective="o", repo=str(repo), sim=planner)
    )
    run_until_idle(workspace.engine())

    rounds = [json.loads(line) for line in seen.read_text().splitlines()]
    tree = str(workspace.path / ".relay" / "worktrees" / "look" / "_plan")
    assert [(r["round"], r["cwd"]) for r in rounds] == [("1", tree), ("2", tree)]
    assert "a.txt" not in rounds[0]["files"] and "README.md" in rounds[0]["files"]
    assert "a.txt" in rounds[1]["files"]  # round 2 reads what round 1's work merged
    on_branch = git(repo, "ls-tree", "--name-only", "relay/look").split()
    assert "a.txt" in on_branch and "scribble.txt" not in on_branch


def test_a_plan_naming_an_agent_nobody_has_is_refused_with_the_reason(
    workspace: Workspace,
) -> None:
    ghost = {**work("a"), "agent": "ghost"}
    rounds = {"1.1": plan_of(ghost), "1.2": plan_of(work("a")), "2": DONE}
    workspace.submit(planned_job("who", rounds))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    first, second = planner_runs(store, plans(store, "who")[0].id)
    assert "## Agents" in prompt_of(first)
    assert "- `sim` (sim): planner, implementer, reviewer" in prompt_of(first)
    assert "unknown agent 'ghost' (known agents: sim)" in prompt_of(second)
    assert task_state(store, "who/a") == "SUCCEEDED"


def assessed_job(job_id: str, answers: dict[str, Any]) -> str:
    rounds = {"1": plan_of(work("a"), work("b", "a")), "2": DONE}
    planner = {"duration": 0.05, "lines": 1, "results_by_round": rounds}
    planner["assessor"] = {"duration": 0.05, "results_by_attempt": answers}
    return job_toml(job_id, [], mode="autonomous", objective="o", wave_gate="assess", sim=planner)


GOOD_VERDICT = {"decision": "continue", "summary": "on track"}


def test_an_unusable_assessment_is_retried_with_the_reason(workspace: Workspace) -> None:
    workspace.submit(assessed_job("gate", {"1": {"decision": "garbage"}, "2": GOOD_VERDICT}))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    first, second = sorted(
        (e for e in executions(store) if e.task_key == "gate/assess-wave-1"),
        key=lambda e: e.attempt,
    )
    assert first.outcome == "failed" and "assessor answer rejected" in (first.error or "")
    assert "decision" in (first.error or "")
    assert "assessor answer rejected" in prompt_of(second)  # the retry is told what was wrong
    assert task_state(store, "gate/b") == "SUCCEEDED"


def test_an_assessment_unusable_after_its_retries_holds_the_gate_until_approved(
    workspace: Workspace,
) -> None:
    garbage = {str(n): {"decision": "garbage"} for n in range(1, 10)}
    workspace.submit(assessed_job("gate", garbage))
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: events(store, "gate.held"), what="the gate to hold")
        time.sleep(0.5)  # ten ticks: room for the engine to (wrongly) start wave 2
        assert task_state(store, "gate/b") == "DRAFT"
        assert [e for e in executions(store) if e.task_key == "gate/b"] == []
        assert task_state(store, "gate/assess-wave-1") == "FAILED"
        assert events(store, "task.troubleshooting") == []  # the gate holds; no helper
        (held,) = events(store, "gate.held")
        assert "wave 2 held" in held.message and "relay approve gate" in held.message
        assert engine.is_idle("none") and not engine.is_idle("all")
        engine.submit(ApproveWave(job="gate"))
        wait_for(lambda: job_state(store, "gate") != "ACTIVE", timeout=20, what="job done")

    assert task_state(store, "gate/b") == "SUCCEEDED"
    assert task_state(store, "gate/assess-wave-1") == "DROPPED"
    assert job_state(store, "gate") == "SUCCEEDED"


def test_manual_plan_is_installed_and_materialised(workspace: Workspace) -> None:
    workspace.submit(planned_job("man", {"2": DONE}))
    store = workspace.store()
    engine = workspace.engine()
    command_id = engine.submit(
        InstallPlan(job="man", plan=plan_of(work("x"), work("y", "x")), guidance="by hand")
    )
    assert run_until_idle(engine) is True

    with store.read() as session:
        command = session.get(Command, command_id)
        assert command is not None and command.outcome is not None
        assert "refused" not in command.outcome, command.outcome
    rounds = plans(store, "man")
    assert [(p.round, p.source, p.trigger, p.status) for p in rounds] == [
        (1, "manual", "manual", "SUCCEEDED"),
        (2, "model-planner", "continuation", "SUCCEEDED"),
    ]
    assert planner_runs(store, rounds[0].id) == []  # nobody planned round 1 but the operator
    final = tasks(store)
    assert {k: (t.state, t.wave, t.plan_id) for k, t in final.items()} == {
        "man/x": ("SUCCEEDED", 1, rounds[0].id),
        "man/y": ("SUCCEEDED", 2, rounds[0].id),
    }
    assert job_state(store, "man") == "SUCCEEDED"


# -- a planner whose engine dies --------------------------------------------------------------
def _slow_planner_running(store: Any) -> Execution | None:
    """The round-1 planner execution once its process has started."""
    with store.read() as session:
        plan = session.exec(select(Plan).where(Plan.job_id == "kill")).first()
        if plan is None or plan.status != "PLANNING" or plan.execution_id is None:
            return None
        run = session.get(Execution, plan.execution_id)
    return run if run is not None and run.pgid else None


def _make_planner_fast(store: Any) -> None:
    """The retry should not wait out the slow script (the operator edited the job's sim)."""
    with store.write() as session:
        job = session.get(Job, "kill")
        assert job is not None and job.sim is not None
        job.sim = {**job.sim, "duration": 0.1}
        session.add(job)


def _kill_group(pgid: int | None) -> None:
    """Test cleanup: the sim planner we started through the killed engine."""
    if pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def test_planner_of_a_killed_engine_is_recovered_without_duplicate_children(
    workspace: Workspace,
) -> None:
    workspace.configure(lease=2.0, heartbeat=0.5)
    rounds = {"1": plan_of(work("a"), work("b", "a"), work("c", "a")), "2": DONE}
    workspace.submit(planned_job("kill", rounds, planner_duration=30))
    store = workspace.store()
    proc = workspace.popen("run", "--quiet")
    orphan = None
    try:
        orphan = wait_for(lambda: _slow_planner_running(store), what="slow planner started")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # Its supervisor saw the engine die and took the planner down with it.
        wait_for(lambda: pid_gone(orphan.pid or 0), timeout=15, what="the planner to stop")
        _make_planner_fast(store)
        # The dead engine's 2 s lease stays in the database; the survivor renews a longer
        # one, which a loaded CI runner cannot let lapse into a third, released, run.
        workspace.configure(lease=15.0, heartbeat=0.5)
        assert run_until_idle(workspace.engine()) is True
    finally:
        stop_process(proc)
        if orphan is not None:
            _kill_group(orphan.pgid)

    all_rounds = plans(store, "kill")
    assert [(p.round, p.status) for p in all_rounds] == [(1, "SUCCEEDED"), (2, "SUCCEEDED")]
    runs = planner_runs(store, all_rounds[0].id)
    assert [(r.id, r.outcome) for r in runs] == [(orphan.id, "lost"), (runs[1].id, "succeeded")]
    assert "orphaned" in (runs[0].error or "")
    (recovered,) = events(store, "plan.recovered")
    assert "orphaned" in recovered.message
    assert not events(store, "plan.rejected")
    # The engine's death was not the planner's fault: its attempt was refunded.
    assert (all_rounds[0].attempt, all_rounds[0].recoveries) == (1, 1)
    assert len(events(store, "plan.materialised")) == 2
    children = [t.task_id for t in tasks(store).values()]
    assert Counter(children) == {"a": 1, "b": 1, "c": 1}
    assert {t.state for t in tasks(store).values()} == {"SUCCEEDED"}
    assert job_state(store, "kill") == "SUCCEEDED"


def test_recovery_stops_the_orphaned_planner_process(workspace: Workspace) -> None:
    workspace.configure(lease=2.0, heartbeat=0.5)
    workspace.submit(planned_job("kill", {"1": plan_of(work("a")), "2": DONE}, planner_duration=30))
    store = workspace.store()
    proc = workspace.popen("run", "--quiet")
    orphan = None
    try:
        orphan = wait_for(lambda: _slow_planner_running(store), what="slow planner started")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        _make_planner_fast(store)
        assert run_until_idle(workspace.engine()) is True
        assert pid_gone(orphan.pid or 0), "the orphaned planner is still running"
    finally:
        stop_process(proc)
        if orphan is not None:
            _kill_group(orphan.pgid)


def test_live_engine_renews_its_planner_lease(workspace: Workspace) -> None:
    workspace.configure(lease=1.0, heartbeat=0.2)
    workspace.submit(planned_job("lease", {"1": DONE}, planner_duration=3))
    store = workspace.store()

    def lease() -> float | None:
        with store.read() as session:
            plan = session.exec(select(Plan).where(Plan.job_id == "lease")).first()
        return plan.lease_expires_at if plan is not None and plan.execution_id else None

    with running_engine(workspace.engine()):
        first = wait_for(lease, what="planner claimed")
        # the planner runs 3 s on a 1 s lease: a live engine must keep pushing it forward
        wait_for(
            lambda: (value := lease()) is not None and value > first + 0.5,
            timeout=2.5,
            what="the planner's lease to be renewed while it runs",
        )


def test_replanning_a_manual_job_hands_it_to_the_planner_which_can_rerun_superseded_tasks(
    workspace: Workspace,
) -> None:
    """A manual job has tasks but no objective status: the planner is told so, may list
    the tasks the replan superseded in ``unblocks`` to run them again, and the job ends."""
    rounds = {
        "1": {"objective_status": "in_progress", "assessment": "rerun b", "unblocks": ["b"]},
        "2": plan_of(status="satisfied"),
    }
    planner = {"duration": 0.1, "lines": 1, "results_by_round": rounds}
    given = [
        {"id": "a", "title": "do a", "sim": sim(1.5)},
        {"id": "b", "title": "do b", "depends_on": ["a"], "sim": sim(0.1)},
    ]
    workspace.submit(job_toml("hand", given, title="Handmade", sim=planner))
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: task_state(store, "hand/a") == "RUNNING", what="a running")
        engine.submit(Replan(job="hand", guidance="keep b"))
        wait_for(lambda: job_state(store, "hand") != "ACTIVE", timeout=30, what="job done")

    assert job_state(store, "hand") == "SUCCEEDED"
    final = {k: t.state for k, t in tasks(store).items()}
    assert final == {"hand/a": "SUCCEEDED", "hand/b": "SUCCEEDED"}
    assert [e.message for e in events(store, "task.cancelled")] == [
        "hand/b cancelled: superseded by plan 1"
    ]
    assert any("by planner round 1" in e.message for e in events(store, "task.retried"))
    first = plans(store, "hand")[0]
    prompt = prompt_of(planner_runs(store, first.id)[0])
    assert "A job written by hand" in prompt
    assert "Finish the job “Handmade”" in prompt


def _wave_one_done_behind_a_gate(workspace: Workspace) -> tuple[Store, Engine, FeedMark]:
    """An engine that ran wave 1 of an operator-gated job; the feed's end before its next look."""
    workspace.submit(
        planned_job(
            "gate", {"1": plan_of(work("a"), work("b", "a")), "2": DONE}, wave_gate="operator"
        )
    )
    store = workspace.store()
    engine = workspace.engine()
    deadline = time.monotonic() + 30
    while not (task_state(store, "gate/a") == "SUCCEEDED" and engine.is_idle("none")):
        assert time.monotonic() < deadline, "wave 1 never finished"
        engine.tick()
        time.sleep(0.05)
    with store.read() as session:
        return store, engine, feed.end(session, time.time())


def _approve_as_the_cli_does(store: Store) -> None:
    """`relay approve` applies its command itself, not through an engine."""
    commands.enqueue(store, ApproveWave(job="gate"))
    commands.apply_pending(store, "cli", time.time())


def test_an_approval_landing_after_the_ticks_look_keeps_an_until_idle_run_going(
    workspace: Workspace,
) -> None:
    """`relay approve` applies its command itself: it can land after a tick promoted what was
    ready (wave 2 still held) and before the idle check, which then finds no wait left and
    nothing queued. The run must look again, not exit with wave 2 never started."""
    store, engine, before = _wave_one_done_behind_a_gate(workspace)
    engine.tick()  # looks, and finds wave 2 held
    assert task_state(store, "gate/b") == "DRAFT"
    _approve_as_the_cli_does(store)
    assert engine.is_idle("all")  # nothing queued and no wait left: what a stale look sees
    assert not engine.is_idle("all", quiet_since=before)

    assert engine.run(until_idle=True, waits="all") is True
    assert task_state(store, "gate/b") == "SUCCEEDED"


def test_an_approval_landing_while_the_idle_check_reads_keeps_the_run_going(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval can also land inside the idle check, after it looked at the change feed
    and before it read the waits: the waits are then empty, and only a feed read after them
    tells the check that something changed (CI caught an engine exiting 1 this way)."""
    store, engine, before = _wave_one_done_behind_a_gate(workspace)
    real_read_waits = engine_module.read_waits

    def approval_lands_first(*args: Any, **kwargs: Any) -> Any:
        _approve_as_the_cli_does(store)
        monkeypatch.setattr(engine_module, "read_waits", real_read_waits)
        return real_read_waits(*args, **kwargs)

    monkeypatch.setattr(engine_module, "read_waits", approval_lands_first)
    assert not engine.is_idle("all", quiet_since=before)
    assert engine.run(until_idle=True, waits="all") is True
    assert task_state(store, "gate/b") == "SUCCEEDED"

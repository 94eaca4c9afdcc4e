"""What carries over between tasks and runs: config reloads, provider sessions, prompts,
and the assessor's wave gate. Real engines, real sim processes, a real SQLite file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    relay_toml,
    run_until_idle,
    running_engine,
    sim,
    task_state,
    tasks,
    wait_for,
)
from sqlmodel import select

from relay_engine.jobfile import parse_job_text
from relay_engine.jobs import submit_job
from relay_engine.model import Plan, ProviderSession

CLAUDE_SIM = [sys.executable, "-m", "relay_engine.sim_agent", "--format", "claude"]


def claude_agent(agent_id: str = "claude-a", **extra: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "provider": "claude",
        "roles": ["implementer", "planner", "assessor"],
        "command": CLAUDE_SIM,
        **extra,
    }


def prompt_of(store: Any, key: str) -> str:
    (execution,) = [e for e in executions(store) if e.task_key == key]
    return (Path(execution.artifact_dir or "") / "prompt.md").read_text()


def test_config_edits_take_effect_without_a_restart_and_bad_ones_are_refused(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace.configure(agents=[claude_agent("first")])
    store = ws.store()
    engine = ws.engine()
    with running_engine(engine):
        wait_for(lambda: events(store, "engine.started"), what="the engine to start")
        (ws.path / "relay.toml").write_text(relay_toml(agents=[claude_agent("second")]))
        wait_for(lambda: events(store, "config.reloaded"), what="the reload")
        ws.submit(job_toml("after", [{"id": "t", "sim": sim(0.05)}]))
        wait_for(lambda: task_state(store, "after/t") == "SUCCEEDED", what="the task")
        assert tasks(store)["after/t"].agent == "second"

        (ws.path / "relay.toml").write_text('[[agents]]\nid = "x"\nprovider = "nope"\n')
        (invalid,) = wait_for(lambda: events(store, "config.invalid"), what="the refusal")
        assert "agents[0] (x).provider" in invalid.message
        assert "keeping the last good config" in invalid.message
        # `relay submit` would refuse now (it validates against relay.toml); store directly.
        still = parse_job_text(job_toml("still", [{"id": "t", "sim": sim(0.05)}]), ws.path / "s")
        submit_job(store, still, now=time.time())
        wait_for(lambda: task_state(store, "still/t") == "SUCCEEDED", what="the second task")
        assert tasks(store)["still/t"].agent == "second"


def test_a_workstream_resumes_its_provider_session_and_remembers_what_it_did(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace.configure(agents=[claude_agent()])
    prompts = ws.path / ".relay" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "role-implementer.md").write_text("House rule: run the linters before you stop.")
    first = {"id": "one", "workstream": "core", "sim": sim(0.05, session_id="sess-core-1")}
    first["sim"]["result"] = "built the parser"
    second = {"id": "two", "workstream": "core", "depends_on": ["one"], "sim": sim(0.05)}
    ws.submit(job_toml("ws", [first, second], objective="ship the parser"))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    (resumed,) = [e for e in executions(store) if e.task_key == "ws/two"]
    assert resumed.argv[resumed.argv.index("--resume") + 1] == "sess-core-1"
    assert resumed.session_id == "sess-core-1"
    prompt = prompt_of(store, "ws/two")
    assert "ship the parser" in prompt  # the job objective
    assert "**one** (one): built the parser" in prompt  # its dependency's result
    assert "- one: built the parser" in prompt  # the workstream memory
    assert "House rule: run the linters" in prompt  # the overlay for its role


def test_a_hard_failure_makes_the_session_stale(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace.configure(agents=[claude_agent()])
    broken = {"id": "one", "workstream": "core", "max_attempts": 1}
    broken["sim"] = sim(0.05, session_id="sess-bad", exit_code=1)
    later = {"id": "two", "workstream": "core", "sim": sim(0.05), "priority": "P3"}
    ws.submit(job_toml("stale", [broken, later]))
    store = ws.store()

    assert run_until_idle(ws.engine()) is False

    (fresh,) = [e for e in executions(store) if e.task_key == "stale/two"]
    assert "--resume" not in fresh.argv  # the failed conversation is not picked up again
    with store.read() as session:
        (row,) = session.exec(select(ProviderSession))
    assert row.last_failed_at is not None
    assert (row.status, row.session_id) == ("active", fresh.session_id)


def test_an_assessor_that_asks_for_a_replan_starts_a_wave_assessment_round(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace.configure(agents=[claude_agent()])
    round_one = {
        "objective_status": "in_progress",
        "next_tasks": [
            {"id": "a", "sim": sim(0.05)},
            {"id": "b", "dependencies": ["a"], "sim": sim(0.05)},
        ],
    }
    done = {"objective_status": "satisfied", "assessment": "done"}
    verdict = {"decision": "replan", "summary": "a went sideways", "findings": ["redo b"]}
    planner = {"duration": 0.05, "lines": 1, "results_by_round": {"1": round_one, "2": done}}
    planner["assessor"] = {"duration": 0.05, "lines": 1, "result": verdict}
    ws.submit(
        job_toml("assessed", [], mode="autonomous", objective="o", wave_gate="assess", sim=planner)
    )
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    state = {t.task_id: t.state for t in tasks(store).values()}
    assert state == {"a": "SUCCEEDED", "assess-wave-1": "SUCCEEDED", "b": "CANCELLED"}
    with store.read() as session:
        rounds = list(session.exec(select(Plan).order_by(Plan.round)))
    assert [(p.trigger, p.status) for p in rounds] == [
        ("initial", "SUPERSEDED"),
        ("wave-assessment", "SUCCEEDED"),
    ]
    assert rounds[1].guidance == "a went sideways; redo b"
    assert json.loads(json.dumps(tasks(store)["assessed/b"].error)) == "superseded by plan 2"

"""What carries over between tasks and runs: config reloads, provider sessions, prompts,
and the assessor's wave gate. Real engines, real sim processes, a real SQLite file."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
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

from relay_engine.agents.runner import write_artifact_text
from relay_engine.contracts.job_file import parse_job_text
from relay_engine.ops.jobs import submit_job
from relay_engine.store.schema import Plan, ProviderSession

CLAUDE_SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", "claude"]


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
        # Written as editors save, whole: a tick between truncating and writing would
        # read an empty relay.toml, refuse it, and take the next event's place.
        write_artifact_text(ws.path, "relay.toml", relay_toml(agents=[claude_agent("second")]))
        wait_for(lambda: events(store, "config.reloaded"), what="the reload")
        ws.submit(job_toml("after", [{"id": "t", "sim": sim(0.05)}]))
        wait_for(lambda: task_state(store, "after/t") == "SUCCEEDED", what="the task")
        assert tasks(store)["after/t"].agent == "second"

        write_artifact_text(ws.path, "relay.toml", '[[agents]]\nid = "x"\nprovider = "nope"\n')
        (invalid,) = wait_for(lambda: events(store, "config.invalid"), what="the refusal")
        assert "agents[0] (x).provider" in invalid.message
        assert "keeping the last good config" in invalid.message
        # `relay submit` would refuse now (it validates against relay.toml); store directly.
        still = parse_job_text(job_toml("still", [{"id": "t", "sim": sim(0.05)}]), ws.path / "s")
        submit_job(store, still, now=time.time())
        wait_for(lambda: task_state(store, "still/t") == "SUCCEEDED", what="the second task")
        assert tasks(store)["still/t"].agent == "second"


def test_relay_toml_caught_halfway_through_a_save_is_not_refused(
    sqlite_workspace: Workspace,
) -> None:
    """Editors that save in place truncate, then write: a tick in between read half a
    file and recorded ``config.invalid`` for a config the operator never got wrong. A parse
    error in a file written within the last second is looked at again on the next tick;
    only one still invalid after that is refused."""
    ws = sqlite_workspace.configure(agents=[claude_agent("first")])
    store = ws.store()
    engine = ws.engine()
    config = ws.path / "relay.toml"
    whole = relay_toml(agents=[claude_agent("second")])
    config.write_text(whole[: whole.index("command") + 20], encoding="utf-8")  # halfway
    engine.tick()
    assert not events(store, "config.invalid")
    assert [a.id for a in engine.config.agents] == ["first"]
    config.write_text(whole, encoding="utf-8")
    engine.tick()
    assert not events(store, "config.invalid") and events(store, "config.reloaded")
    assert [a.id for a in engine.config.agents] == ["second"]

    config.write_text('[[agents]]\nid = "x"\nprovider = "nope"\n', encoding="utf-8")
    engine.tick()
    assert not events(store, "config.invalid")
    saved = time.time() - 2  # the same file, no longer fresh: a mistake, not a save
    os.utime(config, (saved, saved))
    engine.tick()
    (invalid,) = events(store, "config.invalid")
    assert "agents[0] (x).provider" in invalid.message
    assert [a.id for a in engine.config.agents] == ["second"]


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


REPLAY = [sys.executable, str(Path(__file__).resolve().parents[1] / "replay_cli.py")]
STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"
SUCCESS = {"claude": "claude_success.jsonl", "codex": "codex_success.jsonl"}
SUCCESS["gemini"] = "gemini_success.json"


def replay_agent(provider: str, on_resume: str) -> dict[str, Any]:
    """A real process printing what the real CLI printed: a success for a fresh run, the
    recorded ``on_resume`` fixture when relay asks it to resume a session."""
    env = {
        "REPLAY_CLI": provider,
        "REPLAY_SUCCESS": str(STREAMS / SUCCESS[provider]),
        "REPLAY_RESUME_SCENARIO": on_resume,
    }
    return {"id": f"{provider}-a", "provider": provider, "command": REPLAY, "env": env}


def _session_row(store: Any) -> ProviderSession:
    with store.read() as session:
        (row,) = session.exec(select(ProviderSession))
    return row


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["claude", "codex", "gemini"])
def test_a_resumed_session_that_is_gone_is_retried_fresh_at_once_and_not_charged(
    sqlite_workspace: Workspace, provider: str
) -> None:
    ws = sqlite_workspace.configure(agents=[replay_agent(provider, f"{provider}-resume-gone")])
    first = {"id": "one", "workstream": "core"}
    second = {"id": "two", "workstream": "core", "depends_on": ["one"], "max_attempts": 1}
    ws.submit(job_toml("gone", [first, second]))
    store = ws.store()

    assert run_until_idle(ws.engine(), timeout=90) is True

    (one,) = [e for e in executions(store) if e.task_key == "gone/one"]
    gone, fresh = sorted(
        (e for e in executions(store) if e.task_key == "gone/two"), key=lambda e: e.started_at
    )
    assert one.session_id and one.session_id in gone.argv  # it resumed the first session...
    assert gone.outcome == "session-gone"
    assert "session-gone" in (gone.error or "")
    assert one.session_id not in fresh.argv and "--resume" not in fresh.argv  # ...then not
    assert "resume" not in fresh.argv
    assert fresh.outcome == "succeeded"
    two = tasks(store)["gone/two"]
    assert (two.state, two.attempt) == ("SUCCEEDED", 1)  # max_attempts 1: the gone one was free
    row = _session_row(store)
    assert row.last_failed_at is not None and row.last_failed_at >= (gone.ended_at or 0)
    released = [e.message for e in events(store, "task.released")]
    assert any("fresh" in m and "attempt refunded" in m for m in released), released


def test_an_auth_failure_on_a_resumed_session_makes_it_stale_at_once(
    sqlite_workspace: Workspace,
) -> None:
    """The task still has attempts left: before, the session stayed active until they ran out."""
    ws = sqlite_workspace.configure(agents=[replay_agent("claude", "claude-not-logged-in")])
    first = {"id": "one", "workstream": "core"}
    second = {"id": "two", "workstream": "core", "depends_on": ["one"], "max_attempts": 3}
    ws.submit(job_toml("auth", [first, second]))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: task_state(store, "auth/two") == "PARKED", what="parked", timeout=90)
    (run,) = [e for e in executions(store) if e.task_key == "auth/two"]
    assert "--resume" in run.argv and run.outcome == "unavailable"
    row = _session_row(store)
    assert row.status == "stale"
    assert tasks(store)["auth/two"].attempt == 0


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

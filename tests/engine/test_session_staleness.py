"""Provider sessions go stale as in the seed: a failed attempt's retry starts a fresh
conversation (with the error in its prompt), a timed-out one resumes where it was cut
off, and merge preparation never resumes. Real engines, the claude-format sim agent as a
real process (it prints the session id it was given with ``--resume``), a real database.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from helpers import Workspace, executions, job_toml, run_until_idle, sim
from sqlmodel import select

from relay_engine.store.schema import Execution, ProviderSession

CLAUDE_SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", "claude"]


def claude_agent() -> dict[str, Any]:
    return {"id": "claude-a", "provider": "claude", "roles": ["implementer"],
            "command": CLAUDE_SIM, "sandbox": "none"}  # fmt: skip


def runs_of(store: Any, key: str) -> list[Execution]:
    return sorted((e for e in executions(store) if e.task_key == key), key=lambda e: e.attempt)


def resumed(run: Execution) -> str | None:
    return run.argv[run.argv.index("--resume") + 1] if "--resume" in run.argv else None


def sessions(store: Any) -> list[ProviderSession]:
    with store.read() as session:
        return list(session.exec(select(ProviderSession)))


def test_a_failed_attempt_is_retried_in_a_fresh_session_with_its_error(
    workspace: Workspace,
) -> None:
    ws = workspace.configure(agents=[claude_agent()])
    task = {"id": "t", "workstream": "core", "max_attempts": 2}
    task["sim"] = sim(0.05, session_id="sess-1", fail_attempts=1)
    ws.submit(job_toml("j", [task]))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    first, second = runs_of(store, "j/t")
    assert (first.outcome, second.outcome) == ("failed", "succeeded")
    assert first.session_id == "sess-1"
    assert resumed(second) is None  # the conversation that just failed is not picked up
    prompt = (Path(second.artifact_dir or "") / "prompt.md").read_text()
    assert "Attempt 1 failed" in prompt and "simulated failure of j/t" in prompt
    (row,) = sessions(store)
    assert row.status == "active" and row.last_failed_at is not None  # the fresh one is kept


def test_a_timed_out_attempt_resumes_its_session(workspace: Workspace) -> None:
    ws = workspace.configure(agents=[claude_agent()])
    task = {"id": "t", "workstream": "core", "max_attempts": 2, "timeout": 2.0}  # past its start
    task["sim"] = sim(4.0, lines=0, session_id="sess-slow")
    ws.submit(job_toml("j", [task]))
    store = ws.store()

    assert run_until_idle(ws.engine()) is False  # both attempts time out

    first, second = runs_of(store, "j/t")
    assert (first.outcome, second.outcome) == ("timeout", "timeout")
    assert resumed(first) is None
    assert resumed(second) == "sess-slow"  # cut short, not wrong: it goes on where it was


def test_merge_preparation_never_resumes_the_workstream_session(workspace: Workspace) -> None:
    ws = workspace.configure(agents=[claude_agent()])
    work = {"id": "work", "workstream": "core", "sim": sim(0.05, session_id="sess-core")}
    later = {"id": "later", "workstream": "core", "depends_on": ["work"], "sim": sim(0.05)}
    prep = {"id": "prep", "workstream": "core", "kind": "merge_prep", "depends_on": ["later"],
            "sim": sim(0.05)}  # fmt: skip
    ws.submit(job_toml("j", [work, later, prep]))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    assert resumed(runs_of(store, "j/later")[0]) == "sess-core"  # ordinary work resumes
    assert resumed(runs_of(store, "j/prep")[0]) is None

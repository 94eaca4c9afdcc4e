"""Memory agents use, through the engine: what a run adds with ``memory_add`` is stored when
its exit is recorded -- a failed attempt's too -- and the next attempt's ``memory_search``
finds it. The agent is a stand-in for claude (``tests/mcp_claude.py``) that drives relay's
memory server with the ``mcp`` client SDK, as claude would from its ``--mcp-config``."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import Workspace, events, executions, job_toml, running_engine, tasks, wait_for
from mcp_claude import NOTE
from sqlmodel import select

from relay_engine.store.schema import Memory

FAKE_CLAUDE = [sys.executable, str(Path(__file__).parents[1] / "mcp_claude.py")]


def test_a_failed_attempts_note_reaches_the_retry_through_memory_search(
    sqlite_workspace: Workspace,
) -> None:
    agent = {
        "id": "claude-a",
        "provider": "claude",
        "command": FAKE_CLAUDE,
        "roles": ["implementer"],
    }
    ws = sqlite_workspace.configure(agents=[agent])
    ws.submit(job_toml("j", [{"id": "t", "input": "do it", "workstream": "api"}]))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: tasks(store)["j/t"].state in ("SUCCEEDED", "FAILED"), timeout=60)
    task = tasks(store)["j/t"]
    assert (task.state, task.attempt) == ("SUCCEEDED", 2), task.error
    assert task.result_summary == f"[j/t, agent] {NOTE}"

    first = min(executions(store), key=lambda e: e.started_at or 0.0)
    assert first.outcome == "failed"
    with store.read() as session:
        row, secret = session.exec(select(Memory).where(Memory.source == "agent")).all()
    assert (row.job_id, row.workstream, row.execution_id, row.note) == ("j", "api", first.id, NOTE)
    assert "tok-0123456789abcdef" not in secret.note and "deploy token is" in secret.note
    assert [e.task_key for e in events(store, "memory.added")] == ["j/t", "j/t"]

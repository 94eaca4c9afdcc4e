"""Memory agents use, with the real claude: the first task's claude calls relay's
``memory_add`` (the MCP server relay names in its ``--mcp-config``, run inside the agent's
sandbox), relay keeps the note when the run ends, and the next task's claude finds it with
``memory_search``. claude runs whole sessions under relay against the scripted model stub.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Workspace, events, init_repo, job_toml, running_engine, tasks, wait_for
from modelstub import ModelStub, call, say
from sqlmodel import select
from test_real_claude_asks import claude_agent

from relay_engine.store.schema import Execution, Memory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
NOTE = "the config loader caches relay.toml: call reload() after editing it"


def test_a_note_one_task_adds_is_what_the_next_task_finds(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    model_stub.script(
        [
            call("mcp__relay_memory__memory_add", {"note": NOTE}),
            say("Noted it."),
            call("mcp__relay_memory__memory_search", {"query": "config loader reload"}),
            say("Found it."),
        ]
    )
    repo = init_repo(tmp_path / "repo")
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    ws.configure(agents=[claude_agent(cli_bin, tmp_path / "home", model_stub)])
    job = [
        {"id": "first", "input": "learn the config loader", "workstream": "config"},
        {"id": "second", "input": "use it", "workstream": "config", "dependencies": ["first"]},
    ]
    ws.submit(job_toml("j", job, repo=str(repo), review=False))
    with running_engine(ws.engine()):
        store = ws.store()
        wait_for(lambda: tasks(store)["j/second"].state in ("SUCCEEDED", "FAILED"), timeout=200)
    assert tasks(store)["j/first"].state == "SUCCEEDED"
    assert tasks(store)["j/second"].state == "SUCCEEDED"

    (added,) = model_stub.results_for("mcp__relay_memory__memory_add")
    assert not added.is_error, added.output
    (found,) = model_stub.results_for("mcp__relay_memory__memory_search")
    assert not found.is_error, found.output
    assert found.output == f"[j/first, agent] {NOTE}"  # plain text, as the model reads it

    with store.read() as session:
        (row,) = session.exec(select(Memory).where(Memory.source == "agent")).all()
        first_run = session.exec(select(Execution).where(Execution.task_key == "j/first")).one()
    assert (row.job_id, row.workstream, row.task_key, row.note) == ("j", "config", "j/first", NOTE)
    assert row.execution_id == first_run.id
    assert any(NOTE in e.message for e in events(store, "memory.added"))

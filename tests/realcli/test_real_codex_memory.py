"""Memory agents use, with the real codex: relay hands it the memory server as ``-c
mcp_servers.relay_memory.*`` overrides, and codex starts it inside relay's sandbox.

How far this goes: codex (0.171) defers MCP tools behind its own ``tool_search`` tool and
names the server to the model as a deferred tool namespace; a call to
``mcp__relay_memory__memory_add`` before a search is "unsupported". The model stub does not
speak ``tool_search``, so this test checks what codex told the model once the server was up
(the namespace, with the server's own instructions), not a whole add-then-search round trip
(real claude's test does that: ``test_real_claude_memory.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Workspace, init_repo, job_toml, running_engine, tasks, wait_for
from modelstub import ModelStub, call, say
from test_agents_at_work import codex_agent

from relay_engine.agents.memory_server import INSTRUCTIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_real_codex_starts_relays_memory_server_and_tells_the_model_of_it(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    # relay marks its server required: codex waits for it before the first turn.
    model_stub.script([call("exec_command", {"cmd": "true"}), say("Done.")])
    repo = init_repo(tmp_path / "repo")
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    agent = codex_agent(cli_bin, tmp_path / "home", model_stub, roles=["implementer"])
    ws.configure(agents=[agent])
    ws.submit(job_toml("j", [{"id": "t", "input": "look", "workstream": "w"}], repo=str(repo),
                       review=False))  # fmt: skip
    with running_engine(ws.engine()):
        store = ws.store()
        wait_for(lambda: tasks(store)["j/t"].state in ("SUCCEEDED", "FAILED"), timeout=200)
    assert tasks(store)["j/t"].state == "SUCCEEDED", tasks(store)["j/t"].error
    sent = [json.dumps(r.body) for r in model_stub.main_requests()]
    told = [text for text in sent if "mcp__relay_memory" in text]
    assert told, "codex never named relay's memory server to the model"
    assert "mcp__relay_memory" in sent[0], "the first turn went out without relay's memory"
    assert json.dumps(INSTRUCTIONS)[1:60] in told[-1]  # the server's own words: it ran

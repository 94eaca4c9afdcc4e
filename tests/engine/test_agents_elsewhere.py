"""Agents of other engines: a task pinned to an agent only engine B defines runs on B.

Two workspaces, each with its own relay.toml, share one database. ``relay submit`` in A
accepts a pin to B's agent while B runs (the engines registry holds each engine's roster);
while no engine that defines the agent runs, the task waits in the queue -- engine A
neither runs it with its own agent nor fails it -- and ``relay status`` says for which
agent and which engine has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Workspace, executions, job_toml, running_engine, sim, tasks, wait_for

from relay_engine.contracts.config import KNOWN_ROLES

SIM = {"id": "sim", "provider": "sim", "roles": list(KNOWN_ROLES)}
ONLY_B = {"id": "only-b", "provider": "sim", "roles": list(KNOWN_ROLES)}


@pytest.fixture
def pair(tmp_path: Path, db_url: str | None) -> tuple[Workspace, Workspace]:
    """Workspace A (agent sim) and workspace B (agents sim and only-b) on one database."""
    url = db_url or f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = Workspace(tmp_path / "a", url), Workspace(tmp_path / "b", url)
    for ws, agents in ((first, [SIM]), (second, [SIM, ONLY_B])):
        ws.path.mkdir()
        ws.configure(agents=agents, lease=10.0, heartbeat=0.2)
    return first, second


def test_a_task_pinned_to_another_engines_agent_waits_for_it_and_runs_there(
    pair: tuple[Workspace, Workspace],
) -> None:
    a, b = pair
    pinned = job_toml("p", [{"id": "t", "agent": "only-b", "sim": sim(0.1)}])
    store = a.store()  # the shared database exists before any CLI reads it
    refused = a.cli("submit", str(a.write_job(pinned)))
    assert refused.returncode != 0
    assert "unknown agent 'only-b'" in refused.stderr + refused.stdout  # B is not running

    engine_b = b.engine()
    engine_b.register()  # B is live: its roster is A's too
    a.submit(pinned)
    engine_b.shutdown(release=True)  # and gone again

    engine_a = a.engine()
    with running_engine(engine_a):
        wait_for(lambda: tasks(store)["p/t"].state == "QUEUED", what="the task to be queued")
        status = a.status()
        (row,) = [t for t in status["tasks"] if t["key"] == "p/t"]
        assert row["wait"] is not None, row
        line = row["wait"]["line"]
        assert f"waits for agent only-b (defined on engine {engine_b.id} on" in line
        assert "not running" in line
        assert tasks(store)["p/t"].state == "QUEUED" and not executions(store)

        later_b = b.engine()
        with running_engine(later_b):
            wait_for(lambda: tasks(store)["p/t"].state == "SUCCEEDED", what="B to run it")
    (run,) = executions(store)
    assert (run.engine_id, run.agent) == (later_b.id, "only-b")
    assert tasks(store)["p/t"].attempt == 1

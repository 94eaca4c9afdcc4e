"""The engine registry on a real database: ``relay engines`` with real ``relay run``
processes (one SIGKILLed), and the agents and slots each engine mirrors.

The pure rules (live / stopped / silent past one lease) are in tests/unit/test_engines.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import Workspace, executions, job_toml, sim, stop_process, wait_for
from sqlmodel import select

from relay_engine.store.db import default_db_url
from relay_engine.store.read_model.agents import known_agents
from relay_engine.store.schema import AgentRecord, EngineRecord

LEASE = 3.0


def _engines(workspace: Workspace) -> dict[str, dict[str, Any]]:
    result = workspace.cli("engines", "--json")
    assert result.returncode == 0, result.stderr
    return {row["id"]: row for row in json.loads(result.stdout)}


def _engine_of(workspace: Workspace, proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    return next((r for r in _engines(workspace).values() if r["pid"] == proc.pid), None)


def _running_of(workspace: Workspace, engine_id: str) -> int:
    store = workspace.store()
    return sum(1 for e in executions(store) if e.engine_id == engine_id and e.ended_at is None)


@pytest.mark.slow
def test_engines_lists_real_engines_and_a_killed_one_goes_after_a_lease(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Two engines on one database, each with its own config (slots 1 and 2); the first is
    SIGKILLed and shows gone, the other stays live with the work it runs."""
    workspace.configure(capacity=1, lease=LEASE, heartbeat=0.3)
    other = Workspace(tmp_path / "other", workspace.db_url or default_db_url(workspace.path))
    other.path.mkdir()
    other.configure(capacity=2, lease=LEASE, heartbeat=0.3)
    tasks = [{"id": f"t{i}", "workstream": f"w{i}", "sim": sim(duration=60)} for i in range(3)]
    workspace.submit(job_toml("long", tasks))
    first = workspace.popen("run", "--quiet", log_name="first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        one = wait_for(lambda: (r := _engine_of(workspace, first)) and r["running"] == 1 and r)
        second = other.popen("run", "--quiet", log_name="second.log")
        two = wait_for(lambda: (r := _engine_of(other, second)) and r["running"] >= 1 and r)
        listed = _engines(other)
        assert {one["id"], two["id"]} <= {i for i, r in listed.items() if r["state"] == "live"}
        for engine_id, slots in ((one["id"], 1), (two["id"], 2)):
            assert listed[engine_id]["running"] == _running_of(other, engine_id)
            assert (listed[engine_id]["slots"], listed[engine_id]["agents"]) == (slots, ["sim"])
        table = other.cli("engines").stdout
        assert one["id"] in table and two["id"] in table and "live" in table
        assert "1/1" in table  # the first engine's one slot is taken
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        gone = wait_for(lambda: _engines(other)[one["id"]]["state"] == "gone", timeout=LEASE + 30)
        assert gone
        after = _engines(other)
        assert after[one["id"]]["why_gone"] == "silent"
        assert after[two["id"]]["state"] == "live"
        assert "gone (silent)" in other.cli("engines").stdout
        assert {e["id"] for e in other.status()["engines"]} >= {one["id"], two["id"]}
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_process(proc)
        other.close()


@pytest.mark.slow
def test_engines_on_a_database_no_engine_used_says_how_to_start_one(workspace: Workspace) -> None:
    workspace.submit(job_toml("waiting", [{"id": "t", "sim": sim()}]))
    result = workspace.cli("engines")
    assert result.returncode == 0, result.stderr
    assert "no engines yet" in result.stdout


def test_an_agent_no_running_engine_defines_is_no_longer_listed(workspace: Workspace) -> None:
    """Agent rows belong to their engine: when the next engine joins, the rows of engines
    that stopped go, so an agent dropped from relay.toml leaves `relay agents`."""

    def agents(*ids: str) -> list[dict[str, Any]]:
        return [{"id": i, "provider": "sim", "roles": ["implementer"]} for i in ids]

    workspace.configure(agents=agents("old", "kept"))
    first = workspace.engine()
    first.register()
    first.shutdown(release=True)
    store = workspace.store()
    with store.read() as session:
        assert [a.id for a in known_agents(session)] == ["kept", "old"]  # no engine runs now

    workspace.configure(agents=agents("kept", "new"))
    other_host = workspace.engine()  # a live peer keeps its own rows
    other_host.register()
    second = workspace.engine()
    second.register()
    try:
        with store.read() as session:
            assert [a.id for a in known_agents(session)] == ["kept", "new"]
            rows = session.exec(select(AgentRecord.engine_id)).all()
        assert set(rows) == {other_host.id, second.id}
    finally:
        second.shutdown(release=True)
        other_host.shutdown(release=True)


@pytest.mark.slow
def test_engines_mirror_their_own_agents_and_slots(workspace: Workspace) -> None:
    workspace.configure(capacity=3)
    engine = workspace.engine()
    engine.register()
    with workspace.store().read() as session:
        record = session.get(EngineRecord, engine.id)
    assert record is not None and record.slots == 3
    assert record.agents == sorted(a.id for a in engine.config.agents)
    engine.stop()

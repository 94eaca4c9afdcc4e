"""The memory server as a CLI starts it: the command line relay writes into the execution's
``mcp-config.json``, run as a real process and driven over a real stdio MCP session with the
``mcp`` client SDK, against notes read from a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from helpers import Workspace, events
from mcp import ClientSession, StdioServerParameters, stdio_client
from sqlmodel import select

from relay_engine.agents.launch import LaunchRequest, build_launch
from relay_engine.contracts.config import AgentConfig
from relay_engine.core.memory import ADDED_FILE, MCP_CONFIG_FILE, added_notes
from relay_engine.core.redaction import Redactor
from relay_engine.ops import memory
from relay_engine.store.schema import Memory

EXECUTION = "e-memory-1"


def seed_notes(ws: Workspace) -> None:
    """Notes of two jobs and two workstreams: only job a's ``api`` notes are in scope."""
    with ws.store().write() as session:
        for job, workstream, text in [
            ("a", "api", "the api handlers live in src/api; run make api-test"),
            ("a", "api", "the api uses snake_case JSON keys"),
            ("a", "ui", "the ui api client is generated: do not edit it"),
            ("b", "api", "job b's api secret plan: never show this to job a"),
        ]:
            session.add(Memory(job_id=job, workstream=workstream, note=text, task_key=f"{job}/x"))


def launch_files(ws: Workspace, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """What relay writes for a claude run of ``a/t2`` in workstream ``api``."""
    with ws.store().read() as session:
        notes = tuple(memory.snapshot(session, "a", "api"))
    request = LaunchRequest(
        execution_id=EXECUTION,
        task_key="a/t2",
        job_id="a",
        attempt=1,
        prompt="do it",
        cwd=tmp_path,
        timeout_s=60,
        agent=AgentConfig(id="claude-a", provider="claude", sandbox="none"),
        memory=notes,
    )
    spec = build_launch(ws.path, request, {}, Redactor(()))
    config = json.loads((spec.artifact_dir / MCP_CONFIG_FILE).read_text())
    assert spec.argv[spec.argv.index("--mcp-config") + 1] == str(
        spec.artifact_dir / MCP_CONFIG_FILE
    )
    # claude waits for an alwaysLoad server before its first turn (where the memory matters)
    assert config["mcpServers"]["relay_memory"]["alwaysLoad"] is True
    return config["mcpServers"]["relay_memory"], spec.artifact_dir


async def talk(server: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        assert {tool.name for tool in tools.tools} == {"memory_search", "memory_add"}
        return [await session.call_tool(name, arguments) for name, arguments in calls]


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


def test_agents_search_their_scope_and_what_they_add_is_stored_as_theirs(
    sqlite_workspace: Workspace, tmp_path: Path
) -> None:
    ws = sqlite_workspace
    seed_notes(ws)
    server, artifacts = launch_files(ws, tmp_path)
    found, added, empty, again = asyncio.run(
        talk(
            server,
            [
                ("memory_search", {"query": "api"}),
                ("memory_add", {"note": "t2: the api rate limiter is in src/api/limits.py"}),
                ("memory_add", {"note": "   "}),
                ("memory_search", {"query": "rate limiter"}),
            ],
        )
    )
    hits = text_of(found)
    assert "src/api; run make api-test" in hits and "snake_case" in hits
    assert "job b" not in hits  # another job's notes
    assert "generated" not in hits  # another workstream's
    assert not added.is_error and "Noted" in text_of(added)
    assert empty.is_error and "empty" in text_of(empty)
    assert "src/api/limits.py" in text_of(again)  # this run's own note, searchable at once

    # What relay stores when the run's exit is recorded (the reaper's call).
    notes = added_notes((artifacts / "agent" / ADDED_FILE).read_text())
    assert notes == ["t2: the api rate limiter is in src/api/limits.py"]
    scope = memory.MemoryScope("a", "api", "a/t2", EXECUTION)
    store = ws.store()
    with store.write() as session:
        memory.add_agent_notes(session, scope, notes, now=100.0)
    with store.read() as session:
        (row,) = session.exec(select(Memory).where(Memory.source == "agent")).all()
    assert (row.job_id, row.workstream, row.task_key, row.execution_id) == (
        "a",
        "api",
        "a/t2",
        EXECUTION,
    )
    (event,) = events(store, "memory.added")
    assert event.task_key == "a/t2" and "rate limiter" in event.message
    with store.read() as session:
        later = memory.snapshot(session, "a", "api")
        other = memory.snapshot(session, "b", "api")
    assert later[0].note == row.note and later[0].source == "agent"
    assert all("rate limiter" not in n.note for n in other)

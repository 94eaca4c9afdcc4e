"""The job's memory as MCP tools: `python -I -m relay_engine.agents.memory_server`, started
by the agent's CLI (over stdio) inside the agent's sandbox.

It reaches no database -- the sandbox could not, and an agent must not write relay's rows
-- but two files of the execution's artifacts: the scope's notes relay wrote at launch
(read-only to the agent) and ``agent/memory-added.jsonl``, where ``memory_add`` appends and
from which relay stores the notes, attributed to the run, when its exit is recorded. A
search sees the launch's notes and this run's own additions (:mod:`relay_engine.core.memory`
ranks them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from relay_engine.core.memory import (
    AGENT_NOTES_PER_RUN,
    SEARCH_LIMIT_DEFAULT,
    SERVER_NAME,
    NoteFacts,
    added_line,
    added_notes,
    clean_note,
    describe,
    notes_from_json,
    rank,
)

INSTRUCTIONS = (
    "relay's memory of this job: notes that earlier tasks of the same workstream left. "
    "Search it before you start (memory_search) and add what a later task must know and "
    "could not find in the repository (memory_add)."
)


class Memory:
    """One execution's memory: the launch's notes plus what it added since."""

    def __init__(self, notes_file: Path, added_file: Path, task_key: str) -> None:
        self.notes_file, self.added_file, self.task_key = notes_file, added_file, task_key

    def _added(self) -> list[str]:
        try:
            return added_notes(self.added_file.read_text(encoding="utf-8"))
        except OSError:
            return []

    def search(self, query: str, limit: int = SEARCH_LIMIT_DEFAULT) -> str:
        try:
            notes = notes_from_json(self.notes_file.read_text(encoding="utf-8"))
        except OSError:
            notes = []
        newest = max((note.created_at for note in notes), default=0.0)
        own = [
            NoteFacts(-(i + 1), text, self.task_key, "agent", newest + i + 1)
            for i, text in enumerate(self._added())
        ]
        hits = rank([*notes, *own], query, limit)
        if not hits:
            return "No note matches. (The memory holds what earlier tasks chose to note.)"
        return "\n".join(describe(note) for note in hits)

    def add(self, note: str) -> str:
        """Append the note; ValueError says why it cannot be kept."""
        text = clean_note(note)
        if len(self._added()) >= AGENT_NOTES_PER_RUN:
            raise ValueError(f"this run already added {AGENT_NOTES_PER_RUN} notes")
        with self.added_file.open("a", encoding="utf-8") as out:
            out.write(added_line(text))
        return "Noted: relay keeps it for the job's later tasks once this task's run ends."


def serve(memory: Memory) -> None:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(structured_output=False)  # plain text: what the model reads
    def memory_search(query: str, limit: int = SEARCH_LIMIT_DEFAULT) -> str:
        """Search the notes earlier tasks of this job (and workstream) left: words of the
        query found in a note, best matches first. An empty query lists the newest notes."""
        return memory.search(query, limit)

    @server.tool(structured_output=False)
    def memory_add(note: str) -> str:
        """Leave a note for the later tasks of this job and workstream: a decision, a
        pitfall, where something lives. Kept once this task's run ends."""
        try:
            return memory.add(note)
        except (ValueError, OSError) as error:
            raise ToolError(str(error)) from None

    server.run("stdio")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="relay-memory", description=__doc__)
    parser.add_argument("--notes", type=Path, required=True)
    parser.add_argument("--added", type=Path, required=True)
    parser.add_argument("--task", default="")
    args = parser.parse_args(argv)
    serve(Memory(args.notes, args.added, args.task))
    return 0


if __name__ == "__main__":
    sys.exit(main())

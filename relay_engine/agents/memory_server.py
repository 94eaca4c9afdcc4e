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
import json
import sys
from pathlib import Path
from typing import IO, Any

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


PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP revisions this server speaks, newest first: it answers a client in the revision
the client asked for when it knows it, else in its newest (the client then decides)."""

TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": "memory_search",
        "description": "Search the notes earlier tasks of this job (and workstream) left: "
        "words of the query found in a note, best matches first. An empty query lists the "
        "newest notes.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "title": "Query"},
                "limit": {"type": "integer", "title": "Limit", "default": SEARCH_LIMIT_DEFAULT},
            },
            "required": ["query"],
        },
    },
    {
        "name": "memory_add",
        "description": "Leave a note for the later tasks of this job and workstream: a "
        "decision, a pitfall, where something lives. Kept once this task's run ends.",
        "inputSchema": {
            "type": "object",
            "properties": {"note": {"type": "string", "title": "Note"}},
            "required": ["note"],
        },
    },
)

METHOD_NOT_FOUND, PARSE_ERROR = -32601, -32700


class ToolFault(Exception):
    """A tool call the model must hear about in the tool's result, not as a protocol error."""


def answer(memory: Memory, message: Any) -> dict[str, Any] | None:
    """The reply to one JSON-RPC message; None for notifications and stray responses.

    A few lines of JSON-RPC over stdio, not the ``mcp`` SDK: every running claude or codex
    agent starts this server, and the SDK took 1.1 s of CPU and 60 MB of PSS to start it
    (its pydantic models), where this takes 0.08 s and 9 MB. The tests drive it with the
    SDK's client and the real CLIs."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = _initialized(params)
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": list(TOOLS)}
    elif method == "tools/call":
        call = params if isinstance(params, dict) else {}
        result = _tool_result(memory, call.get("name"), call.get("arguments"))
    else:
        error = {"code": METHOD_NOT_FOUND, "message": f"{SERVER_NAME} has no method {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def _initialized(params: Any) -> dict[str, Any]:
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    return {
        "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": "1"},
        "instructions": INSTRUCTIONS,
    }


def _tool_result(memory: Memory, name: Any, arguments: Any) -> dict[str, Any]:
    args = arguments if isinstance(arguments, dict) else {}
    try:
        if name == "memory_search":
            text = memory.search(_text(args, "query"), _limit(args))
        elif name == "memory_add":
            text = _added(memory, _text(args, "note"))
        else:
            raise ToolFault(f"{SERVER_NAME} has no tool {name!r}: memory_search, memory_add")
    except ToolFault as fault:
        return {"content": [{"type": "text", "text": str(fault)}], "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _text(args: dict[str, Any], field: str) -> str:
    value = args.get(field)
    if value is None:
        raise ToolFault(f"{field!r} is missing: give it as a string")
    if not isinstance(value, str):
        raise ToolFault(f"{field!r} must be a string, got {value!r}")
    return value


def _limit(args: dict[str, Any]) -> int:
    value = args.get("limit", SEARCH_LIMIT_DEFAULT)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolFault(f"'limit' must be a whole number of notes, 1 or more, got {value!r}")
    return value


def _added(memory: Memory, note: str) -> str:
    try:
        return memory.add(note)
    except (ValueError, OSError) as error:
        raise ToolFault(str(error)) from None


def serve(memory: Memory, lines: IO[bytes], out: IO[bytes]) -> None:
    """Answer each line the CLI writes until it closes the pipe (MCP's stdio transport)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            error = {"code": PARSE_ERROR, "message": "not a JSON-RPC message"}
            reply: Any = {"jsonrpc": "2.0", "id": None, "error": error}
        else:
            many = isinstance(message, list)  # a batch (MCP 2025-03-26)
            replies = [r for m in (message if many else [message]) if (r := answer(memory, m))]
            reply = replies if many else (replies[0] if replies else None)
        if reply:
            out.write(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")
            out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="relay-memory", description=__doc__)
    parser.add_argument("--notes", type=Path, required=True)
    parser.add_argument("--added", type=Path, required=True)
    parser.add_argument("--task", default="")
    args = parser.parse_args(argv)
    serve(Memory(args.notes, args.added, args.task), sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())

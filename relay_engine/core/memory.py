"""A job's memory as agents search it: which notes answer a query, and what a note may be.

Agents reach the memory through relay's MCP tools (``memory_search``, ``memory_add``), served
by :mod:`relay_engine.agents.memory_server` inside the agent's sandbox. That server holds no
database connection: it searches the scope's notes that relay wrote into the execution's
artifacts at launch (:data:`NOTES_FILE`) plus what this run added, and appends what the agent
adds to :data:`ADDED_FILE`, which relay stores when the run's exit is recorded. The matching
is deliberately plain -- the words of the query found in a note, more words first, newer
first among equals -- so an agent can predict what it will find, and a test can too.

Pure: no I/O, no clock; the notes' files are handed in as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

AGENT_NOTE_CHARS = 2000
"""An agent's note is kept whole up to this size: longer material belongs in the repo."""
AGENT_NOTES_PER_RUN = 50
"""What one execution may add: a run that notes more is writing a log, not a memory."""
SEARCH_LIMIT_MAX = 20
SEARCH_LIMIT_DEFAULT = 5
SNAPSHOT_NOTES = 500
"""The newest notes of a scope an execution's searches look through."""
SERVER_NAME = "relay_memory"
"""The MCP server's name: claude calls its tools ``mcp__relay_memory__memory_search``."""
ALLOW_RULE = f"mcp__{SERVER_NAME}"
"""The permission rule that lets an agent use relay's memory without asking anyone."""
NOTES_FILE = "memory-notes.json"  # in the execution's artifacts, read-only to the agent
ADDED_FILE = "memory-added.jsonl"  # in its agent/ folder, one JSON string a line
MCP_CONFIG_FILE = "mcp-config.json"  # the ``--mcp-config`` file claude is handed
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class NoteFacts:
    id: int
    note: str
    task_key: str | None
    source: str  # "relay" (what a task reported) | "agent" (memory_add)
    created_at: float


def words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def rank(notes: Sequence[NoteFacts], query: str, limit: int) -> list[NoteFacts]:
    """The notes that answer ``query``: those holding most of its words, newest first among
    equals; an empty query means the newest notes. At most ``limit`` (1..20)."""
    limit = max(1, min(limit, SEARCH_LIMIT_MAX))
    wanted = words(query)
    newest = sorted(notes, key=lambda n: (n.created_at, n.id), reverse=True)
    if not wanted:
        return newest[:limit]
    scored = [(len(wanted & words(note.note)), note) for note in newest]
    hits = [(score, note) for score, note in scored if score]
    hits.sort(key=lambda pair: pair[0], reverse=True)  # stable: newest first among equals
    return [note for _, note in hits[:limit]]


def clean_note(text: str) -> str:
    """An agent's note as it is stored; ValueError says why one cannot be."""
    note = text.strip()
    if not note:
        raise ValueError("the note is empty: say what the next task should know")
    if len(note) > AGENT_NOTE_CHARS:
        raise ValueError(
            f"the note has {len(note)} characters, over {AGENT_NOTE_CHARS}: keep it to what "
            "the next task must know and put longer material in a file in the repository"
        )
    return note


def describe(note: NoteFacts) -> str:
    """One search hit as the agent reads it: who noted it, then the note."""
    who = note.task_key or "relay"
    return f"[{who}, {note.source}] {note.note}"


def notes_json(notes: Sequence[NoteFacts]) -> str:
    return json.dumps([asdict(note) for note in notes], ensure_ascii=False)


def notes_from_json(text: str) -> list[NoteFacts]:
    """The launch's snapshot back; a damaged file reads as no notes rather than failing
    the agent's tool call (searching finds nothing, which the agent can work with)."""
    try:
        rows = json.loads(text)
        return [NoteFacts(**row) for row in rows]
    except (ValueError, TypeError):
        return []


def added_line(note: str) -> str:
    return json.dumps(note, ensure_ascii=False) + "\n"


def added_notes(text: str) -> list[str]:
    """The notes a run added, as relay stores them: each cleaned, unusable lines (a run
    killed mid-write leaves half a line) skipped, at most :data:`AGENT_NOTES_PER_RUN`."""
    kept: list[str] = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
            kept.append(clean_note(value if isinstance(value, str) else ""))
        except ValueError:
            continue
    return kept[:AGENT_NOTES_PER_RUN]

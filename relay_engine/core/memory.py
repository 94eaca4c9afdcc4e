"""A job's memory as agents search it: which notes answer a query, and what a note may be.

Agents reach the memory through relay's MCP tools (``memory_search``, ``memory_add``); the
engine answers them from the ``relay_memory`` rows of the task's job and workstream. The
matching is deliberately plain -- the words of the query found in a note, more words first,
newer first among equals -- so an agent can predict what it will find, and a test can too.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

AGENT_NOTE_CHARS = 2000
"""An agent's note is kept whole up to this size: longer material belongs in the repo."""
SEARCH_LIMIT_MAX = 20
SEARCH_LIMIT_DEFAULT = 5
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

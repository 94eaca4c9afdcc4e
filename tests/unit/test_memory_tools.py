"""The memory server's tools without the protocol: what a search finds in the launch's notes
and this run's own, and what an add refuses (files in a temp folder; no process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_engine.agents.memory_server import Memory
from relay_engine.core.memory import AGENT_NOTES_PER_RUN, NoteFacts, notes_json


def memory(tmp_path: Path, notes: list[NoteFacts] | None = None) -> Memory:
    notes_file = tmp_path / "memory-notes.json"
    if notes is not None:
        notes_file.write_text(notes_json(notes))
    return Memory(notes_file, tmp_path / "memory-added.jsonl", "j/t2")


def test_a_search_sees_the_launch_notes_and_this_runs_own_newest_first(tmp_path: Path) -> None:
    m = memory(tmp_path, [NoteFacts(1, "the cache lives in src/cache.py", "j/t1", "agent", 10.0)])
    assert m.search("cache") == "[j/t1, agent] the cache lives in src/cache.py"
    m.add("the cache is cleared by make clean")
    assert m.search("cache").splitlines() == [
        "[j/t2, agent] the cache is cleared by make clean",
        "[j/t1, agent] the cache lives in src/cache.py",
    ]


def test_no_notes_file_or_no_match_says_so(tmp_path: Path) -> None:
    assert memory(tmp_path).search("anything").startswith("No note matches")
    assert memory(tmp_path, []).search("").startswith("No note matches")


def test_an_add_refuses_an_empty_note_and_a_run_past_its_cap(tmp_path: Path) -> None:
    m = memory(tmp_path, [])
    with pytest.raises(ValueError, match="empty"):
        m.add("  ")
    for i in range(AGENT_NOTES_PER_RUN):
        m.add(f"note {i}")
    with pytest.raises(ValueError, match="already added"):
        m.add("one more")

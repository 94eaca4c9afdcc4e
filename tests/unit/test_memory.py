"""The job's memory as agents search it: ranking, what a note may be, the files the memory
server and relay hand each other, and how claude and codex are told of the server."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from recorded_streams import ctx

from relay_engine.agents.adapters import get_adapter
from relay_engine.agents.adapters.base import McpServer
from relay_engine.contracts.prompts import PromptParts, assemble_prompt
from relay_engine.core.memory import (
    AGENT_NOTE_CHARS,
    AGENT_NOTES_PER_RUN,
    NoteFacts,
    added_line,
    added_notes,
    clean_note,
    notes_from_json,
    notes_json,
    rank,
)


def note(i: int, text: str, at: float | None = None) -> NoteFacts:
    return NoteFacts(i, text, f"j/t{i}", "agent", float(i) if at is None else at)


NOTES = [
    note(1, "the parser lives in src/parse.py"),
    note(2, "run the tests with make check"),
    note(3, "the parser tests need make fixtures first"),
    note(4, "release notes are in CHANGES"),
]


@pytest.mark.parametrize(
    ("query", "limit", "expected"),
    [
        ("parser", 5, [3, 1]),  # both hold the word: newest first
        ("parser tests make", 5, [3, 2, 1]),  # more words first
        ("PARSER", 5, [3, 1]),  # case does not matter
        ("", 2, [4, 3]),  # no words: the newest notes
        ("kubernetes", 5, []),
        ("parser", 1, [3]),
        ("the", 99, [3, 2, 1]),  # at most 20, and every hit fits
    ],
)
def test_rank_finds_the_notes_holding_the_query_words(
    query: str, limit: int, expected: list[int]
) -> None:
    assert [n.id for n in rank(NOTES, query, limit)] == expected


def test_a_note_must_say_something_and_stay_short() -> None:
    assert clean_note("  keep the lock order sorted \n") == "keep the lock order sorted"
    with pytest.raises(ValueError, match="empty"):
        clean_note("   ")
    with pytest.raises(ValueError, match="over 2000"):
        clean_note("x" * (AGENT_NOTE_CHARS + 1))


def test_the_launch_snapshot_reads_back_and_a_damaged_one_reads_as_no_notes() -> None:
    assert notes_from_json(notes_json(NOTES)) == NOTES
    assert notes_from_json('[{"id": 1}') == []
    assert notes_from_json('[{"unexpected": 1}]') == []


def test_added_notes_skip_half_written_and_unusable_lines_and_stop_at_the_cap() -> None:
    text = added_line("first") + '"half' + "\n" + added_line("  ") + "42\n" + added_line("ok")
    assert added_notes(text) == ["first", "ok"]
    many = "".join(added_line(f"note {i}") for i in range(AGENT_NOTES_PER_RUN + 5))
    assert len(added_notes(many)) == AGENT_NOTES_PER_RUN


def server(tmp_path: Path) -> McpServer:
    args = ("-I", "-m", "relay_engine.agents.memory_server", "--notes", "n.json")
    return McpServer("relay_memory", "/usr/bin/python3", args, tmp_path / "mcp-config.json")


def test_claude_gets_the_mcp_config_file_and_may_use_the_memory_without_asking(
    tmp_path: Path,
) -> None:
    argv = get_adapter("claude").build(ctx(tmp_path, memory_server=server(tmp_path))).argv
    assert argv[argv.index("--mcp-config") + 1] == str(tmp_path / "mcp-config.json")
    assert argv[argv.index("--mcp-config") + 2].startswith("--")  # nothing swallowed
    assert "mcp__relay_memory" in argv[argv.index("--allowedTools") + 1].split(",")
    plain = get_adapter("claude").build(ctx(tmp_path)).argv
    assert "--mcp-config" not in plain


def test_codex_gets_the_server_as_config_overrides_that_are_toml(tmp_path: Path) -> None:
    argv = get_adapter("codex").build(ctx(tmp_path, memory_server=server(tmp_path))).argv
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    parsed = tomllib.loads("\n".join(o.replace("mcp_servers.relay_memory.", "") for o in overrides))
    assert parsed == {
        "command": "/usr/bin/python3",
        "args": ["-I", "-m", "relay_engine.agents.memory_server", "--notes", "n.json"],
        "required": True,  # codex waits for a required server before the first turn
    }
    assert argv[-1] == "Fix the parser"


def test_a_prompt_tells_an_agent_with_the_tools_to_use_them() -> None:
    parts = PromptParts(task_key="j/t", title="T", input="do", role="implementer", kind="work",
                        objective="", memory_notes=("t0: the cache is in src/cache.py",))  # fmt: skip
    told = assemble_prompt(replace(parts, memory_tools=True))
    assert "`memory_search`" in told and "`memory_add`" in told
    assert "- t0: the cache is in src/cache.py" in told  # the prelude stays
    assert "memory_search" not in assemble_prompt(parts)

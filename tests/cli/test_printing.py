"""What the CLI prints: others' words as written and without terminal controls, and tables
a narrow terminal can show.

Rich reads ``[...]`` in a string as markup: ``[bold]`` vanished from the line, and
``[/usr/bin/claude]``, a closing tag that matches nothing, raised a ``MarkupError`` that
ended the command with a trace. Every listing here reads rows holding such text."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import (
    BRACKETED,
    ESCAPES,
    ESCAPES_SHOWN,
    Workspace,
    cli_env,
    seed_bracketed_text,
)


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["status"], ["title", "ask", "rule"]),
        (["status", "j"], ["title", "ask"]),
        (["agents"], ["reason", "fix"]),
        (["schedules"], ["p"]),
        (["asks"], ["ask", "rule"]),
        (["events"], ["event"]),
    ],
)
@pytest.mark.parametrize(
    ("words", "printed"),
    [(BRACKETED, BRACKETED), (ESCAPES, ESCAPES_SHOWN)],
    ids=["markup", "escapes"],
)
def test_listings_show_others_words_as_written(
    sqlite_workspace: Workspace, command: list[str], shown: list[str], words: str, printed: str
) -> None:
    """Brackets as written; terminal controls (clear the screen, write the clipboard) never
    reach the terminal, which would obey them."""
    seed_bracketed_text(sqlite_workspace.store(), sqlite_workspace.path, words)
    done = sqlite_workspace.cli(*command)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())  # a table wraps long cells over lines
    for field in shown:
        assert f"{field} {printed}" in flat, flat
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", done.stdout + done.stderr)


def test_relay_init_names_a_bracketed_folder_as_it_is(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "[work]")
    ws.path.mkdir()
    done = ws.cli("init")
    assert done.returncode == 0, done.stderr
    assert f"wrote {ws.path / 'relay.toml'}" in done.stdout


def test_doctor_and_agents_in_a_narrow_terminal_give_each_agent_a_block(
    sqlite_workspace: Workspace,
) -> None:
    """Eleven columns folded into 80 left four letters a cell ("acce ss flag s"); below the
    width its table needs, each agent gets a heading and a line per fact."""
    ws = sqlite_workspace
    true = shutil.which("true") or "/bin/true"
    ws.configure(agents=[{"id": "local-true", "provider": "command", "command": [true],
                          "roles": ["implementer"], "sandbox": "none"}])  # fmt: skip
    seed_bracketed_text(ws.store(), ws.path)

    def lines(command: str, columns: int) -> list[str]:
        env = {**cli_env(), "COLUMNS": str(columns)}
        argv = ws.cli_argv(command)
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return [line.rstrip() for line in done.stdout.splitlines()]

    narrow = lines("doctor", 80)
    assert "local-true (command): ok" in narrow
    assert f"  executable    {true}" in narrow
    assert "  access flags  access = workspace-write" in narrow
    assert any(
        line.startswith("┃ agent") and "access flags" in line for line in lines("doctor", 200)
    )
    narrow = lines("agents", 80)
    assert "local-true (command): not logged in" in narrow
    assert f"  reason   reason {BRACKETED}" in narrow
    assert any(line.startswith("┃ agent") and "reason" in line for line in lines("agents", 200))

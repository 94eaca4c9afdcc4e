"""Text relay did not write shows as written: an agent's error, a CLI's message, a job's title.

Rich reads ``[...]`` in a string as markup: ``[bold]`` vanished from the line, and
``[/usr/bin/claude]``, a closing tag that matches nothing, raised a ``MarkupError`` that
ended the command with a trace. Every listing here reads rows holding such text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BRACKETED, Workspace, seed_bracketed_text


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
def test_listings_show_bracketed_text_as_written(
    sqlite_workspace: Workspace, command: list[str], shown: list[str]
) -> None:
    seed_bracketed_text(sqlite_workspace.store(), sqlite_workspace.path)
    done = sqlite_workspace.cli(*command)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())  # a table wraps long cells over lines
    for field in shown:
        assert f"{field} {BRACKETED}" in flat, flat


def test_relay_init_names_a_bracketed_folder_as_it_is(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "[work]")
    ws.path.mkdir()
    done = ws.cli("init")
    assert done.returncode == 0, done.stderr
    assert f"wrote {ws.path / 'relay.toml'}" in done.stdout

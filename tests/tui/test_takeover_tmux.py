"""Take over from the console, in a real terminal: ``T`` opens a tmux window running the
agent's own CLI, resumed, in the task's worktree; the task is HELD and a second engine
leaves it alone; handing it back with words runs the next attempt reading them; handing it
back done merges what the worktree holds.

The agent's interactive CLI is a stand-in script: called as relay calls claude headless, it
runs the sim agent (speaking claude's stream); called as ``claude --resume SESSION`` (what
a take-over opens) it records its argv and working directory and waits, as a person's
session would.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from gitrepos import git
from helpers import Workspace, init_repo, job_toml, sim, stop_process, tasks, wait_for
from sqlmodel import select
from tmux_helpers import Tmux, crash_files, relay_tui

from relay_engine.store.schema import Execution, ProviderSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

STAND_IN = """#!/bin/sh
# A stand-in for claude: headless (relay's flags) it is the sim agent; interactive
# (claude --resume SESSION, as a take-over runs it) it records how it was started.
if [ "$1" = "--resume" ] && [ "$#" -eq 2 ]; then
    pwd > {record}/cwd
    echo "$@" > {record}/argv  # last: the test reads both once this one exists
    exec sleep 600
fi
exec {python} -m relay_engine.agents.sim_agent --format claude "$@"
"""


def stand_in(path: Path, record: Path) -> Path:
    record.mkdir()
    script = path / "claude-stand-in"
    script.write_text(STAND_IN.format(record=record, python=sys.executable))
    script.chmod(0o755)
    return script


def held(ws: Workspace, key: str) -> bool:
    return tasks(ws.store())[key].state == "HELD"


def test_take_over_and_hand_back_from_the_console_in_tmux(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    record = ws.path / "record"
    agent = {"id": "claude-sim", "provider": "claude", "command": [str(stand_in(ws.path, record))]}
    ws.configure(agents=[agent], lease=5.0)
    repo = init_repo(ws.path / "repo")
    work = [
        {"id": "prep", "workstream": "w", "sim": sim(0.1)},  # leaves the session to resume
        {"id": "t", "workstream": "w", "depends_on": ["prep"], "sim": sim(30, lines=60)},
    ]
    ws.submit(job_toml("j", work, repo=str(repo), review=False))
    tmux = Tmux("takeover", ws.path)
    try:
        tmux.start(relay_tui("--workspace", str(ws.path)), (160, 48), ws.path / "exit")
        tmux.wait_for(lambda screen: "Jobs & tasks" in screen)
        wait_for(lambda: tasks(ws.store())["j/t"].state == "RUNNING", timeout=60)
        take_over(tmux)
        argv = wait_for(lambda: (record / "argv").exists() and (record / "argv").read_text(), 30)
        worktree = ws.path / ".relay" / "worktrees" / "j" / "t"
        with ws.store().read() as session:
            (saved,) = session.exec(select(ProviderSession.session_id)).all()
        assert argv.split() == ["--resume", saved]
        assert Path((record / "cwd").read_text().strip()) == worktree
        assert any(line.split("\t")[1].startswith("relay:j/t") for line in tmux.windows())
        assert held(ws, "j/t")
        a_second_engine_leaves_it_alone(ws)

        tmux.run("select-window", "-t", "main:0")
        console_shows_held(tmux)
        tmux.keys("T")  # on the held task: hand it back, with words this time
        tmux.wait_for(lambda screen: "Hand back j/t" in screen)
        tmux.keys("finish it with a test", literal=True)
        tmux.wait_for(lambda screen: "finish it with a test" in screen)
        tmux.keys("Enter")
        wait_for(lambda: tasks(ws.store())["j/t"].attempt == 2, timeout=60)
        wait_for(lambda: "finish it with a test" in latest_prompt(ws), timeout=60)

        take_over(tmux)  # again, and this time done by hand
        wait_for(lambda: held(ws, "j/t"), timeout=30)
        wait_for(lambda: len(tmux.windows()) == 3, timeout=30)  # its window opened
        wait_for((worktree / ".git").exists, timeout=30)
        (worktree / "by-hand.txt").write_text("typed by a person\n")
        tmux.run("select-window", "-t", "main:0")
        console_shows_held(tmux)
        tmux.keys("T")
        tmux.wait_for(lambda screen: "Hand back j/t" in screen)
        tmux.keys("C-d")
        wait_for(lambda: tasks(ws.store())["j/t"].state == "SUCCEEDED", timeout=60)
        shown = git(repo, "show", "relay/j:by-hand.txt")
        assert shown == "typed by a person"
        tmux.keys("q")
        tmux.keys("y")
    finally:
        tmux.kill()
    assert not crash_files(ws.path / ".relay")


def console_shows_held(tmux: Tmux) -> None:
    """The row on screen says held (✎) before T is pressed on it: T offers to take over a
    row the console still shows running, and its refresh can trail the database by a tick."""
    tmux.wait_for(lambda screen: "✎ t " in screen)


def take_over(tmux: Tmux) -> None:
    """The operator's keys: only the running task in view, its row, T, yes."""
    tmux.run("select-window", "-t", "main:0")
    for _ in range(2):
        tmux.keys("Escape")
        time.sleep(0.3)
    tmux.wait_for(lambda screen: "filter: " not in screen)
    tmux.keys("/")
    tmux.wait_for(lambda screen: "filter tasks:" in screen)
    tmux.keys("j/t", literal=True)
    tmux.wait_for(lambda screen: "⧩ j/t" in screen)
    tmux.keys("Enter")
    tmux.wait_for(lambda screen: "T Take over" in screen)  # the keys of the table again
    tmux.keys("G")
    tmux.wait_for(lambda screen: "▶ j/t" in screen)
    tmux.keys("T")
    tmux.wait_for(lambda screen: "Take over j/t" in screen)
    tmux.keys("y")


def a_second_engine_leaves_it_alone(ws: Workspace) -> None:
    before = tasks(ws.store())["j/t"].attempt
    engine = ws.popen("run", log_name="second-engine.log")
    try:
        time.sleep(4)  # many ticks of a second engine
        task = tasks(ws.store())["j/t"]
        assert (task.state, task.attempt, task.execution_id) == ("HELD", before, None)
    finally:
        stop_process(engine)


def latest_prompt(ws: Workspace) -> str:
    with ws.store().read() as session:
        runs = session.exec(select(Execution).where(Execution.task_key == "j/t")).all()
    folders = sorted((Path(r.artifact_dir) for r in runs if r.artifact_dir), key=str)
    texts = [(f / "prompt.md").read_text() for f in folders if (f / "prompt.md").exists()]
    return "\n".join(texts)


def test_outside_tmux_the_console_shows_the_line_to_paste(sqlite_workspace: Workspace) -> None:
    """relay-tui run outside tmux (TMUX unset) cannot open a window: the dialog gives the
    exact line, which runs the stand-in in the worktree."""
    ws = sqlite_workspace
    record = ws.path / "record"
    agent = {"id": "claude-sim", "provider": "claude", "command": [str(stand_in(ws.path, record))]}
    ws.configure(agents=[agent], lease=5.0)
    repo = init_repo(ws.path / "repo")
    ws.submit(job_toml("j", [{"id": "t", "sim": sim(20, lines=40)}], repo=str(repo), review=False))
    tmux = Tmux("paste", ws.path)
    try:
        tmux.start(["env", "-u", "TMUX", *relay_tui("--workspace", str(ws.path))], (120, 36))
        tmux.wait_for(lambda screen: "Jobs & tasks" in screen)
        wait_for(lambda: tasks(ws.store())["j/t"].state == "RUNNING", timeout=60)
        take_over(tmux)
        screen = tmux.wait_for(lambda text: "Run this in a shell" in text)
        # The line sits between the question and the hint, from the question's column to the
        # dialog's border (the panes behind it have bars of the same character); the dialog
        # wraps it wherever it likes, even right after "cd".
        lines = screen.splitlines()
        question = next(i for i, line in enumerate(lines) if "No window opened" in line)
        left = lines[question].index("No window opened")
        hint = next(i for i in range(question, len(lines)) if "It opens" in lines[i])
        rows = []
        for line in lines[question + 1 : hint]:
            end = line.find("█", left)
            rows.append(line[left : end if end >= 0 else len(line)])
        # The dialog wraps a long line at a space, or inside a path longer than its width.
        shown = "".join(rows).replace(" ", "")
        line = f"cd {ws.path / '.relay/worktrees/j/t'} && sh {ws.path / '.relay/takeover/j/t.sh'}"
        assert line.replace(" ", "") in shown, screen
        script = (ws.path / ".relay" / "takeover" / "j" / "t.sh").read_text()
        assert "claude-stand-in" in script and "cd " in script
        tmux.keys("Escape", "q", "y")
    finally:
        tmux.kill()

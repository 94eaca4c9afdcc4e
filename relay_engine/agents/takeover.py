"""Taking a task over: the agent's own interactive CLI, in the task's worktree, resumed from
the task's provider session, for the operator to work in by hand.

What is written here is a launcher script (the agent's environment, secrets included, stay
in a file only the operator can read, not on a command line) and the one line that runs it:
in a new tmux window when relay runs inside tmux, else printed for the operator to paste.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from relay_engine.agents.launch import executable_of
from relay_engine.contracts.accounts import cli_of
from relay_engine.contracts.config import AgentConfig

RESUME = {
    "claude": ("--resume",),
    "qwen": ("--resume",),
    "gemini": ("--resume",),
    "copilot": ("--resume",),
    "opencode": ("--session",),
    "codex": ("resume",),
}
"""How each CLI resumes a session interactively: the flag (or subcommand) before its id.
An ``acp`` agent's session is resumed by its own CLI (``opencode --session ses_…``)."""


@dataclass(frozen=True)
class TakeOverLine:
    worktree: Path
    argv: tuple[str, ...]
    script: Path

    @property
    def command_line(self) -> str:
        """What the operator runs where relay cannot open a window: ``cd DIR && sh SCRIPT``."""
        return f"cd {shlex.quote(str(self.worktree))} && sh {shlex.quote(str(self.script))}"


def interactive_argv(agent: AgentConfig, session_id: str | None) -> tuple[str, ...]:
    """The agent's CLI as a person runs it, resumed from ``session_id`` when it has one; a
    shell for agents that have no interactive form (``command``, ``sim``)."""
    cli = cli_of(agent.provider, agent.command)  # an acp agent's session is its CLI's
    if cli not in RESUME:
        return (os.environ.get("SHELL") or "/bin/sh",)
    exe = (agent.command[0],) if agent.command else (executable_of(agent),)
    if not session_id:
        return exe
    return (*exe, *RESUME[cli], session_id)


def write_launcher(
    directory: Path, name: str, worktree: Path, argv: tuple[str, ...], env: Mapping[str, str]
) -> TakeOverLine:
    """A script that sets the agent's environment and runs its CLI in the worktree."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / f"{name}.sh"
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    script.write_text(
        "#!/bin/sh\n# relay takeover: the agent's own CLI on its task; hand back when done.\n"
        f"{exports}cd {shlex.quote(str(worktree))} || exit 1\nexec {shlex.join(argv)}\n",
        encoding="utf-8",
    )
    script.chmod(0o700)
    return TakeOverLine(worktree, argv, script)


def open_in_tmux(line: TakeOverLine, title: str) -> str | None:
    """A new window of the tmux session relay runs in; why not, when it cannot."""
    if not os.environ.get("TMUX"):
        return "not inside tmux"
    tmux = shutil.which("tmux")
    if tmux is None:
        return "tmux is not installed"
    argv = [tmux, "new-window", "-c", str(line.worktree), "-n", title[:30], "sh", str(line.script)]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    return None if result.returncode == 0 else (result.stderr.strip() or "tmux refused")

"""The real ``relay-tui`` in a terminal: a private tmux server per test (``tmux -L NAME``),
keys sent as a terminal sends them, the screen read back as text.

Pilot drives the app from inside its event loop; these drive the installed command through
a real pty, so they catch what only a terminal shows (a crash that ends the process, a
layout that only a resize reveals, what an operator's burst of keys does).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from fnmatch import fnmatch
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def need_tmux() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    return tmux


class Tmux:
    """One private tmux server with one window running ``argv``."""

    def __init__(self, name: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.tmux = need_tmux()
        self.name = f"relay-{name}-{os.getpid()}"
        self.cwd = cwd
        self.env = {**os.environ, "TERM": "xterm-256color", "TZ": "UTC", **(env or {})}
        self.env.pop("TMUX", None)  # a tmux inside the test's tmux would be the user's
        for variable in ("COLUMNS", "LINES"):  # they would override the window's own size
            self.env.pop(variable, None)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.tmux, "-L", self.name, *args],
            capture_output=True, text=True, check=check, cwd=self.cwd, env=self.env, timeout=30,
        )  # fmt: skip

    def start(self, argv: Sequence[str], size: tuple[int, int], log: Path | None = None) -> None:
        """A detached session of ``size`` running ``argv`` (its exit status into ``log``;
        Textual draws on stderr, so what the command prints stays on the screen)."""
        line = shlex.join(argv)
        if log is not None:
            line = f"{line}; echo $? > {shlex.quote(str(log))}"
        width, height = size
        for attempt in range(3):  # a server killed just before may still be on its way out
            started = self.run("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x",
                               str(width), "-y", str(height),
                               f"sh -c {shlex.quote(line + '; sleep 600')}", check=attempt == 2)  # fmt: skip
            if started.returncode == 0:
                break
            time.sleep(0.5)
        self.run("set-option", "-g", "status", "off")
        self.run("set-window-option", "-g", "aggressive-resize", "on", check=False)

    def keys(self, *keys: str, literal: bool = False) -> None:
        """One ``send-keys`` call: the keys arrive as one burst, with no pause between."""
        self.run("send-keys", "-t", "main", *(["-l"] if literal else []), *keys)

    def resize(self, width: int, height: int) -> None:
        self.run("resize-window", "-t", "main", "-x", str(width), "-y", str(height))

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "main").stdout

    def wait_for(self, condition: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        text = self.screen()
        while not condition(text):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; the screen shows:\n{text}")
            time.sleep(0.2)
            text = self.screen()
        return text

    def windows(self) -> list[str]:
        """``index name command path`` of each window."""
        found = self.run(
            "list-windows", "-a", "-F",
            "#{window_index}\t#{window_name}\t#{pane_current_command}\t#{pane_current_path}",
        )  # fmt: skip
        return found.stdout.splitlines()

    def kill(self) -> None:
        self.run("kill-server", check=False)
        for _ in range(50):  # until the server is gone, so a new one can take its socket
            if self.run("has-session", check=False).returncode != 0:
                return
            time.sleep(0.1)


def relay_tui(*args: str) -> list[str]:
    return [str(BIN / "relay-tui"), *args]


def crash_files(*directories: Path) -> list[Path]:
    """Crash reports anywhere below: a workspace's ``.relay/logs`` or the temp directory.
    ``os.walk`` skips folders that vanish as it walks (the live demo's git repositories
    change under it), where ``Path.rglob`` raises."""
    found: list[Path] = []
    for directory in directories:
        for folder, subfolders, files in os.walk(directory):
            subfolders[:] = [name for name in subfolders if not name.endswith(".git")]
            found += [Path(folder) / f for f in files if fnmatch(f, "relay-tui-crash-*.txt")]
    return sorted(found)

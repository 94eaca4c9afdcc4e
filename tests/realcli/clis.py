"""Where the pinned agent CLIs are installed: once per lockfile, under the user's cache.

``~/.cache/relay-realcli/lock-<hash>`` (``RELAY_REALCLI_CACHE`` moves the cache), so
worktrees pinning different versions do not reinstall over each other. With
``--realcli-latest`` the tier runs against the newest published versions instead, installed
in ``latest/`` beside them (updated when npm has newer ones), to see the CLIs drift before
the pins are moved. ``python tests/realcli/clis.py`` prints the pinned and latest versions
as the README's table.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
CLIS = ("claude", "codex", "gemini", "qwen", "opencode", "copilot")
LATEST_DIR = "latest"


def pinned() -> dict[str, str]:
    """npm package -> the version package.json pins."""
    return dict(json.loads((HERE / "package.json").read_text())["dependencies"])


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "relay-realcli"
    return Path(os.environ.get("RELAY_REALCLI_CACHE", default))


def install_dir() -> Path:
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:12]
    return cache_dir() / f"lock-{digest}"


def _installed(folder: Path) -> bool:
    """The pinned versions are there (npm ci is skipped when the lockfile has not changed)."""
    lock = folder / "package-lock.json"
    same_lock = lock.is_file() and lock.read_bytes() == (HERE / "package-lock.json").read_bytes()
    bins = all((folder / "node_modules" / ".bin" / cli).exists() for cli in CLIS)
    return same_lock and bins


def install(npm: str) -> Path:
    """``npm ci`` the pinned CLIs unless they are there already; returns node_modules/.bin.

    Under a file lock: xdist workers running two real-CLI modules must not both npm ci
    into the same folder.
    """
    folder = install_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed(folder):
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(HERE / name, folder / name)
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                check=True,
                timeout=600,
            )
    return folder / "node_modules" / ".bin"


def install_latest(npm: str) -> Path:
    """``npm install PKG@latest`` for every CLI into the cache's ``latest/`` folder (its own
    package.json, never the pinned lockfile); returns node_modules/.bin."""
    folder = cache_dir() / LATEST_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{LATEST_DIR}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = {"name": "relay-realcli-latest", "private": True, "dependencies": {}}
        (folder / "package.json").write_text(json.dumps(manifest))
        wanted = [f"{package}@latest" for package in pinned()]
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *wanted],
            cwd=folder, check=True, timeout=900,
        )  # fmt: skip
    return folder / "node_modules" / ".bin"


def latest_versions(npm: str) -> dict[str, str | None]:
    """npm package -> the newest published version (``npm view``), None when npm could not
    say (no registry)."""
    found: dict[str, str | None] = {}
    for package in pinned():
        done = subprocess.run([npm, "view", package, "version"], capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        found[package] = (done.stdout.strip() or None) if done.returncode == 0 else None
    return found


def versions_table(npm: str) -> str:
    latest = latest_versions(npm)
    rows = ["| CLI | npm package | pinned | latest (checked) |", "| --- | --- | --- | --- |"]
    versions = pinned()
    for package, cli in PACKAGES.items():
        shown = latest.get(package) or "unknown"
        rows.append(f"| {cli} | `{package}` | {versions[package]} | {shown} |")
    return "\n".join(rows)


PACKAGES = {
    "@anthropic-ai/claude-code": "claude",
    "@openai/codex": "codex",
    "@google/gemini-cli": "gemini",
    "@qwen-code/qwen-code": "qwen",
    "opencode-ai": "opencode",
    "@github/copilot": "copilot",
}


def leftover_clis(started: float, home: Path) -> list[dict[str, object]]:
    """CLI processes (run from the install folder) started since ``started`` whose HOME is
    under ``home``: what one test left running, not what a test in another xdist worker is
    running right now."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        info = proc.info
        if not info["create_time"] or info["create_time"] < started - 1:
            continue
        if str(cache_dir()) not in " ".join(info["cmdline"] or []):
            continue
        try:
            proc_home = proc.environ().get("HOME", "")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if proc_home.startswith(str(home)):
            found.append(info)
    return found


if __name__ == "__main__":
    print(versions_table(shutil.which("npm") or sys.exit("npm is not installed")))

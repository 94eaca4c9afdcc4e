"""Where the pinned agent CLIs are installed: once per lockfile, under the user's cache.

``~/.cache/relay-realcli/lock-<hash>`` (``RELAY_REALCLI_CACHE`` moves the cache), so
worktrees pinning different versions do not reinstall over each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
CLIS = ("claude", "codex", "gemini", "qwen", "opencode", "copilot")


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

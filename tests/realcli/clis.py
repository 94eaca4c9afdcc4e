"""Where the pinned agent CLIs are installed: once per lockfile, under the user's cache.

``~/.cache/relay-realcli/lock-<hash>`` (``RELAY_REALCLI_CACHE`` moves the cache), so
worktrees pinning different versions do not reinstall over each other.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

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
    """``npm ci`` the pinned CLIs unless they are there already; returns node_modules/.bin."""
    folder = install_dir()
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

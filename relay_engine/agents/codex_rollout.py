"""Codex's plan windows, from its own session log.

``codex exec --json`` prints no ``rate_limits`` (docs/agent-clis.md: not even with the
``x-codex-primary-*`` headers on every response), but codex writes them into the session's
rollout file, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread id>.jsonl``, as an
``event_msg`` ``token_count`` with ``rate_limits`` (``primary``/``secondary``:
``used_percent``, ``window_minutes``, ``resets_at``). relay reads the newest of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from relay_engine.core.quota import QuotaReading, readings_in_event

TAIL_BYTES = 256 * 1024


def codex_home(env: Mapping[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".codex"


def rollout_readings(env: Mapping[str, str], thread_id: str) -> list[QuotaReading]:
    """The last ``rate_limits`` codex logged for ``thread_id``; [] when there is none."""
    if not thread_id or "/" in thread_id:
        return []
    sessions = codex_home(env) / "sessions"
    try:
        files = sorted(sessions.glob(f"*/*/*/rollout-*{thread_id}.jsonl"))
    except OSError:
        return []
    for path in reversed(files):
        for line in reversed(_tail(path).splitlines()):
            if "rate_limits" not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            found = readings_in_event(event)
            if found:
                return found
    return []


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(path.stat().st_size - TAIL_BYTES, 0))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""

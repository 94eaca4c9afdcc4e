"""State glyphs and theme-derived styles, so colour follows the theme (and NO_COLOR)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from rich.text import Text

GLYPHS = {
    "DRAFT": "○",
    "QUEUED": "◌",
    "RUNNING": "▶",
    "PARKED": "‖",
    "SUCCEEDED": "✔",
    "FAILED": "✘",
    "CANCELLED": "⊘",
    "BLOCKED": "⊗",
    "HELD": "✎",
    "DROPPED": "⊖",
    "ACTIVE": "◆",
    "REVIEWING": "◎",
    "READY": "◉",
    "MERGED": "✔",
    "CLOSED": "⊘",
    "PLANNING": "…",
    "SUPERSEDED": "⊘",
    "ok": "●",
    "limited": "‖",
}
_THEME_KEYS = {
    "RUNNING": "accent",
    "SUCCEEDED": "success",
    "MERGED": "success",
    "FAILED": "error",
    "BLOCKED": "error",
    "PARKED": "warning",
    "HELD": "text-secondary",  # readable as text; plain secondary is a dark fill colour
    "limited": "warning",
    "ok": "success",
    "QUEUED": "primary",
    "ACTIVE": "primary",
    "PLANNING": "accent",
    "REVIEWING": "accent",
    "READY": "success",
    "ready": "success",
    "budget": "warning",
    "unreachable": "warning",
    "auth": "error",
    "cli-missing": "error",
    "cli-rejected": "error",
}
_PLAIN = {"DRAFT": "dim", "CANCELLED": "dim", "SUPERSEDED": "dim", "CLOSED": "dim",
          "DROPPED": "dim"}  # fmt: skip


def theme_styles(variables: Mapping[str, str]) -> dict[str, str]:
    """Map states to Rich styles built from the current theme's variables."""
    styles = {state: variables.get(key, "") for state, key in _THEME_KEYS.items()}
    styles.update(_PLAIN)
    return styles


def styled(text: str, state: str, styles: Mapping[str, str]) -> Text:
    return Text(text, style=styles.get(state, ""), no_wrap=True, end="")


def glyph(state: str, styles: Mapping[str, str]) -> Text:
    """The state's glyph and the space after it: labels then start in the same column."""
    return styled(GLYPHS.get(state, "?") + " ", state, styles)


def clock_time(at: float | None) -> str:
    if at is None:
        return "—"
    return time.strftime("%H:%M:%S", time.localtime(at))


def short_duration(seconds: float | None) -> str:
    """``40s``, ``12m``, ``2h05``, ``3d``: a countdown or an age in at most five cells."""
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours}h{minutes:02d}" if minutes else f"{hours}h"
    return f"{seconds // 86400}d"


def bar(done: int, total: int, width: int = 10) -> str:
    if total <= 0:
        return "░" * width
    filled = round(width * done / total)
    return "█" * filled + "░" * (width - filled)


def short_id(ident: str) -> str:
    """A generated id's first 8 characters (as ``relay status`` shows it); a short one whole,
    rather than cut into something that looks like a typo."""
    return ident if len(ident) <= 12 else ident[:8]


def clip(text: str | None, width: int) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"

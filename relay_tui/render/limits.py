"""Usage limits in words: Claude Code reports its limit as ``Claude AI usage limit
reached|1796128778`` (the reset as epoch seconds after a bar); nobody reads epochs."""

from __future__ import annotations

import re
import time

from relay_tui.render.styles import duration

EPOCH_AFTER_BAR = re.compile(r"\|(\d{9,11})\b")


def reset_words(at: float, now: float | None) -> str:
    """``resets 09:23`` (a later day: ``resets Jan 02 09:23``), with ``in 23:00`` when
    ``now`` is known and the reset is ahead."""
    local, today = time.localtime(at), time.localtime(now if now is not None else at)
    same_day = local[:3] == today[:3]
    when = time.strftime("%H:%M" if same_day else "%b %d %H:%M", local)
    ahead = now is not None and at > now
    return f"resets {when}" + (f" (in {duration(at - now)})" if ahead and now else "")


def limit_words(text: str | None, now: float | None = None) -> str:
    """``text`` with each ``|EPOCH`` replaced by when that is: ``Claude AI usage limit
    reached; resets 09:23 (in 1h05m)``."""
    if not text:
        return text or ""
    return EPOCH_AFTER_BAR.sub(lambda m: "; " + reset_words(float(m.group(1)), now), text)

"""Times as operators read them in events and tables.

Pure except that :func:`format_time` reads the local time zone and today's date.
"""

from __future__ import annotations

import re
import time

EPOCH_AFTER_BAR = re.compile(r"\|(\d{9,11})\b")
"""Claude Code states its limit as ``Claude AI usage limit reached|1796128778``: the reset
as epoch seconds after a bar, which nobody reads."""


def format_time(epoch: float | None) -> str:
    """Local wall-clock time, with the date only when it is not today."""
    if epoch is None:
        return "unknown"
    moment = time.localtime(epoch)
    if time.strftime("%Y-%m-%d", moment) == time.strftime("%Y-%m-%d"):
        return time.strftime("%H:%M:%S", moment)
    return time.strftime("%Y-%m-%d %H:%M", moment)


def duration(seconds: float | None) -> str:
    """``4:05`` under an hour, ``1h05m`` above: an elapsed time or a countdown."""
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}:{secs:02d}"


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
    reached; resets 09:23 (in 1h05m)``. The console and the CLI both say it so."""
    if not text:
        return text or ""
    return EPOCH_AFTER_BAR.sub(lambda m: "; " + reset_words(float(m.group(1)), now), text)

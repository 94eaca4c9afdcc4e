"""Quota windows: how much of a plan's window an account has used, seen before the wall.

Claude Code on a subscription reports every answer's standing in a ``rate_limit_event``
(``status`` allowed | allowed_warning | rejected, ``rateLimitType`` five_hour | seven_day |
…, ``utilization`` once past a threshold, ``resetsAt``); codex may report ``rate_limits``
(``primary``/``secondary``: ``used_percent``, ``window_minutes``, ``resets_at`` or
``resets_in_seconds``). Above the account's ``stop_at`` share of a window no new task starts
on that account until the window resets: running work finishes, new work goes to another
account or provider, or parks until the reset.

Pure: readings come from parsed events, decisions take ``now``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from relay_engine.contracts.numbers import as_count, as_number, epoch_seconds

WINDOW_NAMES = {300: "five_hour", 1440: "daily", 10080: "seven_day"}
PERCENT_MAX = 1000.0  # a window's use past this is misread, not overage
NO_RESET_HOLD_S = 15 * 60.0  # a window over its watermark that names no reset: look again then


@dataclass(frozen=True)
class QuotaReading:
    """One window's standing as a CLI reported it (``utilization`` 0..1, None if unsaid)."""

    window: str  # five_hour | seven_day | seven_day_opus | primary | …
    status: str  # allowed | allowed_warning | rejected
    utilization: float | None = None
    resets_at: float | None = None
    window_minutes: int | None = None
    threshold: float | None = None  # the warning threshold the CLI said was crossed
    overage: str | None = None  # claude's overageStatus


@dataclass(frozen=True)
class QuotaWindow:
    """A reading kept for an account: what the read model and the decisions see."""

    key: str  # account key: "claude" or "claude/work"
    reading: QuotaReading
    observed_at: float


@dataclass(frozen=True)
class Watermark:
    """An account that may start nothing new until ``until``, and why, in words."""

    key: str
    window: str
    utilization: float | None
    until: float
    reason: str  # "claude/work at 96% of its five-hour window until 17:10"


def readings_in_event(event: dict[str, Any]) -> list[QuotaReading]:
    """The quota windows one stream event reports; [] for any other event."""
    if not isinstance(event, dict):
        return []
    if event.get("type") == "rate_limit_event":
        info = event.get("rate_limit_info")
        reading = _claude_reading(info if isinstance(info, dict) else event)
        return [reading] if reading is not None else []
    limits = _find_rate_limits(event)
    return _codex_readings(limits, _now_hint(event)) if limits is not None else []


def _claude_reading(info: dict[str, Any]) -> QuotaReading | None:
    window = info.get("rateLimitType") or info.get("rate_limit_type")
    status = str(info.get("status") or "").lower()
    if not status or not window:
        return None  # "allowed" with no window names nothing to keep
    utilization = _fraction(info.get("utilization"))
    if utilization is None and status == "rejected":
        utilization = 1.0
    return QuotaReading(
        window=str(window or "unknown"),
        status=status,
        utilization=utilization,
        resets_at=epoch_seconds(info.get("resetsAt", info.get("resets_at"))),
        threshold=_fraction(info.get("surpassedThreshold")),
        overage=info.get("overageStatus") if isinstance(info.get("overageStatus"), str) else None,
    )


def _find_rate_limits(event: dict[str, Any]) -> dict[str, Any] | None:
    """codex puts ``rate_limits`` on a token_count event, nested under ``msg``/``info``/
    ``payload`` depending on the channel; take it wherever it is."""
    for holder in (event, event.get("msg"), event.get("info"), event.get("payload")):
        if isinstance(holder, dict):
            found = holder.get("rate_limits")
            if isinstance(found, dict):
                return found
            inner = holder.get("info")
            nested = inner.get("rate_limits") if isinstance(inner, dict) else None
            if isinstance(nested, dict):
                return nested
    return None


def _now_hint(event: dict[str, Any]) -> float | None:
    stamp = event.get("timestamp")
    return epoch_seconds(stamp)


def _codex_readings(limits: dict[str, Any], now: float | None) -> list[QuotaReading]:
    found = []
    for slot in ("primary", "secondary"):
        window = limits.get(slot)
        if not isinstance(window, dict):
            continue
        percent = as_number(window.get("used_percent"))
        if percent is None or not 0 <= percent <= PERCENT_MAX:
            continue
        minutes = as_count(window.get("window_minutes"))
        resets = epoch_seconds(window.get("resets_at"))
        after = as_number(window.get("resets_in_seconds"))
        if resets is None and after is not None and now is not None:
            resets = epoch_seconds(now + after)
        used = percent / 100.0
        found.append(
            QuotaReading(
                window=WINDOW_NAMES.get(minutes or 0, slot),
                status="rejected" if used >= 1.0 else "allowed",
                utilization=used,
                resets_at=resets,
                window_minutes=minutes,
            )
        )
    return found


def watermark(windows: Iterable[QuotaWindow], stop_at: float, now: float) -> Watermark | None:
    """Whether an account's windows hold new work back at ``now``, and until when.

    A window counts while its reset is ahead and it is at or above ``stop_at`` (or the CLI
    said it is spent). When several do, the account waits for the last of them; a window
    that names no reset holds for :data:`NO_RESET_HOLD_S` after it was seen.
    """
    holding = []
    for window in windows:
        reading = window.reading
        over = reading.status == "rejected" or (
            reading.utilization is not None and reading.utilization >= stop_at
        )
        until = reading.resets_at
        if until is None:
            until = window.observed_at + NO_RESET_HOLD_S
        if over and until > now:
            holding.append((until, window))
    if not holding:
        return None
    until, window = max(holding, key=lambda pair: (pair[0], pair[1].reading.window))
    reading = window.reading
    share = f"{reading.utilization:.0%}" if reading.utilization is not None else "the limit"
    reason = (
        f"{window.key} at {share} of its {window_label(reading.window)} window "
        f"until {clock(until, now)}"
    )
    return Watermark(window.key, reading.window, reading.utilization, until, reason)


def window_label(window: str) -> str:
    """``five_hour`` -> ``five-hour``, as a person says it."""
    return window.replace("_", "-")


def clock(epoch: float, now: float) -> str:
    """Local wall-clock time of ``epoch``, with the date when it is not ``now``'s day."""
    moment, today = time.localtime(epoch), time.localtime(now)
    if moment[:3] == today[:3]:
        return time.strftime("%H:%M", moment)
    return time.strftime("%Y-%m-%d %H:%M", moment)


def _fraction(value: object) -> float | None:
    """A share of a window used: a fraction, or a percentage said as such (over 1.5); None
    for what cannot be one (negative, or more than ten windows' worth)."""
    number = as_number(value)
    if number is None or not 0 <= number <= PERCENT_MAX:
        return None
    return number / 100.0 if number > 1.5 else number

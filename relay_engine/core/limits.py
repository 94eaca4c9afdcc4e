"""Recognise provider usage/rate limits in agent CLI output and work out when they reset.

Pure: no I/O and no clock reads; `now` is always passed in.

Heuristics (the CLIs print these as prose, so matching is deliberately narrow):

* A *limit line* must carry a phrase that only appears in limit errors: "usage limit reached",
  "hit your (usage) limit", "N-hour/weekly limit reached", "limit will reset", "exhausted your
  (daily) quota/capacity", "quota exceeded", "RESOURCE_EXHAUSTED" (upper case, as the API spells
  it), "rate_limit_error". Generic rate-limit words only count when they read like an error:
  "429" next to error/status/code/HTTP/"Too Many Requests"; "rate limit" followed or preceded by
  exceeded/reached/hit/error; "Too Many Requests". A sentence in ordinary prose such as "add a
  rate limit to the API" does not match.
* The reset time is looked for on the limit line itself first, then in the lines around it
  (pretty-printed JSON errors put `retryDelay` a few lines below `RESOURCE_EXHAUSTED`).
* The most recent limit line that yields a reset time wins; otherwise the most recent usage-limit
  line; otherwise the most recent rate-limit line (reset_at=None: the caller backs off).
* Only the first 16 KiB and the last 64 KiB of a large text are scanned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from relay_engine.contracts.numbers import epoch_seconds

HEAD_BYTES = 16 * 1024
TAIL_BYTES = 64 * 1024
SOURCE_MAX = 300
_WINDOW_BEFORE = 15
_WINDOW_AFTER = 40
_MAX_HITS = 50
GEMINI_QUOTA_ZONE = "America/Los_Angeles"
_BACKOFF_MINUTES = (5, 15, 30, 60)
MIN_WAIT_S = 5.0  # a reset sooner than this is floored to it: never a relaunch storm
RESET_HORIZON_S = 366 * 86400.0  # no provider's window is longer: a later reset is misread


@dataclass(frozen=True)
class LimitSignal:
    provider: str
    reset_at: float | None
    source_text: str
    kind: str  # "usage" | "rate"


# --- limit-line indicators ----------------------------------------------------------------

_USAGE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"usage limit (?:reached|hit|exceeded)",
        r"hit (?:your|the) (?:usage |session |weekly |daily )?limit",
        r"\b(?:\d+[- ]hour|weekly|daily|monthly|session|opus|sonnet) limit (?:reached|hit)",
        r"limits? will reset",
        r"out of (?:extra )?usage",
        r"exhausted your (?:\w+ )?(?:quota|capacity)",
        r"quota exceeded|exceeded (?:your )?(?:current )?quota",
        r"usage_limit_reached",
    )
]
_RATE_PATTERNS = [
    re.compile(r"RESOURCE_EXHAUSTED"),
    re.compile(r"rate_limit_(?:error|exceeded)", re.IGNORECASE),
    re.compile(r"too many requests", re.IGNORECASE),
    re.compile(r"^\W*please retry in \d+(?:\.\d+)?\s*s(?:ec(?:ond)?s?)?\b", re.IGNORECASE),
    # "error 429", "status code: 429", "HTTP/1.1 429", not "errors (429/503/529)" in a --help
    re.compile(r"\b(?:error|status|code|http)(?!s\b)\W{0,4}(?:\w+\W{1,3})?429\b", re.IGNORECASE),
    re.compile(r"\b429\b\W{0,4}(?:too many|error|resource|rate)", re.IGNORECASE),
    re.compile(r"rate[ _-]?limit(?:ed|s)?\W{0,3}(?:exceeded|reached|hit)", re.IGNORECASE),
    re.compile(
        r"(?:exceeded|reached|hit)\s+(?:the\s+|a\s+|your\s+)?rate[ _-]?limit", re.IGNORECASE
    ),
]

# --- reset-time extractors ------------------------------------------------------------------

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_TIME = r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?(?![\w:])"
_DATE = (
    r"(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?"
)
_ZONE = r"(?:\s*\((?P<zone>[A-Za-z][\w/+-]*)\)|\s+(?P<zone2>UTC|GMT)\b)?"
_EPOCH_PIPE = re.compile(r"limit reached\|(\d{10,13})\b", re.IGNORECASE)
_EPOCH_FIELD = re.compile(
    r"(?:resetsAt|resets_at|reset_at|resetAt)\\?\"?\s*[:=]\s*(\d{10,13})\b", re.IGNORECASE
)
_UNIT = r"(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)"
_DURATION = rf"(?:\d+(?:\.\d+)?\s*{_UNIT}(?![a-z])(?:\s*,?\s*(?:and\s+)?)?)+"
_IN_DURATION = re.compile(
    rf"(?:try again|retry|resets?|available again)\s+(?:in|after)\s+(?P<dur>{_DURATION})",
    re.IGNORECASE,
)
_DURATION_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})(?![a-z])", re.IGNORECASE)
_RETRY_DELAY = re.compile(r"retryDelay\\?\"?\s*:\s*\\?\"(\d+(?:\.\d+)?)s", re.IGNORECASE)
_RETRY_AFTER = re.compile(r"retry-after\W{1,3}(\d+)\b", re.IGNORECASE)
_TRY_AGAIN_AT = re.compile(
    rf"try again\s+(?:(?:at|after|on)\s+)?{_DATE}{_TIME}{_ZONE}", re.IGNORECASE
)
_RESETS_AT = re.compile(rf"\breset(?:s)?(?:\s+at|\s+on)?\s+{_DATE}{_TIME}{_ZONE}", re.IGNORECASE)
_TRY_AGAIN_DATE = re.compile(
    r"(?:try again|resets?|available again)\s+(?:on\s+)?"
    r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<year>\d{4}))?(?![\d:])(?!,?\s*(?:at\s+)?\d)",
    re.IGNORECASE,
)
_DAILY_QUOTA = re.compile(r"daily quota|per[ _-]?day|quota.{0,40}(?:per|each) day", re.IGNORECASE)
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def detect_limit(text: str, provider: str, now: datetime) -> LimitSignal | None:
    """Find the most useful limit message in `text` (see module docstring for the rules)."""
    if not text:
        return None
    lines = _scan_window(text).splitlines()
    best_usage: LimitSignal | None = None
    best_rate: LimitSignal | None = None
    hits = 0
    for index in range(len(lines) - 1, -1, -1):
        kind = _line_kind(lines[index])
        if kind is None:
            continue
        signal = LimitSignal(provider, _reset_near(lines, index, now), _trim(lines[index]), kind)
        if signal.reset_at is not None:
            return signal
        if kind == "usage" and best_usage is None:
            best_usage = signal
        if kind == "rate" and best_rate is None:
            best_rate = signal
        hits += 1
        if hits >= _MAX_HITS:
            break
    return best_usage or best_rate


def detect_limit_in_event(
    event: dict[str, Any], provider: str, now: datetime
) -> LimitSignal | None:
    """Recognise limits in one parsed JSON event of any supported CLI; None when it isn't one."""
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    if kind == "rate_limit_event":
        return _claude_rate_limit_event(event, provider, now)
    if kind == "result":
        failed = bool(event.get("is_error")) or str(event.get("subtype", "success")) != "success"
        return _text_limit(event.get("result"), provider, now) if failed else None
    if kind == "assistant" and event.get("error"):
        return _claude_assistant_error(event, provider, now)
    if kind in ("error", "turn.failed"):
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else event.get("message")
        return _text_limit(message or error, provider, now)
    if isinstance(event.get("error"), dict):
        return _api_error(event["error"], provider, now)
    return None


def backoff_reset(now: float, consecutive_hits: int) -> float:
    """When no reset time was given: wait 5, 15, 30, then 60 minutes for repeated hits."""
    step = min(max(consecutive_hits, 1), len(_BACKOFF_MINUTES)) - 1
    return now + _BACKOFF_MINUTES[step] * 60.0


def effective_reset(reset_at: float | None, now: float, consecutive_hits: int) -> float:
    """When a limited provider may be tried again: never sooner than MIN_WAIT_S from now.

    A reset already past (a stale epoch, a clock skew) says nothing about when the limit
    ends, so it gets the back-off like a missing one; a reset within the minimum wait is
    floored to it. Either way relaunching cannot turn into a hot loop.
    """
    if reset_at is None or reset_at <= now:
        return backoff_reset(now, consecutive_hits)
    return max(reset_at, now + MIN_WAIT_S)


# --- event helpers --------------------------------------------------------------------------


def _claude_rate_limit_event(
    event: dict[str, Any], provider: str, now: datetime
) -> LimitSignal | None:
    info = event.get("rate_limit_info")
    info = info if isinstance(info, dict) else event
    status = str(info.get("status") or "").lower()
    if status != "rejected":
        return None  # "allowed"/"allowed_warning" events are informational
    reset = None
    for key in ("resetsAt", "resets_at", "reset_at", "resetAt", "reset"):
        reset = epoch_seconds(info.get(key))
        if reset is not None:
            reset = plausible_reset(reset, now)
            break
    source = _trim(json.dumps(event, ensure_ascii=False, default=str))
    return LimitSignal(provider, reset, source, "usage")


def _claude_assistant_error(
    event: dict[str, Any], provider: str, now: datetime
) -> LimitSignal | None:
    text = _assistant_text(event)
    signal = _text_limit(text, provider, now)
    if signal is None and str(event.get("error")) == "rate_limit":
        return LimitSignal(provider, None, _trim(text or "rate_limit"), "rate")
    return signal


def _api_error(error: dict[str, Any], provider: str, now: datetime) -> LimitSignal | None:
    dumped = json.dumps(error, ensure_ascii=False, default=str)
    signal = _text_limit(dumped.replace("\\n", "\n"), provider, now)
    status = str(error.get("status") or "")
    if signal is None and (error.get("code") == 429 or status == "RESOURCE_EXHAUSTED"):
        text = str(error.get("message") or status or "429")
        return LimitSignal(provider, _reset_in(dumped, now), _trim(text), "rate")
    return signal


def _text_limit(value: object, provider: str, now: datetime) -> LimitSignal | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return detect_limit(text, provider, now)


def _assistant_text(event: dict[str, Any]) -> str:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [c.get("text", "") for c in content if isinstance(c, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


# --- text helpers ---------------------------------------------------------------------------


def _scan_window(text: str) -> str:
    if len(text) <= HEAD_BYTES + TAIL_BYTES:
        return text
    return text[:HEAD_BYTES] + "\n" + text[-TAIL_BYTES:]


def _line_kind(line: str) -> str | None:
    if any(p.search(line) for p in _USAGE_PATTERNS):
        return "usage"
    if any(p.search(line) for p in _RATE_PATTERNS):
        return "rate"
    return None


def _trim(line: str) -> str:
    return line.strip()[:SOURCE_MAX]


def _reset_near(lines: list[str], index: int, now: datetime) -> float | None:
    reset = _reset_in(lines[index], now)
    if reset is None:
        start = max(0, index - _WINDOW_BEFORE)
        reset = _reset_in("\n".join(lines[start : index + _WINDOW_AFTER]), now)
    return reset


def _reset_in(text: str, now: datetime) -> float | None:
    for extract in _EXTRACTORS:
        reset = extract(text, now)
        if reset is not None:
            return plausible_reset(reset, now)
    return None


def plausible_reset(reset: float, now: datetime) -> float | None:
    """The reset, or None (a wait of unknown length) when no limit can reset then: a
    CLI's "try again in 99999999999 hours" or a reset at the year 9000 would park the work
    for good, and an infinite one raised wherever it was shown."""
    return reset if math.isfinite(reset) and reset - now.timestamp() <= RESET_HORIZON_S else None


def _from_epoch_pipe(text: str, now: datetime) -> float | None:
    match = _EPOCH_PIPE.search(text) or _EPOCH_FIELD.search(text)
    return epoch_seconds(match.group(1)) if match else None


def _from_duration(text: str, now: datetime) -> float | None:
    match = _IN_DURATION.search(text)
    if match:
        total = sum(
            float(amount) * _UNIT_SECONDS[unit[0].lower()]
            for amount, unit in _DURATION_PART.findall(match.group("dur"))
        )
        return now.timestamp() + total
    match = _RETRY_DELAY.search(text) or _RETRY_AFTER.search(text)
    return now.timestamp() + float(match.group(1)) if match else None


def _from_clock(text: str, now: datetime) -> float | None:
    for pattern in (_TRY_AGAIN_AT, _RESETS_AT):
        for match in pattern.finditer(text):
            reset = _clock_reset(match, now)
            if reset is not None:
                return reset
    return None


def _from_daily_quota(text: str, now: datetime) -> float | None:
    if not _DAILY_QUOTA.search(text):
        return None
    local = now.astimezone(ZoneInfo(GEMINI_QUOTA_ZONE))
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.timestamp()


def _from_date(text: str, now: datetime) -> float | None:
    """ "Try again Aug 18." : the start of that day where the reader is (the next such day)."""
    match = _TRY_AGAIN_DATE.search(text)
    if match is None:
        return None
    local = now.astimezone(now.tzinfo or ZoneInfo("UTC"))
    month = _MONTHS.index(match.group("month").lower()[:3]) + 1
    year = int(match.group("year") or local.year)
    try:
        day = local.replace(year=year, month=month, day=int(match.group("day")))
    except ValueError:
        return None
    day = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if match.group("year") is None and day + timedelta(days=1) <= local:
        day = day.replace(year=year + 1)
    return day.timestamp()


_EXTRACTORS: tuple[Callable[[str, datetime], float | None], ...] = (
    _from_epoch_pipe,
    _from_duration,
    _from_clock,
    _from_date,
    _from_daily_quota,
)


def _clock_reset(match: re.Match[str], now: datetime) -> float | None:
    """Resolve "3pm", "15:30", "Dec 3rd, 2026 4:05 PM" (+ optional zone) to the next such time."""
    hour = int(match.group("hour"))
    minute = int(match.group("minute") or 0)
    ampm = (match.group("ampm") or "").replace(".", "").lower()
    if not ampm and match.group("minute") is None:
        return None  # a bare number is not a time of day
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    local = now.astimezone(_zone(match.group("zone") or match.group("zone2"), now))
    if match.group("month"):
        return _dated_reset(match, local, hour, minute)
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate <= local:
        candidate = (candidate + timedelta(days=1)).replace(hour=hour, minute=minute)
    return candidate.timestamp()


def _dated_reset(match: re.Match[str], local: datetime, hour: int, minute: int) -> float | None:
    month = _MONTHS.index(match.group("month").lower()[:3]) + 1
    year = int(match.group("year") or local.year)
    try:
        candidate = local.replace(
            year=year, month=month, day=int(match.group("day")), hour=hour, minute=minute
        )
    except ValueError:
        return None
    candidate = candidate.replace(second=0, microsecond=0)
    if match.group("year") is None and candidate < local - timedelta(days=1):
        candidate = candidate.replace(year=year + 1)
    return candidate.timestamp()


def _zone(name: str | None, now: datetime) -> tzinfo:
    if not name:
        return now.tzinfo or ZoneInfo("UTC")
    if name.upper() in ("UTC", "GMT", "Z"):
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return now.tzinfo or ZoneInfo("UTC")

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from relay_engine.core.limits import (
    LimitSignal,
    backoff_reset,
    detect_limit,
    detect_limit_in_event,
)

NY = ZoneInfo("America/New_York")
# Tuesday 2026-03-10 14:00 in New York (EDT, UTC-4) = 18:00 UTC = 22:00 Tbilisi = 13:00 Chicago.
NOW = datetime(2026, 3, 10, 14, 0, tzinfo=NY)
T = NOW.timestamp()


def at(year: int, month: int, day: int, hour: int, minute: int = 0, zone: str = "") -> float:
    tz = ZoneInfo(zone) if zone else NY
    return datetime(year, month, day, hour, minute, tzinfo=tz).timestamp()


CODEX_UPGRADE = (
    "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or"
)

LIMIT_FORMS = [
    # Claude: pipe + epoch seconds / milliseconds
    ("claude", "Claude AI usage limit reached|1767225600", 1767225600.0, "usage"),
    ("claude", "Claude AI usage limit reached|1767225600000", 1767225600.0, "usage"),
    # Claude: time of day, with/without zone, with/without minutes, passed -> tomorrow
    ("claude", "5-hour limit reached ∙ resets 3pm", at(2026, 3, 10, 15), "usage"),
    ("claude", "5-hour limit reached ∙ resets 1pm", at(2026, 3, 11, 13), "usage"),
    ("claude", "You've hit your limit · resets 3:30pm", at(2026, 3, 10, 15, 30), "usage"),
    ("claude", "Your limit will reset at 15:30", at(2026, 3, 10, 15, 30), "usage"),
    (
        "claude",
        "Your limit will reset at 9am (America/Chicago)",
        at(2026, 3, 11, 9, 0, "America/Chicago"),
        "usage",
    ),
    (
        "claude",
        "You've hit your limit · resets 8pm (Asia/Tbilisi)",
        at(2026, 3, 11, 20, 0, "Asia/Tbilisi"),
        "usage",
    ),
    ("claude", "5-hour limit reached ∙ resets 7pm UTC", at(2026, 3, 10, 19, 0, "UTC"), "usage"),
    ("claude", "Weekly limit reached ∙ resets Mar 12, 9am", at(2026, 3, 12, 9), "usage"),
    # Codex: clock time, dated time, durations
    ("codex", f"{CODEX_UPGRADE} try again at 3:15 PM.", at(2026, 3, 10, 15, 15), "usage"),
    ("codex", f"{CODEX_UPGRADE} try again at 9:05 AM.", at(2026, 3, 11, 9, 5), "usage"),
    (
        "codex",
        f"{CODEX_UPGRADE} try again at Dec 3rd, 2026 4:05 PM.",
        at(2026, 12, 3, 16, 5),
        "usage",
    ),
    (
        "codex",
        "You've hit your usage limit. Try again in 5 days 22 hours 11 minutes.",
        T + 5 * 86400 + 22 * 3600 + 11 * 60,
        "usage",
    ),
    ("codex", "You've hit your usage limit, try again in 2 hours.", T + 7200, "usage"),
    ("codex", "You've hit your usage limit, try again in 45 minutes", T + 2700, "usage"),
    ("codex", "stream error: rate limit exceeded, try again in 30 seconds", T + 30, "rate"),
    # Gemini
    ("gemini", '{"code": 429, "status": "RESOURCE_EXHAUSTED"}', None, "rate"),
    (
        "gemini",
        "429 Too Many Requests: You exceeded your current quota. Please retry in 41.5s.",
        T + 41.5,
        "usage",
    ),
    (
        "gemini",
        'Quota exceeded for metric requests_per_minute, "retryDelay":"41s"',
        T + 41,
        "usage",
    ),
    (
        "gemini",
        "You have exhausted your daily quota on this model.",
        at(2026, 3, 11, 0, 0, "America/Los_Angeles"),
        "usage",
    ),
    (
        "gemini",
        "You have exhausted your capacity on this model. Your quota will reset after 2h13m5s.",
        T + 2 * 3600 + 13 * 60 + 5,
        "usage",
    ),
    # Generic rate limits: no reset
    ("claude", "API Error: 429 Too Many Requests", None, "rate"),
    ("command", "HTTP 429", None, "rate"),
    ("command", "Error: rate limit exceeded", None, "rate"),
    ("command", "upstream said: Too Many Requests", None, "rate"),
    (
        "claude",
        'API Error: {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
        None,
        "rate",
    ),
]


@pytest.mark.parametrize(("provider", "text", "reset_at", "kind"), LIMIT_FORMS)
def test_limit_forms(provider: str, text: str, reset_at: float | None, kind: str) -> None:
    signal = detect_limit(text, provider, NOW)
    assert signal is not None
    assert signal.provider == provider
    assert signal.kind == kind
    assert signal.reset_at == (pytest.approx(reset_at) if reset_at is not None else None)
    assert signal.source_text == text.strip()[:300]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Let's add a rate limit to the login endpoint.",
        "The 429 handler now logs the request id.",
        "All 429 tests passed",
        "The cache resets 3pm daily, see docs.",
        "def check_quota(user): return user.quota > 0",
        "Refactored the usage limit settings page.",
    ],
)
def test_ordinary_text_is_not_a_limit(text: str) -> None:
    assert detect_limit(text, "claude", NOW) is None


def test_pretty_printed_gemini_error_finds_retry_delay_lines_away() -> None:
    text = "\n".join(
        [
            "{",
            '  "error": {',
            '    "code": 429,',
            '    "message": "Resource has been exhausted (e.g. check quota).",',
            '    "status": "RESOURCE_EXHAUSTED",',
            '    "details": [',
            '      {"@type": "type.googleapis.com/google.rpc.RetryInfo",',
            '       "retryDelay": "41s"}',
            "    ]",
            "  }",
            "}",
        ]
    )
    signal = detect_limit(text, "gemini", NOW)
    assert signal is not None
    assert signal.reset_at == pytest.approx(T + 41)


def test_a_limit_with_a_reset_beats_a_later_generic_one() -> None:
    text = "Claude AI usage limit reached|1767225600\nError: 429 Too Many Requests\n"
    signal = detect_limit(text, "claude", NOW)
    assert signal is not None
    assert signal.reset_at == 1767225600.0


def test_large_text_scans_the_tail_and_trims_the_source() -> None:
    noise = "x" * 200 + "\n"
    line = "You've hit your limit · resets 3pm " + "." * 400
    signal = detect_limit(noise * 5000 + line + "\n", "claude", NOW)
    assert signal is not None
    assert signal.reset_at == at(2026, 3, 10, 15)
    assert len(signal.source_text) == 300


def test_limit_buried_in_the_middle_of_a_huge_text_is_not_scanned() -> None:
    noise = "x" * 200 + "\n"
    text = noise * 500 + "Claude AI usage limit reached|1767225600\n" + noise * 500
    assert detect_limit(text, "claude", NOW) is None


def test_unknown_zone_falls_back_to_now_zone() -> None:
    signal = detect_limit("You've hit your limit · resets 3pm (Mars/Olympus)", "claude", NOW)
    assert signal is not None
    assert signal.reset_at == at(2026, 3, 10, 15)


def test_time_of_day_uses_the_zone_of_now() -> None:
    tokyo_now = NOW.astimezone(ZoneInfo("Asia/Tokyo"))  # 03:00 on Mar 11 in Tokyo
    signal = detect_limit("5-hour limit reached ∙ resets 3pm", "claude", tokyo_now)
    assert signal is not None
    assert signal.reset_at == at(2026, 3, 11, 15, 0, "Asia/Tokyo")


# --- structured events ----------------------------------------------------------------------

EVENT_CASES = [
    (
        {
            "type": "rate_limit_event",
            "rate_limit_info": {"status": "rejected", "resetsAt": 1767225600},
        },
        1767225600.0,
        "usage",
    ),
    (
        {
            "type": "rate_limit_event",
            "rate_limit_info": {"status": "rejected", "resetsAt": 1767225600000},
        },
        1767225600.0,
        "usage",
    ),
    ({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"}}, None, "usage"),
    (
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "result": "Claude AI usage limit reached|1767225600",
        },
        1767225600.0,
        "usage",
    ),
    (
        {
            "type": "assistant",
            "error": "rate_limit",
            "message": {"content": [{"type": "text", "text": "API Error: Rate limited"}]},
        },
        None,
        "rate",
    ),
    (
        {"type": "error", "message": "You've hit your usage limit. Try again at 3:15 PM."},
        at(2026, 3, 10, 15, 15),
        "usage",
    ),
    (
        {
            "type": "turn.failed",
            "error": {"message": "You've hit your usage limit. Try again in 2 hours"},
        },
        T + 7200,
        "usage",
    ),
    (
        {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        },
        None,
        "rate",
    ),
    ({"error": {"type": "Error", "message": "Quota exceeded", "code": 429}}, None, "usage"),
]


@pytest.mark.parametrize(("event", "reset_at", "kind"), EVENT_CASES)
def test_limit_events(event: dict, reset_at: float | None, kind: str) -> None:
    signal = detect_limit_in_event(event, "p", NOW)
    assert isinstance(signal, LimitSignal)
    assert signal.kind == kind
    assert signal.reset_at == (pytest.approx(reset_at) if reset_at is not None else None)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "rate_limit_event"},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1}},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed_warning"}},
        {"type": "result", "is_error": False, "result": "Claude AI usage limit reached|1767225600"},
        {"type": "error", "message": "Reconnecting... 2/5"},
        {"type": "turn.failed", "error": {"message": "sandbox denied the command"}},
        {"error": {"code": 500, "message": "Internal error"}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}},
        {"type": "thread.started", "thread_id": "abc"},
    ],
)
def test_events_that_are_not_limits(event: dict) -> None:
    assert detect_limit_in_event(event, "p", NOW) is None


@pytest.mark.parametrize(("hits", "minutes"), [(0, 5), (1, 5), (2, 15), (3, 30), (4, 60), (9, 60)])
def test_backoff_reset(hits: int, minutes: int) -> None:
    assert backoff_reset(1000.0, hits) == 1000.0 + minutes * 60


def test_reset_is_float_epoch_seconds() -> None:
    signal = detect_limit("You've hit your limit · resets 3pm", "claude", NOW)
    assert signal is not None
    assert isinstance(signal.reset_at, float)
    assert signal.reset_at - T == pytest.approx(timedelta(hours=1).total_seconds())

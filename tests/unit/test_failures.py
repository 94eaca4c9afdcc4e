"""What the real CLIs print when they cannot work, and what relay makes of it.

Every stream here was recorded from the real CLIs (tests/realcli/record_fixtures.py):
claude 2.1.197, codex 0.171.0, gemini 0.61.0, run offline with an empty HOME.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relay_engine.agents.adapters import get_adapter
from relay_engine.core.failures import (
    ExitEvidence,
    FailureClass,
    auth,
    classify_exit,
    classify_text,
    missing,
    rejected,
    unreachable,
)
from relay_engine.core.outcomes import ExitFacts, Outcome, OutcomeKind, ends_session, judge_exit

REALCLI = Path(__file__).parents[1] / "fixtures" / "realcli"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def recorded(name: str) -> tuple[bytes, str, int]:
    folder = REALCLI / name
    meta = json.loads((folder / "meta.json").read_text())
    return (
        (folder / "stdout.txt").read_bytes(),
        (folder / "stderr.txt").read_text(),
        meta["exit_code"],
    )


def replay(provider: str, name: str):  # type: ignore[no-untyped-def]
    stdout, stderr, code = recorded(name)
    parser = get_adapter(provider).parser()
    parser.feed(stdout, NOW)
    parser.notice_stderr(stderr)
    return parser.finish(code, stderr, NOW)


def _judge(name: str, provider: str, *, resumed: bool) -> tuple[Any, Outcome]:
    report = replay(provider, name)
    _, stderr, code = recorded(name)
    facts = ExitFacts(
        exit_code=code,
        stop_reason=None,
        timeout_s=60,
        cli_error=report.error,
        cli_is_error=report.is_error,
        result_text=report.result_text,
        result_file=None,
        limit=report.limit,
        stderr_tail=stderr,
        failure=report.failure,
        resumed=resumed,
    )
    return report, judge_exit(facts)


# (fixture, provider, class, words from the CLI's own sentence that the user must read)
TABLE = [
    ("claude-not-logged-in", "claude", FailureClass.AUTH, "Not logged in · Please run /login"),
    ("claude-not-logged-in-plain-dir", "claude", FailureClass.AUTH, "Please run /login"),
    (
        "claude-api-key-offline",
        "claude",
        FailureClass.UNREACHABLE,
        "connection retries",
    ),
    ("claude-bypass-as-root", "claude", FailureClass.CLI_REJECTED, "root/sudo privileges"),
    ("claude-unknown-flag", "claude", FailureClass.CLI_REJECTED, "unknown option"),
    ("codex-offline", "codex", FailureClass.UNREACHABLE, "waiting for network"),
    ("codex-offline-api-key", "codex", FailureClass.UNREACHABLE, "waiting for network"),
    (
        "codex-not-a-git-repo",
        "codex",
        FailureClass.CLI_REJECTED,
        "Not inside a trusted directory",
    ),
    ("codex-unknown-flag", "codex", FailureClass.CLI_REJECTED, "unexpected argument"),
    ("gemini-not-logged-in", "gemini", FailureClass.AUTH, "Please set an Auth method"),
    (
        "gemini-untrusted-folder",
        "gemini",
        FailureClass.CLI_REJECTED,
        "not running in a trusted directory",
    ),
    ("gemini-api-key-offline", "gemini", FailureClass.UNREACHABLE, "fetch failed"),
    ("gemini-unknown-flag", "gemini", FailureClass.CLI_REJECTED, "Unknown arguments"),
    ("gemini-bad-choice", "gemini", FailureClass.CLI_REJECTED, "Invalid values"),
]


@pytest.mark.parametrize(("name", "provider", "kind", "words"), TABLE, ids=[t[0] for t in TABLE])
def test_recorded_failures_are_classified_with_the_clis_own_sentence(
    name: str, provider: str, kind: FailureClass, words: str
) -> None:
    report, outcome = _judge(name, provider, resumed=False)
    assert report.failure is not None, f"{name}: not recognised"
    assert report.failure.kind is kind
    assert words in report.failure.reason
    assert report.failure.fix
    assert report.limit is None
    assert outcome.kind is OutcomeKind.UNAVAILABLE  # the attempt is refunded, not spent
    assert words in (outcome.error or "")


def test_gemini_error_on_stderr_is_read_not_shown_as_a_brace() -> None:
    report = replay("gemini", "gemini-not-logged-in")
    assert report.error is not None
    assert report.error.startswith("Please set an Auth method")
    assert report.error != "}"


def test_codex_reconnect_loop_is_recognised_while_it_runs() -> None:
    """The failure is known at the first "waiting for network" line, ~10 s into a loop that
    codex 0.171.0 never ends by itself; "Reconnecting... 2/5" alone is not yet a failure."""
    stdout, _, _ = recorded("codex-offline")
    parser = get_adapter("codex").parser()
    lines = stdout.splitlines(keepends=True)
    index = 0
    while parser.report.failure is None and index < len(lines):
        parser.feed(lines[index], NOW)
        index += 1
    index -= 1  # the line that made it known
    assert b"waiting for network" in lines[index]
    assert all(b"waiting for network" not in line for line in lines[:index])
    assert parser.report.failure.kind is FailureClass.UNREACHABLE


def test_claude_not_logged_in_is_known_from_the_event_not_the_exit() -> None:
    stdout, _, _ = recorded("claude-not-logged-in")
    parser = get_adapter("claude").parser()
    parser.feed(stdout.splitlines(keepends=True)[1], NOW)  # the assistant event alone
    assert parser.report.failure is not None
    assert parser.report.failure.kind is FailureClass.AUTH
    assert "claude" in parser.report.failure.fix and "/login" in parser.report.failure.fix


def test_gemini_offline_retries_on_stderr_are_noticed_before_exit() -> None:
    _, stderr, _ = recorded("gemini-api-key-offline")
    parser = get_adapter("gemini").parser()
    first_two = stderr[: stderr.index("Attempt 3 failed")]
    parser.notice_stderr(first_two)
    assert parser.report.failure is None  # two retries may still be a blip
    parser.notice_stderr(stderr)
    assert parser.report.failure is not None
    assert parser.report.failure.kind is FailureClass.UNREACHABLE


@pytest.mark.parametrize(
    "text",
    [
        "Implemented the login page; tests pass",
        "Added retry on connection refused to the HTTP client",
        "The 401 handler now returns JSON",
    ],
)
def test_a_command_agents_words_are_its_own(text: str) -> None:
    """Only the known CLIs' error channels are classified: a script's output never is."""
    evidence = ExitEvidence("command", 1, (text,), text)
    assert classify_exit(evidence) is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Error: 401 Unauthorized: invalid_api_key", FailureClass.AUTH),
        ("API Error: 403 Forbidden", FailureClass.AUTH),
        ("getaddrinfo ENOTFOUND api.anthropic.com", FailureClass.UNREACHABLE),
        ("connect ECONNREFUSED 127.0.0.1:443", FailureClass.UNREACHABLE),
        ("error: unknown option '--yolo'", FailureClass.CLI_REJECTED),
        ("the task failed: 3 tests red", None),
    ],
)
def test_text_classification(text: str, kind: FailureClass | None) -> None:
    failure = classify_text("claude", text)
    assert (failure.kind if failure else None) is kind


def test_a_missing_executable_is_cli_missing_with_the_install_line() -> None:
    failure = missing("codex", "codex")
    assert failure.kind is FailureClass.CLI_MISSING
    assert "npm install -g @openai/codex" in failure.fix


def test_an_ordinary_failed_run_is_no_agent_failure() -> None:
    stream = (REALCLI.parent / "streams" / "codex_success.jsonl").read_bytes()
    parser = get_adapter("codex").parser()
    parser.feed(stream, NOW)
    report = parser.finish(1, "tests failed", NOW)
    assert report.failure is None


GONE = [
    ("claude-resume-gone", "claude", "No conversation found with session ID"),
    ("codex-resume-gone", "codex", "no rollout found for thread id"),
    ("gemini-resume-gone", "gemini", "Error resuming session: No previous sessions found"),
]


@pytest.mark.parametrize(("name", "provider", "words"), GONE, ids=[g[0] for g in GONE])
def test_a_resumed_session_the_cli_no_longer_has_is_session_gone_not_a_refusal(
    name: str, provider: str, words: str
) -> None:
    """Recorded by resuming an id the CLI never saw; gemini exits 42 ("input error") for it,
    which would otherwise read as relay's arguments being refused."""
    report, outcome = _judge(name, provider, resumed=True)
    assert report.failure is not None
    assert report.failure.kind is FailureClass.SESSION_GONE
    assert words in report.failure.reason
    assert outcome.kind is OutcomeKind.SESSION_GONE
    assert ends_session(outcome)


def test_session_gone_without_a_resume_is_an_ordinary_charged_failure() -> None:
    """Only a resume relay asked for is relay's fault: otherwise no refund, so no loop."""
    _, outcome = _judge("claude-resume-gone", "claude", resumed=False)
    assert outcome.kind is OutcomeKind.FAILED
    assert "No conversation found" in (outcome.error or "")


@pytest.mark.parametrize(
    ("outcome", "stale"),
    [
        (Outcome(OutcomeKind.TIMEOUT, error="timed out after 60s"), False),
        (Outcome(OutcomeKind.FAILED, error="exit 1: tests red"), True),
        (Outcome(OutcomeKind.LIMITED, error="usage limit"), False),
        (Outcome(OutcomeKind.UNAVAILABLE, failure=unreachable("fetch failed")), False),
        (Outcome(OutcomeKind.UNAVAILABLE, failure=auth("claude", "Not logged in")), True),
        (Outcome(OutcomeKind.UNAVAILABLE, failure=rejected("codex", "bad flag")), True),
        (Outcome(OutcomeKind.SUCCEEDED, summary="done"), False),
        (Outcome(OutcomeKind.RELEASED, error="engine stopped"), False),
    ],
)
def test_which_outcomes_end_the_provider_session(outcome: Outcome, stale: bool) -> None:
    """The seed's rule: every failure but a timeout ends the session (the retry starts fresh
    with the error in its prompt), unless the failure class says the session is fine."""
    assert ends_session(outcome) is stale

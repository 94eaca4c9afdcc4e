"""Why an agent could not work at all: not logged in, no network, CLI missing or refusing.

Pure: no I/O and no clock. These failures say nothing about the task, so they never use
up its attempt; they make the *agent* unavailable (see :mod:`relay_engine.core.availability`),
except ``session-gone``: a resumed provider session the CLI no longer has is relay's own
mistake, fixed by running the task again in a fresh session.
Structured signals win over text: a stream event or a documented exit code first, then
the CLI's own sentences, matched narrowly so that an agent merely *talking* about
networks or logins is not mistaken for one that failed.

Every rule here is backed by output recorded from the real CLIs (``tests/fixtures/realcli``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from relay_engine.contracts.printable import strip_ansi


class FailureClass(StrEnum):
    AUTH = "auth"
    UNREACHABLE = "unreachable"
    CLI_MISSING = "cli-missing"
    CLI_REJECTED = "cli-rejected"
    SESSION_GONE = "session-gone"


HELD_CLASSES = frozenset({FailureClass.AUTH, FailureClass.CLI_MISSING, FailureClass.CLI_REJECTED})
"""Classes that hold until the agent's config changes or the operator clears them."""


@dataclass(frozen=True)
class AgentFailure:
    kind: FailureClass
    reason: str  # the CLI's own sentence
    fix: str  # one line telling the operator what to do


# gemini-cli's FatalError exit codes (packages/core/src/utils/errors.ts, 0.61.0).
GEMINI_AUTH_EXIT = 41
GEMINI_REJECTED_EXITS = {
    42: "input error",
    44: "sandbox error",
    52: "configuration error",
    55: "untrusted folder",
}

_LOGIN_FIX = {
    "claude": "run `claude` once and /login (or set ANTHROPIC_API_KEY in the agent's env)",
    "codex": "run `codex login` (or set CODEX_API_KEY in the agent's env)",
    "gemini": "set GEMINI_API_KEY in the agent's env or run `gemini` once to log in",
    "qwen": "set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL in the agent's env with "
    'args = ["--auth-type", "openai"], or run `qwen` once to log in',
    "copilot": "run `copilot login` (or set COPILOT_GITHUB_TOKEN in the agent's env, or "
    "COPILOT_PROVIDER_BASE_URL for your own model provider)",
    "opencode": "run `opencode auth login`, or configure a provider in opencode.json",
}
_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "qwen": "@qwen-code/qwen-code",
    "copilot": "@github/copilot",
    "opencode": "opencode-ai",
}
AGENT_CLIS = frozenset({*_PACKAGES, "acp"})
"""Providers whose CLIs' failures relay knows; a `command` agent's output is its own."""
UNREACHABLE_FIX = "check the network or proxy; relay probes the agent again with back-off"

_AUTH_TEXT = re.compile(
    r"not logged in|please run /login|please log ?in\b|invalid api key|invalid x-api-key"
    r"|invalid_api_key|incorrect api key|authentication_error|authentication failed"
    r"|api key not valid|\b401\b.{0,40}unauthori[sz]ed|unauthori[sz]ed.{0,40}\b401\b"
    r"|\b403\b.{0,40}forbidden|please set an auth method|oauth token has expired"
    r"|token (?:is )?expired|credentials? (?:are |is )?(?:missing|invalid)"
    r"|no auth type is selected|no authentication information found"  # qwen, copilot
    r"|authentication required|api key is missing",  # ACP session/new: qwen, copilot, gemini
    re.IGNORECASE,
)
_ACCOUNT_TEXT = re.compile(
    r"IneligibleTierError|ineligible tier|not eligible for|migrate to the antigravity"
    r"|account validation required"  # gemini: a Google account its tier no longer serves
    r"|credit balance is too low|insufficient (?:credits?|balance|funds)|out of credits"
    r"|(?:plan|subscription) (?:has )?(?:changed|expired|ended|lapsed)|payment required",
    re.IGNORECASE,
)
"""The account itself refuses the work (its tier, plan or balance): no retry helps, so it
holds like a login until a person acts."""
_NETWORK_TEXT = re.compile(
    r"unable to connect to api|failed to lookup address|name does not resolve"
    r"|name or service not known|temporary failure in name resolution|getaddrinfo"
    r"|\benotfound\b|\beconnrefused\b|connection refused|\beconnreset\b|\betimedout\b"
    r"|network is unreachable|no route to host|fetch failed|error sending request"
    r"|waiting for network|stream disconnected before completion"
    r"|cannot connect to api",  # opencode
    re.IGNORECASE,
)
_REJECTED_TEXT = re.compile(
    r"error: unknown option|error: unexpected argument|error: invalid value"
    r"|^unknown arguments?:|^invalid values?:|^not enough arguments"
    r"|not inside a trusted directory|not running in a trusted directory"
    r"|cannot be used with root/sudo privileges"
    r"|^error: invalid command format"  # copilot, for a flag it does not know
    r"|^opencode run \[message\.\.\]",  # opencode prints its usage for a flag it does not know
    re.IGNORECASE | re.MULTILINE,
)
_SESSION_GONE_TEXT = re.compile(
    r"no conversation found with session id"  # claude --resume
    r"|no rollout found for thread id"  # codex exec resume
    r"|error resuming session|invalid session identifier"  # gemini --resume (exit 42)
    r"|no saved session found with id"  # qwen --resume
    r"|session not found"  # opencode --session (after colour codes: no word boundary)
    r"|no session, task, or name matched",  # copilot --resume
    re.IGNORECASE,
)
SESSION_GONE_FIX = "nothing to do: relay runs the task again in a fresh session"
_CODEX_WAITING = re.compile(r"^Reconnecting\.\.\. waiting for network", re.IGNORECASE)


def login_fix(provider: str) -> str:
    return _LOGIN_FIX.get(provider, "check the agent's credentials (env in relay.toml)")


def missing_fix(provider: str, executable: str) -> str:
    package = _PACKAGES.get(provider)
    install = f"npm install -g {package}" if package else f"install {executable}"
    return f"{install}, or set `command` for the agent in relay.toml"


ACCOUNT_FIX = {
    "gemini": "this Google account's tier no longer serves Gemini CLI (Google One and free "
    "tiers are refused since 2026-06): set GEMINI_API_KEY (AI Studio) or a Vertex AI project "
    "in the agent's env, then `relay agents reset ID`",
}
ACCOUNT_FIX_OTHER = (
    "the account refused the work (plan, tier or balance): change the plan or top up the "
    "balance, or give the agent another account; then `relay agents reset ID`"
)


def account_fix(provider: str) -> str:
    return ACCOUNT_FIX.get(provider, ACCOUNT_FIX_OTHER)


def rejected_fix(provider: str, reason: str) -> str:
    if "root/sudo" in reason:
        return 'claude refuses access = "full" as root: use "workspace-write" or a non-root user'
    if "trusted directory" in reason:
        return "relay passes the CLI's trust flag; check `args` and `access` with `relay doctor`"
    return "the CLI refused relay's arguments: check `args`, `access` and the CLI version with `relay doctor`"


def unreachable(reason: str) -> AgentFailure:
    return AgentFailure(FailureClass.UNREACHABLE, _sentence(reason), UNREACHABLE_FIX)


def auth(provider: str, reason: str) -> AgentFailure:
    """Not logged in, or an account that refuses the work: held until a person acts."""
    fix = account_fix(provider) if _ACCOUNT_TEXT.search(reason) else login_fix(provider)
    return AgentFailure(FailureClass.AUTH, _sentence(reason), fix)


def rejected(provider: str, reason: str) -> AgentFailure:
    sentence = _sentence(reason)
    return AgentFailure(FailureClass.CLI_REJECTED, sentence, rejected_fix(provider, sentence))


def session_gone(reason: str) -> AgentFailure:
    return AgentFailure(FailureClass.SESSION_GONE, _sentence(reason), SESSION_GONE_FIX)


def missing(provider: str, executable: str) -> AgentFailure:
    return AgentFailure(
        FailureClass.CLI_MISSING,
        f"executable {executable!r} not found on PATH",
        missing_fix(provider, executable),
    )


# --- structured signals -----------------------------------------------------------------------


def classify_event(event: dict[str, Any], provider: str) -> AgentFailure | None:
    """A failure one parsed stream event proves on its own; None for everything else.

    Recognised while the CLI runs, so relay can stop a CLI that would otherwise retry for
    minutes (codex waits for the network forever).
    """
    kind = event.get("type")
    if kind == "assistant" and event.get("error"):
        return _claude_assistant_error(event, provider)
    if kind == "system" and event.get("subtype") == "api_retry":
        return _claude_retries_exhausted(event)
    if kind == "error" and isinstance(event.get("message"), str):
        message = event["message"]
        if _CODEX_WAITING.search(message):
            return unreachable(message)
        refused = _AUTH_TEXT.search(message) or _ACCOUNT_TEXT.search(message)
        return auth(provider, message) if refused else None
    return None


def _claude_assistant_error(event: dict[str, Any], provider: str) -> AgentFailure | None:
    code = str(event.get("error"))
    text = _assistant_text(event) or code
    if code == "authentication_failed":
        return auth(provider, text)
    if _NETWORK_TEXT.search(text):
        return unreachable(text)
    return None


def _claude_retries_exhausted(event: dict[str, Any]) -> AgentFailure | None:
    """Claude's connection retries (no HTTP status: the request never got an answer)."""
    attempt, most = event.get("attempt"), event.get("max_retries")
    if event.get("error_status") is not None or not isinstance(attempt, int):
        return None
    if isinstance(most, int) and attempt >= most:
        return unreachable(f"no answer from the API after {attempt} connection retries")
    return None


def _assistant_text(event: dict[str, Any]) -> str:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return ""
    texts = [c.get("text") for c in content if isinstance(c, dict)]
    return "\n".join(t for t in texts if isinstance(t, str))


# --- after the exit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExitEvidence:
    provider: str
    exit_code: int
    cli_errors: tuple[str, ...]  # error texts the CLI itself emitted (never the model's words)
    stderr: str


def classify_exit(evidence: ExitEvidence) -> AgentFailure | None:
    """Why a failed run could not work at all, judged once the CLI exited; None when the
    failure is the task's own (or unknown) and counts as an ordinary attempt."""
    if evidence.exit_code == 0 or evidence.provider not in AGENT_CLIS:
        return None
    for text in (*evidence.cli_errors, evidence.stderr):
        line = _matching_line(_SESSION_GONE_TEXT, text)
        if line is not None:  # before gemini's exit code: it exits 42 ("input error") for it
            return session_gone(line)
    if evidence.provider == "gemini":
        failure = _gemini_exit(evidence)
        if failure is not None:
            return failure
    return classify_text(evidence.provider, *evidence.cli_errors, evidence.stderr)


def classify_text(provider: str, *texts: str) -> AgentFailure | None:
    """Auth, then refusal, then network, by the CLIs' own sentences."""
    for pattern, build in (
        (_AUTH_TEXT, lambda line: auth(provider, line)),
        (_ACCOUNT_TEXT, lambda line: auth(provider, line)),
        (_REJECTED_TEXT, lambda line: rejected(provider, line)),
        (_NETWORK_TEXT, unreachable),
    ):
        for text in texts:
            line = _matching_line(pattern, text)
            if line is not None:
                return build(line)
    return None


def _gemini_exit(evidence: ExitEvidence) -> AgentFailure | None:
    message = gemini_error_message(evidence.stderr) or _last_line(evidence.stderr)
    message = message or next(iter(evidence.cli_errors), f"exit {evidence.exit_code}")
    if evidence.exit_code == GEMINI_AUTH_EXIT:
        return auth("gemini", message)
    if evidence.exit_code in GEMINI_REJECTED_EXITS:
        return rejected("gemini", message)
    return None


def gemini_error_message(text: str) -> str | None:
    """The ``error.message`` of the JSON object gemini prints on stderr when it fails."""
    start = text.find("{")
    decoder = json.JSONDecoder()
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        error = value.get("error") if isinstance(value, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _sentence(error["message"])
        start = text.find("{", start + 1)
    return None


def _matching_line(pattern: re.Pattern[str], text: str) -> str | None:
    if not text:
        return None
    for line in reversed(text.splitlines()):
        if pattern.search(line):
            return line
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() not in ("", "{", "}")]
    return lines[-1] if lines else ""


def _sentence(text: str, limit: int = 300) -> str:
    """One clean line: no colour codes, no surrounding JSON punctuation, bounded."""
    line = " ".join(strip_ansi(str(text)).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

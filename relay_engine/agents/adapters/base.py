"""Shared types and stream plumbing for agent CLI adapters.

An adapter turns an `InvocationContext` into an argv (never a shell string) and supplies a
`StreamParser` that reads the CLI's stdout incrementally and reports what it learned.

Pure: bytes in, reports out; the runner owns the process and its files.
"""

from __future__ import annotations

import codecs
import json
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from relay_engine.core.failures import AgentFailure, ExitEvidence, classify_event, classify_exit
from relay_engine.core.limits import LimitSignal, detect_limit, detect_limit_in_event

LINE_CAP = 1024 * 1024  # longest stdout line kept; longer lines are dropped whole
TEXT_HEAD = 16 * 1024
TEXT_TAIL = 64 * 1024
PROGRESS_MAX = 200
ARGV_PROMPT_MAX = 100 * 1024  # longer prompts go on stdin (Linux caps one argv string at 128 KiB)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_JSON_SCAN_MAX = 256 * 1024
_JSON_ATTEMPTS_MAX = 2000


@dataclass(frozen=True)
class InvocationContext:
    prompt: str
    prompt_file: Path
    result_file: Path
    cwd: Path
    model: str | None = None
    resume_session_id: str | None = None
    tools: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    extra_args: tuple[str, ...] = ()
    access: str = "workspace-write"  # "read-only" | "workspace-write" | "full"


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    stdin_text: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class AgentReport:
    result_text: str | None = None
    result_data: object | None = None
    session_id: str | None = None
    input_tokens: int | None = None  # every prompt token, cached ones included
    output_tokens: int | None = None
    cached_tokens: int | None = None  # the part of the input served from the provider's cache
    model: str | None = None
    cost_usd: float | None = None
    is_error: bool = False
    error: str | None = None
    limit: LimitSignal | None = None
    failure: AgentFailure | None = None  # the agent could not work at all (login, network, CLI)
    last_progress: str | None = None


@runtime_checkable
class StreamParser(Protocol):
    def feed(self, chunk: bytes, now: datetime) -> None: ...

    def finish(self, exit_code: int, stderr_tail: str, now: datetime) -> AgentReport: ...

    def notice_stderr(self, stderr_tail: str) -> None:
        """Look at the stderr so far while the CLI runs (retry loops some CLIs print there)."""

    @property
    def report(self) -> AgentReport: ...


@runtime_checkable
class Adapter(Protocol):
    provider: str
    supports_resume: bool

    def build(self, ctx: InvocationContext) -> Invocation: ...

    def parser(self) -> StreamParser: ...


def relay_env(ctx: InvocationContext) -> dict[str, str]:
    return {"RELAY_PROMPT_FILE": str(ctx.prompt_file), "RELAY_RESULT_FILE": str(ctx.result_file)}


def prompt_needs_stdin(prompt: str) -> bool:
    """Huge prompts overflow argv; a leading dash would be read as an option."""
    return prompt.startswith("-") or len(prompt.encode("utf-8")) > ARGV_PROMPT_MAX


class LineBuffer:
    """Splits a byte stream into text lines whatever the chunking (mid-line, mid-UTF-8)."""

    def __init__(self, cap: int = LINE_CAP) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []
        self._size = 0
        self._overflow = False
        self._cap = cap

    def feed(self, chunk: bytes) -> Iterator[str]:
        yield from self._split(self._decoder.decode(chunk))

    def close(self) -> Iterator[str]:
        yield from self._split(self._decoder.decode(b"", final=True))
        rest = "".join(self._partial)
        self._partial, self._size = [], 0
        if rest and not self._overflow:
            yield rest
        self._overflow = False

    def _split(self, text: str) -> Iterator[str]:
        pieces = text.split("\n")
        for piece in pieces[:-1]:
            line = "".join(self._partial) + piece
            overflow = self._overflow or len(line) > self._cap
            self._partial, self._size, self._overflow = [], 0, False
            if not overflow:
                yield line.rstrip("\r")
        self._append(pieces[-1])

    def _append(self, piece: str) -> None:
        if self._overflow or not piece:
            return
        self._size += len(piece)
        if self._size > self._cap:
            self._partial, self._size, self._overflow = [], 0, True
        else:
            self._partial.append(piece)


class TextKeeper:
    """Keeps the first and last few KiB of a stream of lines: enough for limits and results."""

    def __init__(self, head: int = TEXT_HEAD, tail: int = TEXT_TAIL) -> None:
        self._head_cap, self._tail_cap = head, tail
        self._head = ""
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._dropped = False

    def add(self, line: str) -> None:
        line += "\n"
        if len(self._head) < self._head_cap:
            self._head = (self._head + line)[: self._head_cap]
        self._tail.append(line)
        self._tail_size += len(line)
        while self._tail_size - len(self._tail[0]) >= self._tail_cap:
            self._tail_size -= len(self._tail.popleft())
            self._dropped = True

    @property
    def tail(self) -> str:
        return "".join(self._tail)[-self._tail_cap :]

    @property
    def text(self) -> str:
        """The whole text while it is small, else head + tail (what limit detection scans)."""
        if not self._dropped:
            return "".join(self._tail)
        return self._head + "\n" + self.tail


def clean_progress(text: str | None) -> str | None:
    """One readable line for the console: last non-empty line, no ANSI, bounded length."""
    if not text:
        return None
    lines = [ln.split("\r")[-1].strip() for ln in _ANSI.sub("", text).splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    line = " ".join(lines[-1].split())
    return line if len(line) <= PROGRESS_MAX else line[: PROGRESS_MAX - 1] + "…"


def first_line(text: str | None) -> str | None:
    """First non-empty line: an agent's message usually leads with its point."""
    if not text:
        return None
    for line in text.splitlines():
        if line.strip():
            return clean_progress(line)
    return None


def extract_json(text: str | None) -> object | None:
    """The JSON value of `text` if it is JSON, else the last JSON object found in it
    (fenced ```json blocks included). None when there is none."""
    if not text or not text.strip():
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    window = text[-_JSON_SCAN_MAX:]
    found = _last_object(window)
    for match in _FENCE.finditer(window):  # fenced arrays count too; objects are found anyway
        try:
            value = json.loads(match.group(1))
        except (ValueError, RecursionError):
            continue
        if found is None or match.end() > found[0]:
            found = (match.end(), value)
    return found[1] if found else None


def _last_object(text: str) -> tuple[int, object] | None:
    """(end offset, object) of the last top-level JSON object in `text`."""
    decoder = json.JSONDecoder()
    found: tuple[int, object] | None = None
    index, attempts = text.find("{"), 0
    while index != -1 and attempts < _JSON_ATTEMPTS_MAX:
        attempts += 1
        try:
            value, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found = (end, value)
        index = text.find("{", end)
    return found


def parse_json_line(line: str) -> list[dict]:
    """Events on one JSONL line. A line that is not JSON may still hold events spliced into it
    (Claude Code has written rate_limit_event in the middle of another line)."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return []
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return _salvage_events(stripped)
    return [value] if isinstance(value, dict) else []


def _salvage_events(line: str) -> list[dict]:
    decoder = json.JSONDecoder()
    events: list[dict] = []
    index = line.find('{"type"', 1)
    for _ in range(8):
        if index == -1:
            break
        try:
            value, end = decoder.raw_decode(line, index)
        except (ValueError, RecursionError):
            index = line.find('{"type"', index + 1)
            continue
        if isinstance(value, dict):
            events.append(value)
        index = line.find('{"type"', end)
    return events


def as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None


def add_tokens(current: int | None, value: object) -> int | None:
    number = as_int(value)
    if number is None:
        return current
    return number if current is None else current + number


class BaseParser:
    """Common bookkeeping: limit merging, raw-text tail, and the end-of-run rules."""

    provider = "command"

    def __init__(self) -> None:
        self._report = AgentReport()
        self._lines = LineBuffer()
        self._raw = TextKeeper()  # stdout lines that were not events, for limit detection
        self._cli_errors: deque[str] = deque(maxlen=8)  # the CLI's own error texts

    @property
    def report(self) -> AgentReport:
        return replace(self._report)

    def feed(self, chunk: bytes, now: datetime) -> None:
        for line in self._lines.feed(chunk):
            self._line(line, now)

    def finish(self, exit_code: int, stderr_tail: str, now: datetime) -> AgentReport:
        for line in self._lines.close():
            self._line(line, now)
        self._complete(exit_code, stderr_tail, now)
        self._settle_limit(exit_code, stderr_tail, now)
        self._settle_failure(exit_code, stderr_tail)
        return self.report

    def notice_stderr(self, stderr_tail: str) -> None:
        """Most CLIs stream everything worth knowing on stdout; see GeminiParser."""

    def _line(self, line: str, now: datetime) -> None:
        raise NotImplementedError

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        """Provider hook: turn what was streamed into the final result."""

    def _event_limit(self, event: dict, now: datetime) -> None:
        self._merge_limit(detect_limit_in_event(event, self.provider, now))
        if self._report.failure is None:
            self._report.failure = classify_event(event, self.provider)

    def _cli_error(self, text: object) -> None:
        """Remember an error the CLI itself reported, for classifying the exit."""
        if isinstance(text, str) and text.strip():
            self._cli_errors.append(text)

    def _settle_failure(self, exit_code: int, stderr_tail: str) -> None:
        """A failed run that is no limit may still be the agent's own trouble (login, CLI).

        A failure seen while the CLI ran stands whatever the exit code: relay stopped that
        CLI because of it (gemini even exits 0 on the SIGTERM).
        """
        report = self._report
        if report.failure is None and report.is_error and report.limit is None:
            evidence = ExitEvidence(self.provider, exit_code, tuple(self._cli_errors), stderr_tail)
            report.failure = classify_exit(evidence)
        if report.failure is not None:
            report.is_error = True
            report.error = report.failure.reason

    def _merge_limit(self, signal: LimitSignal | None) -> None:
        current = self._report.limit
        if signal is None:
            return
        if current is None or (current.reset_at is None and signal.reset_at is not None):
            self._report.limit = signal

    def _settle_limit(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        """A clean exit with a normal result is never a limit; a failure is scanned for one."""
        report = self._report
        if exit_code != 0:
            report.is_error = True
            if not report.error:
                report.error = clean_progress(stderr_tail) or f"exit code {exit_code}"
        if not report.is_error:
            report.limit = None
            return
        if report.limit is None or report.limit.reset_at is None:
            parts = (self._raw.text, report.result_text or "", report.error or "", stderr_tail)
            self._merge_limit(detect_limit("\n".join(parts), self.provider, now))


class JsonLinesParser(BaseParser):
    """A CLI that streams one JSON event per line; other lines are kept as plain text."""

    def _line(self, line: str, now: datetime) -> None:
        events = parse_json_line(line)
        if not events and line.strip():
            self._raw.add(line)
            if self._plain_is_progress() and not line.lstrip().startswith(("{", "[")):
                self._report.last_progress = clean_progress(line) or self._report.last_progress
        for event in events:
            self._event(event, now)

    def _plain_is_progress(self) -> bool:
        return True

    def _event(self, event: dict, now: datetime) -> None:
        raise NotImplementedError

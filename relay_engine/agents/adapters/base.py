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
from typing import Any, Protocol, runtime_checkable

from relay_engine.contracts.numbers import as_count
from relay_engine.contracts.printable import strip_ansi
from relay_engine.core.failures import AgentFailure, ExitEvidence, classify_event, classify_exit
from relay_engine.core.limits import LimitSignal, detect_limit, detect_limit_in_event
from relay_engine.core.quota import QuotaReading, readings_in_event

LINE_CAP = 1024 * 1024  # longest stdout line kept; longer lines are dropped whole
TEXT_HEAD = 16 * 1024
TEXT_TAIL = 64 * 1024
PROGRESS_MAX = 200
ARGV_PROMPT_MAX = 100 * 1024  # longer prompts go on stdin (Linux caps one argv string at 128 KiB)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_JSON_SCAN_MAX = 256 * 1024
_JSON_ATTEMPTS_MAX = 2000


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server the CLI starts for relay (the job's memory): its command line, and
    the same server as the JSON file claude's ``--mcp-config`` reads."""

    name: str
    command: str
    args: tuple[str, ...]
    config_file: Path


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
    permission_channel: bool = False  # relay answers the CLI's tool requests over stdin
    allow_rules: tuple[str, ...] = ()  # relay's rules, for the CLI's own allow/deny flags
    deny_rules: tuple[str, ...] = ()
    memory_server: McpServer | None = None  # relay's memory tools, for CLIs that take MCP


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    stdin_text: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    conversation: bool = False  # stdin stays open: relay answers requests and says more


@dataclass(frozen=True)
class ToolRequest:
    """A tool use (or a question for a person) the CLI asks its client about, and waits."""

    request_id: str
    tool: str
    input: dict[str, Any]
    kind: str = "permission"  # "permission" | "question"
    suggestion: str | None = None  # the rule the CLI itself would add to allow it
    context: str | None = None  # the agent's last message before it asked
    tool_use_id: str | None = None  # the model's id of the call, as denials name it


@dataclass(frozen=True)
class ToolAnswer:
    """What the CLI is told: run it (as asked, or with a question's ``answers``) or not."""

    allow: bool
    message: str = ""  # a denial's reason, which the model reads
    answers: dict[str, str] | None = None  # a question's answers: question -> answer


@dataclass(frozen=True)
class Denial:
    """A tool request refused: by relay's rules, by the operator, or by the CLI on its own."""

    tool: str
    summary: str
    by: str  # "rule" | "operator" | "timeout" | "cli"
    reason: str = ""
    tool_use_id: str | None = None

    def as_json(self) -> dict[str, str]:
        return {"tool": self.tool, "summary": self.summary, "by": self.by, "reason": self.reason}


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
    turns_ended: int = 0  # results seen: a conversing CLI waits for more input after each
    denials: list[Denial] = field(default_factory=list)  # refused by the CLI itself
    windows: tuple[QuotaReading, ...] = ()  # the account's quota windows, latest per window


@runtime_checkable
class StreamParser(Protocol):
    def feed(self, chunk: bytes, now: datetime) -> None: ...

    def finish(self, exit_code: int, stderr_tail: str, now: datetime) -> AgentReport: ...

    def notice_stderr(self, stderr_tail: str) -> None:
        """Look at the stderr so far while the CLI runs (retry loops some CLIs print there)."""

    def take_requests(self) -> list[ToolRequest]:
        """Tool requests that arrived since the last call, each waiting for its answer."""

    def take_outgoing(self) -> list[bytes]:
        """Lines the protocol itself must send now (a handshake step of a JSON-RPC CLI, say),
        written to a conversing CLI's stdin in order."""

    @property
    def report(self) -> AgentReport: ...


@runtime_checkable
class Conversing(Protocol):
    """An adapter whose CLI takes answers and more words on stdin while it runs."""

    def answer_line(self, request: ToolRequest, answer: ToolAnswer) -> bytes: ...

    def user_line(self, text: str) -> bytes: ...


@runtime_checkable
class Adapter(Protocol):
    """Also what the sandbox needs to know about the CLI (:mod:`relay_engine.agents.sandbox`):
    the folders (``state_paths``) and files (``state_files``) its logins and sessions live in
    (writable inside the sandbox, hidden from every other provider's agents; missing folders
    are made, as the CLI would on its first run), ``state_env`` the variable that moves them
    all into one folder, ``state_read_only`` what in those folders stays read-only (settings
    and instructions the operator's own sessions would run or obey), ``cache_paths`` what it
    unpacks or downloads (writable, never moved, hidden from nobody), ``auth_env``
    the engine variables it gets (names or ``PREFIX*``), whether it needs the network to
    work, and whether it runs sandboxed unless told otherwise. Those the sandbox reads are
    read-only: a class attribute gives them, or a property (the ACP adapter's are its CLI's)."""

    provider: str
    supports_resume: bool

    @property
    def state_paths(self) -> tuple[str, ...]: ...

    @property
    def state_files(self) -> tuple[str, ...]: ...

    @property
    def state_env(self) -> str | None: ...

    @property
    def state_read_only(self) -> tuple[str, ...]: ...

    @property
    def cache_paths(self) -> tuple[str, ...]: ...

    @property
    def auth_env(self) -> tuple[str, ...]: ...

    needs_network: bool
    sandboxed_by_default: bool

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
    lines = [ln.split("\r")[-1].strip() for ln in strip_ansi(text).splitlines()]
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
        parsed: object = json.loads(text)
        return parsed
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


def parse_json_line(line: str) -> list[dict[str, Any]]:
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


def _salvage_events(line: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    events: list[dict[str, Any]] = []
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


def as_object(value: object) -> dict[str, Any]:
    """A JSON object's fields; {} for anything else (a missing key, null, a list, a string)."""
    return value if isinstance(value, dict) else {}


def add_tokens(current: int | None, value: object) -> int | None:
    number = as_count(value)
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
        self._requests: list[ToolRequest] = []
        self._outgoing: list[bytes] = []

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

    def take_requests(self) -> list[ToolRequest]:
        taken, self._requests = self._requests, []
        return taken

    def take_outgoing(self) -> list[bytes]:
        taken, self._outgoing = self._outgoing, []
        return taken

    def _line(self, line: str, now: datetime) -> None:
        raise NotImplementedError

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        """Provider hook: turn what was streamed into the final result."""

    def _event_limit(self, event: dict[str, Any], now: datetime) -> None:
        self._merge_limit(detect_limit_in_event(event, self.provider, now))
        if self._report.failure is None:
            self._report.failure = classify_event(event, self.provider)
        self._note_windows(readings_in_event(event))

    def _note_windows(self, readings: list[QuotaReading]) -> None:
        """Keep the latest reading of each window (the reaper records them as they come)."""
        if not readings:
            return
        latest = {reading.window: reading for reading in self._report.windows}
        latest.update((reading.window, reading) for reading in readings)
        self._report.windows = tuple(latest.values())

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
        """The best of what the CLI said about a limit: a reset time wherever one came, and
        the CLI's own sentence ("You've hit your limit · resets 3:52pm") over the JSON event
        that carried the reset, because the sentence is what the operator is shown."""
        current = self._report.limit
        if signal is None:
            return
        if current is None:
            self._report.limit = signal
            return
        base = signal if current.reset_at is None and signal.reset_at is not None else current
        other = current if base is signal else signal
        if _is_event_dump(base.source_text) and not _is_event_dump(other.source_text):
            base = replace(base, source_text=other.source_text)
        self._report.limit = base

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
        said = (report.result_text or "").strip()
        if report.limit is not None and _is_event_dump(report.limit.source_text) and said:
            report.limit = replace(report.limit, source_text=said[:300])


def _is_event_dump(text: str) -> bool:
    """A limit's text that is the JSON event itself, not a sentence the CLI wrote."""
    return text.lstrip().startswith("{")


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

    def _event(self, event: dict[str, Any], now: datetime) -> None:
        raise NotImplementedError

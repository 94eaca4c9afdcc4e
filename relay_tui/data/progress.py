"""What each running agent is doing now, read from its stdout artifact in the reader thread.

The engine saves one "last output" line per execution every few seconds; the stream itself
says more and sooner: the tool call in flight (``Edit src/search.py``, ``Bash pytest -q``),
the tokens so far (Claude Code reports usage on every message), and, by the file's
modification time, how long the agent has been silent. Each running execution is followed
by byte offset (only what was appended is read); a console on another host, which cannot
see the artifacts, falls back to the engine's line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from relay_engine.agents.adapters.base import LineBuffer, parse_json_line
from relay_engine.contracts.numbers import as_count
from relay_engine.contracts.pricing import Price, execution_spend
from relay_engine.store.read_model.executions import ExecutionView
from relay_tui.data.output import STDOUT_NAME
from relay_tui.data.stream import StreamItem, parse_line

FIRST_READ_BYTES = 64 * 1024
READ_BYTES = 256 * 1024
STEP_KINDS = frozenset({"tool", "file", "message", "error", "result", "session"})


@dataclass(frozen=True, slots=True)
class RunProgress:
    """One live execution as the Running agents pane shows it."""

    step: str | None = None
    """The tool and its target, or the first line of the last message."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    estimated: bool = True
    last_output_at: float | None = None
    """When the agent last wrote (its stdout's modification time); None when unseen."""
    timeout_s: float | None = None
    engine_gone_at: float | None = None
    """When the engine running it was last heard from, once that engine is gone."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


def step_of(item: StreamItem) -> str:
    """``Bash: pytest -q`` reads ``Bash pytest -q``; a message, its first line."""
    text = item.text.strip().splitlines()[0] if item.text.strip() else ""
    if item.kind in ("tool", "file"):
        name, sep, target = text.partition(": ")
        if target.startswith(("{", "[")):  # an input with no path or command: the tool
            return name
        return f"{name} {target}" if sep else text
    return text


@dataclass
class _Followed:
    provider: str | None
    model: str | None
    offset: int = 0
    buffer: LineBuffer | None = None
    step: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    mtime: float | None = None


class ProgressReader:
    """Follows the stdout of every running execution; one instance per reader thread."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self.prices = prices
        self._followed: dict[str, _Followed] = {}

    def read(self, runs: Iterable[ExecutionView]) -> dict[str, RunProgress]:
        live = {run.id: run for run in runs if run.ended_at is None}
        for gone in set(self._followed) - set(live):
            del self._followed[gone]
        found = {}
        for run in live.values():
            followed = self._followed.setdefault(run.id, _Followed(run.provider, run.model))
            if run.artifact_dir:
                self._read_new(followed, Path(run.artifact_dir) / STDOUT_NAME)
            found[run.id] = self._progress(run, followed)
        return found

    def _read_new(self, followed: _Followed, path: Path) -> None:
        try:
            stat = path.stat()
            if stat.st_size < followed.offset:  # rewritten: start over
                followed.offset, followed.buffer = 0, None
            followed.mtime = stat.st_mtime
            if stat.st_size == followed.offset:
                return
            with path.open("rb") as handle:
                if followed.buffer is None and stat.st_size > FIRST_READ_BYTES:
                    followed.offset = stat.st_size - FIRST_READ_BYTES
                handle.seek(followed.offset)
                data = handle.read(READ_BYTES)
        except OSError:
            return
        skip_partial = followed.buffer is None and followed.offset > 0
        followed.buffer = followed.buffer or LineBuffer()
        followed.offset += len(data)
        lines = list(followed.buffer.feed(data))
        for line in lines[1:] if skip_partial else lines:
            self._take(followed, line)

    def _take(self, followed: _Followed, line: str) -> None:
        for item in parse_line(followed.provider, line):
            if item.kind in STEP_KINDS and item.text.strip():
                followed.step = step_of(item)
        for event in parse_json_line(line) or ():
            usage = _usage(event)
            if usage is not None:
                followed.input_tokens = (followed.input_tokens or 0) + usage[0]
                followed.output_tokens = (followed.output_tokens or 0) + usage[1]
                followed.cached_tokens = (followed.cached_tokens or 0) + usage[2]
            model = _model(event)
            followed.model = model or followed.model

    def _progress(self, run: ExecutionView, followed: _Followed) -> RunProgress:
        tokens_in = followed.input_tokens
        tokens_out = followed.output_tokens
        if tokens_in is None and run.spend.tokens:  # the engine's figure, when it has one
            tokens_in, tokens_out = run.spend.input_tokens, run.spend.output_tokens
        spend = execution_spend(
            reported_cost=run.spend.cost_usd or None,
            model=followed.model,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cached_tokens=followed.cached_tokens,
            prices=self.prices,
        )
        return RunProgress(
            step=followed.step or run.last_output,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=spend.cost_usd,
            estimated=spend.estimated,
            last_output_at=followed.mtime,
        )


def _usage(event: Mapping[str, object]) -> tuple[int, int, int] | None:
    """(input incl. cached, output, cached) tokens of one message, where the stream says:
    claude's per-message usage counts cache reads apart, codex's turn includes them."""
    if event.get("type") == "turn.completed":
        usage = event.get("usage")
        if not isinstance(usage, dict):
            return None
        cached = _count(usage, "cached_input_tokens")
        return _count(usage, "input_tokens"), _count(usage, "output_tokens"), cached
    message = event.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    if event.get("type") != "assistant" or not isinstance(usage, dict):
        return None
    cached = _count(usage, "cache_read_input_tokens")
    fresh = _count(usage, "input_tokens") + _count(usage, "cache_creation_input_tokens")
    return fresh + cached, _count(usage, "output_tokens"), cached


def _count(usage: Mapping[str, object], key: str) -> int:
    """A count the stream gives, 0 for none or for one that cannot be a count (``1e400``,
    a string): the console reads agents' streams as they write them."""
    return as_count(usage.get(key)) or 0


def _model(event: Mapping[str, object]) -> str | None:
    message = event.get("message")
    model = message.get("model") if isinstance(message, dict) else event.get("model")
    return model if isinstance(model, str) else None

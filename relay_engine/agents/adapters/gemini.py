"""Gemini CLI: `gemini -p PROMPT --output-format json`.

The output is one (pretty-printed) JSON object: `{"response", "stats": {"models": {NAME:
{"tokens": {"prompt", "candidates", "thoughts", ...}}}}}` or `{"error": {"type", "message",
"code"}}`; newer builds add `session_id`. Sessions resume with `--resume SESSION_ID`
(documented under Session Management). JSONL from `--output-format stream-json`
(init/message/result/error events) is understood too, so an override may use either.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    BaseParser,
    Invocation,
    InvocationContext,
    add_tokens,
    clean_progress,
    extract_json,
    first_line,
    parse_json_line,
    prompt_needs_stdin,
    relay_env,
)
from relay_engine.core.failures import classify_text, gemini_error_message, unreachable

OUTPUT_CAP = 8 * 1024 * 1024  # the single JSON object is buffered whole up to this size
APPROVAL_MODES = {"read-only": "plan", "workspace-write": "auto_edit", "full": "yolo"}
"""`access` -> `--approval-mode`: the default mode blocks writes when headless."""
_RETRY_LINE = re.compile(r"^Attempt (\d{1,9}) failed\. Retrying with backoff\.\.\. (.*)$", re.M)
NETWORK_RETRIES_BEFORE_UNREACHABLE = 3


class GeminiAdapter:
    provider = "gemini"
    supports_resume = True
    state_paths = ("~/.gemini",)
    state_files: tuple[str, ...] = ()
    state_env: str | None = None
    state_read_only = ("settings.json", "GEMINI.md")
    cache_paths: tuple[str, ...] = ()
    auth_env = (
        "GEMINI_*",
        "GOOGLE_API_KEY",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_*",
        "GOOGLE_APPLICATION_CREDENTIALS",
    )
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        """A prompt that must go on stdin is sent without -p: non-TTY stdin means headless."""
        exe = list(ctx.command) if ctx.command else ["gemini"]
        via_stdin = prompt_needs_stdin(ctx.prompt)
        argv = [*exe, *([] if via_stdin else ["-p", ctx.prompt])]
        argv += ["--output-format", "json", "--approval-mode", APPROVAL_MODES[ctx.access]]
        argv.append("--skip-trust")  # relay's worktrees are never in gemini's trusted list
        if ctx.resume_session_id:
            argv += ["--resume", ctx.resume_session_id]
        if ctx.model:
            argv += ["--model", ctx.model]
        for tool in ctx.tools:
            argv += ["--allowed-tools", tool]
        argv += list(ctx.extra_args)
        return Invocation(argv, ctx.prompt if via_stdin else None, relay_env(ctx))

    def parser(self) -> GeminiParser:
        return GeminiParser()


class GeminiParser(BaseParser):
    provider = "gemini"

    def __init__(self) -> None:
        super().__init__()
        self._lines_kept: list[str] = []
        self._size = 0
        self._stream_text: list[str] = []

    def _line(self, line: str, now: datetime) -> None:
        if self._size + len(line) < OUTPUT_CAP:
            self._lines_kept.append(line)
            self._size += len(line) + 1
        for event in parse_json_line(line):
            self._stream_event(event, now)

    def _stream_event(self, event: dict[str, Any], now: datetime) -> None:
        kind = event.get("type")
        report = self._report
        session = event.get("session_id") or event.get("sessionId")
        if isinstance(session, str) and session:
            report.session_id = session
        if kind == "message" and event.get("role") == "assistant":
            if isinstance(event.get("content"), str) and self._size < OUTPUT_CAP:
                self._stream_text.append(event["content"])
                report.last_progress = clean_progress("".join(self._stream_text[-50:]))
        elif kind == "tool_use":
            report.last_progress = clean_progress(f"tool: {event.get('tool_name', '?')}")
        elif kind == "result":
            self._apply_stats(event.get("stats"))
        self._event_limit(event, now)

    def notice_stderr(self, stderr_tail: str) -> None:
        """Offline, gemini retries "fetch failed" with back-off for minutes, on stderr only."""
        if self._report.failure is not None:
            return
        retries = _RETRY_LINE.findall(stderr_tail)
        if not retries or int(retries[-1][0]) < NETWORK_RETRIES_BEFORE_UNREACHABLE:
            return
        failure = classify_text(self.provider, retries[-1][1])
        if failure is not None and failure.kind == "unreachable":
            self._report.failure = unreachable(retries[-1][1])

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        report = self._report
        text = "\n".join(self._lines_kept)
        payload = _single_object(text)
        if payload is None and exit_code != 0:
            payload = _stderr_error(stderr_tail)  # a fatal error goes to stderr, not stdout
        if payload is not None and "type" not in payload:  # "type": a stream-json event
            self._apply_payload(payload, now)
        elif self._stream_text:
            report.result_text = "".join(self._stream_text)
        else:
            report.result_text = text.strip() or None
        report.result_data = extract_json(report.result_text)

    def _apply_payload(self, payload: dict[str, Any], now: datetime) -> None:
        report = self._report
        response = payload.get("response")
        if isinstance(response, str):
            report.result_text = response
            report.last_progress = first_line(response) or report.last_progress
        session = payload.get("session_id") or payload.get("sessionId")
        if isinstance(session, str) and session:
            report.session_id = session
        self._apply_stats(payload.get("stats"))
        error = payload.get("error")
        if isinstance(error, dict):
            report.is_error = True
            report.error = clean_progress(str(error.get("message") or error.get("type")))
            self._cli_error(report.error)
            report.last_progress = report.error
            self._event_limit(payload, now)

    def _apply_stats(self, stats: object) -> None:
        if not isinstance(stats, dict):
            return
        models = stats.get("models")
        if isinstance(models, dict) and models:
            self._apply_model_tokens(models)
            return
        report = self._report
        for key in ("input_tokens", "inputTokens"):
            if key in stats:
                report.input_tokens = add_tokens(None, stats[key])
        for key in ("output_tokens", "outputTokens"):
            if key in stats:
                report.output_tokens = add_tokens(None, stats[key])

    def _apply_model_tokens(self, models: dict[str, Any]) -> None:
        """Sum over models; thinking tokens count as output (they are billed as output).
        The model that read the most tokens names the run."""
        inputs: int | None = None
        outputs: int | None = None
        cached: int | None = None
        heaviest: tuple[int, str | None] = (-1, None)
        for name, model in models.items():
            tokens = model.get("tokens") if isinstance(model, dict) else None
            if isinstance(tokens, dict):
                inputs = add_tokens(inputs, tokens.get("prompt"))
                outputs = add_tokens(outputs, tokens.get("candidates"))
                outputs = add_tokens(outputs, tokens.get("thoughts"))
                cached = add_tokens(cached, tokens.get("cached"))
                heaviest = max(heaviest, (add_tokens(0, tokens.get("prompt")) or 0, name))
        report = self._report
        report.input_tokens, report.output_tokens, report.cached_tokens = inputs, outputs, cached
        report.model = heaviest[1] or report.model


def _stderr_error(stderr: str) -> dict[str, Any] | None:
    """The `{"session_id", "error": {...}}` object gemini prints on stderr when it fails."""
    message = gemini_error_message(stderr)
    return {"error": {"message": message}} if message else None


def _single_object(text: str) -> dict[str, Any] | None:
    """The CLI's one JSON object, tolerating log lines printed before it."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return _object_after_noise(stripped)
    return value if isinstance(value, dict) else None


def _object_after_noise(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    index = 0 if text.startswith("{") else text.find("\n{")
    while index != -1:
        start = index if text[index] == "{" else index + 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value, end = None, 0
        if isinstance(value, dict) and not text[end:].strip():
            return value
        index = text.find("\n{", start + 1)
    return None

"""Claude Code: `claude -p PROMPT --output-format stream-json --verbose`.

The stream is JSONL: a `system`/`init` event (session_id, model), `assistant` and `user`
messages, optional `rate_limit_event`s, and a final `result` event carrying the answer, the
session id, `total_cost_usd` and `usage`.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
from datetime import datetime

from relay_engine.agents.adapters.base import (
    Invocation,
    InvocationContext,
    JsonLinesParser,
    add_tokens,
    clean_progress,
    extract_json,
    first_line,
    prompt_needs_stdin,
    relay_env,
)

_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
PERMISSION_MODES = {
    "read-only": "plan",
    "workspace-write": "acceptEdits",
    "full": "bypassPermissions",
}
"""`access` -> `--permission-mode`: `claude -p` denies every edit not pre-approved."""


class ClaudeAdapter:
    provider = "claude"
    supports_resume = True

    def build(self, ctx: InvocationContext) -> Invocation:
        exe = list(ctx.command) if ctx.command else ["claude"]
        via_stdin = prompt_needs_stdin(ctx.prompt)
        argv = [*exe, "-p", *([] if via_stdin else [ctx.prompt])]
        argv += ["--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", PERMISSION_MODES[ctx.access]]
        if ctx.resume_session_id:
            argv += ["--resume", ctx.resume_session_id]
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        if ctx.tools:  # last: --allowedTools is variadic and would swallow what follows
            argv += ["--allowedTools", ",".join(ctx.tools)]
        return Invocation(argv, ctx.prompt if via_stdin else None, relay_env(ctx))

    def parser(self) -> ClaudeParser:
        return ClaudeParser()


class ClaudeParser(JsonLinesParser):
    provider = "claude"

    def __init__(self) -> None:
        super().__init__()
        self._last_text: str | None = None
        self._has_result = False

    def _plain_is_progress(self) -> bool:
        return not self._has_result

    def _event(self, event: dict, now: datetime) -> None:
        kind = event.get("type")
        report = self._report
        if isinstance(event.get("session_id"), str) and event["session_id"]:
            report.session_id = event["session_id"]
        if kind == "system" and event.get("subtype") == "init":
            if isinstance(event.get("model"), str):
                report.model = event["model"]
            report.last_progress = f"session started ({event.get('model') or 'default model'})"
        elif kind == "assistant":
            self._assistant(event)
        elif kind == "result":
            self._result(event)
        self._event_limit(event, now)

    def _assistant(self, event: dict) -> None:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return
        blocks = [c for c in content if isinstance(c, dict)]
        texts = [
            c["text"] for c in blocks if c.get("type") == "text" and isinstance(c.get("text"), str)
        ]
        if texts:
            self._last_text = "\n".join(texts)
            self._report.last_progress = first_line(self._last_text)
            if event.get("error"):
                self._cli_error(self._last_text)
        for block in blocks:
            if block.get("type") == "tool_use":
                self._report.last_progress = _tool_progress(block)

    def _result(self, event: dict) -> None:
        report = self._report
        self._has_result = True
        result = event.get("result")
        report.result_text = result if isinstance(result, str) else self._last_text
        report.result_data = extract_json(report.result_text)
        subtype = str(event.get("subtype") or "success")
        report.is_error = bool(event.get("is_error")) or subtype != "success"
        if report.is_error:
            report.error = report.last_progress = clean_progress(report.result_text) or subtype
            if (report.result_text or "").startswith("API Error"):
                self._cli_error(report.result_text)
        cost = event.get("total_cost_usd", event.get("cost_usd"))
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            report.cost_usd = float(cost)
        usage = event.get("usage")
        if isinstance(usage, dict):
            report.input_tokens = None
            for key in _INPUT_KEYS:
                report.input_tokens = add_tokens(report.input_tokens, usage.get(key))
            report.output_tokens = add_tokens(None, usage.get("output_tokens"))
            report.cached_tokens = add_tokens(None, usage.get("cache_read_input_tokens"))

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        if not self._has_result:
            self._report.result_text = self._last_text
            self._report.result_data = extract_json(self._last_text)
            if exit_code == 0 and not self._last_text:
                self._report.is_error = True
                self._report.error = "no result event in the stream"


def _tool_progress(block: dict) -> str | None:
    name = block.get("name") or "tool"
    tool_input = block.get("input")
    detail = ""
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "description"):
            if isinstance(tool_input.get(key), str):
                detail = tool_input[key]
                break
        else:
            detail = json.dumps(tool_input, ensure_ascii=False)[:120]
    return clean_progress(f"{name}: {detail}" if detail else str(name))

"""Qwen Code: `qwen -p PROMPT --output-format stream-json --approval-mode MODE`.

The stream is claude's (``system``/``init`` with the session id, ``assistant`` and ``user``
messages, a final ``result``), with qwen's differences (docs/agent-clis.md): usage on every
assistant message and no cost; a failed run's ``result`` has no ``result`` text but an
``error`` object ("No auth type is selected" when no login or ``--auth-type`` is given);
``permission_mode`` instead of ``permissionMode``. A 429 is retried by qwen in a loop whose
delays start at 60 s and double (hard-coded): the stream only says ``system``/``retry``, the
reason goes to stderr (``Retrying in 60s (attempt 1/10): [API Error: 429 …]``), so relay
reads stderr while qwen runs and stops it as limited instead of waiting for the loop.

relay's permission channel is claude's control protocol, but qwen only uses it after an
``initialize`` control request: the stdin conversation starts with one, then the prompt as a
user line. ``auto-edit`` runs edits itself and asks relay about every shell command; without
the channel ``auto-edit`` declines shell commands outright.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Invocation,
    InvocationContext,
    ToolAnswer,
    ToolRequest,
    clean_progress,
    prompt_needs_stdin,
    relay_env,
)
from relay_engine.agents.adapters.claude import ClaudeAdapter, ClaudeParser
from relay_engine.core.failures import classify_text, unreachable
from relay_engine.core.limits import detect_limit

APPROVAL_MODES = {"read-only": "plan", "workspace-write": "auto-edit", "full": "yolo"}
"""`access` -> `--approval-mode`: qwen's default mode refuses every edit when headless."""
INITIALIZE = {
    "type": "control_request",
    "request_id": "relay-init-1",
    "request": {"subtype": "initialize", "hooks": None},
}
_RETRY_LINE = re.compile(r"^Retrying in \S+ \(attempt (\d{1,9})/\d+\): (.*)$", re.MULTILINE)
NETWORK_RETRIES_BEFORE_UNREACHABLE = 2


class QwenAdapter:
    provider = "qwen"
    supports_resume = True
    state_paths = ("~/.qwen",)
    state_files: tuple[str, ...] = ()
    state_env: str | None = None  # QWEN_HOME moves it: an account's folder (see accounts)
    state_read_only = ("settings.json", "QWEN.md")
    cache_paths: tuple[str, ...] = ()
    auth_env = ("QWEN_*", "OPENAI_*", "DASHSCOPE_*")
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        """A prompt too long for argv goes in as a stream-json user line too: qwen's plain
        stdin input is appended to ``-p``'s, and the channel's format is already here."""
        exe = list(ctx.command) if ctx.command else ["qwen"]
        talk = ctx.permission_channel and ctx.access != "full"
        via_stdin = talk or prompt_needs_stdin(ctx.prompt)
        argv = [*exe, "-p", *([] if via_stdin else [ctx.prompt])]
        argv += ["--output-format", "stream-json"]
        if via_stdin:
            argv += ["--input-format", "stream-json"]
        argv += ["--approval-mode", APPROVAL_MODES[ctx.access]]
        if ctx.resume_session_id:
            argv += ["--resume", ctx.resume_session_id]
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        argv += [f"--allowed-tools={tool}" for tool in ctx.tools]
        if not via_stdin:
            return Invocation(argv, None, relay_env(ctx))
        first = json.dumps(INITIALIZE) + "\n" + self.user_line(ctx.prompt).decode("utf-8")
        return Invocation(argv, first, relay_env(ctx), conversation=True)

    def parser(self) -> QwenParser:
        return QwenParser()

    def answer_line(self, request: ToolRequest, answer: ToolAnswer) -> bytes:
        return ClaudeAdapter().answer_line(request, answer)

    def user_line(self, text: str) -> bytes:
        return ClaudeAdapter().user_line(text)


class QwenParser(ClaudeParser):
    provider = "qwen"

    def __init__(self) -> None:
        super().__init__()
        self._now: datetime | None = None

    def feed(self, chunk: bytes, now: datetime) -> None:
        self._now = now
        super().feed(chunk, now)

    def _event(self, event: dict[str, Any], now: datetime) -> None:
        super()._event(event, now)
        if event.get("type") == "result" and isinstance(event.get("error"), dict):
            message = event["error"].get("message")
            if isinstance(message, str) and message:
                self._report.error = self._report.last_progress = clean_progress(message)
                self._cli_error(message)
        elif event.get("type") == "system" and event.get("subtype") == "retry":
            self._report.last_progress = "retrying the model request"

    def notice_stderr(self, stderr_tail: str) -> None:
        """qwen retries a 429 for many minutes and a dead network too: the reason is only on
        stderr. A limit stops it at once; a network error after a couple of retries."""
        report = self._report
        retries = _RETRY_LINE.findall(stderr_tail)
        if not retries or report.limit is not None or report.failure is not None:
            return
        attempt, reason = int(retries[-1][0]), retries[-1][1]
        if self._now is not None:
            self._merge_limit(detect_limit(reason, self.provider, self._now))
        if report.limit is None and attempt >= NETWORK_RETRIES_BEFORE_UNREACHABLE:
            failure = classify_text(self.provider, reason)
            if failure is not None and failure.kind == "unreachable":
                report.failure = unreachable(reason)

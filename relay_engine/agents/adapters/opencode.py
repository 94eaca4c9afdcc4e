"""OpenCode: `opencode run --format json PROMPT`, resumed with `--session ID`.

The stream is JSONL, every line carrying the ``sessionID``: ``step_start``, ``tool_use``
(its ``part.state`` has the input, output and status), ``text`` (the agent's words),
``step_finish`` (``tokens`` and ``cost`` of that step, from the config's prices) and, when
a request failed for good, one ``error`` line (``error.data``: ``message``, ``statusCode``,
``responseHeaders``). There is no summary line: the last ``step_finish`` ends the run.

Offline opencode retries for about a minute and prints only its final error. relay passes
``--print-logs --log-level ERROR`` so each failed attempt shows on stderr
(``message="stream error" … Cannot connect to API``) and stops it after the second.
A permission its config marks ``ask`` is auto-rejected by ``run``; the asking channel is
ACP (``opencode acp``, provider ``acp``).

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Denial,
    Invocation,
    InvocationContext,
    JsonLinesParser,
    add_tokens,
    as_object,
    clean_progress,
    extract_json,
    first_line,
    prompt_needs_stdin,
    relay_env,
)
from relay_engine.agents.adapters.claude import tool_progress
from relay_engine.contracts.numbers import as_amount, as_number
from relay_engine.core.failures import auth, unreachable
from relay_engine.core.limits import LimitSignal, plausible_reset

ACCESS_FLAGS = {"read-only": ["--agent", "plan"], "workspace-write": [], "full": ["--auto"]}
"""`access` -> opencode's flags: its ``plan`` agent may not edit; the default ``build``
agent runs what its permission config allows (everything, by default, inside the folder);
``--auto`` approves whatever the config would ask about."""
LOG_FLAGS = ["--print-logs", "--log-level", "ERROR"]
_STREAM_ERROR = re.compile(r'message="stream error".*?error\.error="([^"]*)"')
_OFFLINE = re.compile(r"cannot connect to api|unable to connect", re.IGNORECASE)
OFFLINE_ATTEMPTS = 2


class OpenCodeAdapter:
    provider = "opencode"
    supports_resume = True
    # logins and sessions, logs, the provider packages it installs, its config
    state_paths = ("~/.local/share/opencode", "~/.local/state/opencode", "~/.config/opencode")
    state_files: tuple[str, ...] = ()
    state_env: str | None = None  # XDG_DATA_HOME / OPENCODE_CONFIG_DIR: an account's folders
    state_read_only = ("opencode.json", "opencode.jsonc", "AGENTS.md", "agent", "command")
    cache_paths = ("~/.cache/opencode",)  # the provider packages it installs
    auth_env = ("OPENCODE_*", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        """opencode reads a prompt from stdin when none is given on the command line."""
        exe = list(ctx.command) if ctx.command else ["opencode"]
        argv = [*exe, "run", "--format", "json", *LOG_FLAGS, *ACCESS_FLAGS[ctx.access]]
        if ctx.resume_session_id:
            argv += ["--session", ctx.resume_session_id]
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        via_stdin = prompt_needs_stdin(ctx.prompt)
        if not via_stdin:
            argv.append(ctx.prompt)
        # opencode takes its project folder from $PWD, not from the process's working
        # directory: with the engine's PWD it would run commands (and judge every write in
        # the task's worktree "external") in the folder relay was started from.
        env = {**relay_env(ctx), "PWD": str(ctx.cwd)}
        return Invocation(argv, ctx.prompt if via_stdin else None, env)

    def parser(self) -> OpenCodeParser:
        return OpenCodeParser()


class OpenCodeParser(JsonLinesParser):
    provider = "opencode"

    def __init__(self) -> None:
        super().__init__()
        self._texts: dict[str, list[str]] = {}  # message id -> its text parts, in order
        self._last_message: str | None = None
        self._cost: float | None = None
        self._stopped = False  # a step finished with reason "stop": the agent was done
        self._rejected: str | None = None  # a tool call run auto-rejected

    def _event(self, event: dict[str, Any], now: datetime) -> None:
        kind = event.get("type")
        part = as_object(event.get("part"))
        if isinstance(event.get("sessionID"), str) and event["sessionID"]:
            self._report.session_id = event["sessionID"]
        if kind == "text" and isinstance(part.get("text"), str):
            message = str(part.get("messageID") or "")
            self._texts.setdefault(message, []).append(part["text"])
            self._last_message = message
            self._report.last_progress = first_line(part["text"]) or self._report.last_progress
        elif kind == "tool_use":
            self._tool(part)
        elif kind == "step_finish":
            self._step(part)
        elif kind == "error":
            self._error(event.get("error"), now)

    def _tool(self, part: dict[str, Any]) -> None:
        state = as_object(part.get("state"))
        block = {"name": part.get("tool") or "tool", "input": state.get("input")}
        shown = self._report.last_progress = tool_progress(block)
        error = state.get("error")
        if state.get("status") == "error" and isinstance(error, str) and "rejected" in error:
            self._rejected = shown or str(block["name"])
            refused = Denial(str(block["name"]), self._rejected, "cli",
                             "opencode auto-rejected it: its config asks, and run cannot ask",
                             part.get("callID"))  # fmt: skip
            self._report.denials = [*self._report.denials, refused]

    def _step(self, part: dict[str, Any]) -> None:
        report = self._report
        tokens = as_object(part.get("tokens"))
        cache = as_object(tokens.get("cache"))
        report.input_tokens = add_tokens(report.input_tokens, tokens.get("input"))
        report.input_tokens = add_tokens(report.input_tokens, cache.get("read"))
        report.output_tokens = add_tokens(report.output_tokens, tokens.get("output"))
        report.output_tokens = add_tokens(report.output_tokens, tokens.get("reasoning"))
        report.cached_tokens = add_tokens(report.cached_tokens, cache.get("read"))
        cost = as_amount(part.get("cost"))
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        if part.get("reason") == "stop":
            self._stopped = True
            report.turns_ended += 1

    def _error(self, error: object, now: datetime) -> None:
        """The final error of a request opencode gave up on: a 429 is a limit, 401/403 a
        login, "Cannot connect to API" the network; anything else fails the attempt."""
        report = self._report
        fields = as_object(error)
        data = as_object(fields.get("data"))
        message = str(data.get("message") or fields.get("name") or "error")
        status = data.get("statusCode")
        report.is_error = True
        report.error = report.last_progress = clean_progress(message)
        self._cli_error(message)
        if status == 429:
            reset = _retry_after(data.get("responseHeaders"), now)
            self._merge_limit(LimitSignal(self.provider, reset, message[:300], "rate"))
        elif status in (401, 403):
            report.failure = auth(self.provider, message)
        elif _OFFLINE.search(message):
            report.failure = unreachable(message)
        else:
            self._event_limit({"type": "error", "message": message}, now)

    def notice_stderr(self, stderr_tail: str) -> None:
        """With --print-logs every failed attempt is a "stream error" line on stderr."""
        if self._report.failure is not None:
            return
        offline = [m for m in _STREAM_ERROR.findall(stderr_tail) if _OFFLINE.search(m)]
        if len(offline) >= OFFLINE_ATTEMPTS:
            self._report.failure = unreachable(offline[-1].removeprefix("AI_APICallError: "))

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        report = self._report
        texts = self._texts.get(self._last_message or "", [])
        report.result_text = "".join(texts) or None
        report.result_data = extract_json(report.result_text)
        if self._cost:  # 0 means the config had no price: relay estimates instead
            report.cost_usd = self._cost
        if exit_code == 0 and self._rejected and not self._stopped:
            report.is_error = True  # run ends at a rejected permission, with exit 0
            report.error = (
                f"opencode stopped at a permission its config marks ask ({self._rejected}): "
                'allow it in opencode.json, or use provider "acp" with ["opencode", "acp"]'
            )


def _retry_after(headers: object, now: datetime) -> float | None:
    if not isinstance(headers, dict):
        return None
    value = headers.get("retry-after")
    try:
        seconds = as_number(float(value)) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return plausible_reset(now.timestamp() + seconds, now) if seconds is not None else None

"""GitHub Copilot CLI: `copilot -p PROMPT --output-format json`, resumed with `--resume ID`.

The stream is JSONL: ``user.message``, ``assistant.message`` (``content`` and
``toolRequests``), ``tool.execution_start`` / ``tool.execution_complete`` (``success``,
``fileEdits``, ``error``), ``assistant.turn_retry``, ``session.error`` (``errorType`` such
as ``rate_limit``, ``statusCode``), and a final ``result`` with the ``sessionId`` and the
``exitCode``; lines marked ``ephemeral`` are deltas and are skipped. ``-p`` reports no
tokens or cost. Logged out, copilot prints nothing on stdout and says "No authentication
information found." on stderr.

``-p`` never asks: what needs approval is denied unless pre-approved, so relay's rules go to
copilot's own ``--allow-tool`` / ``--deny-tool`` (``shell(npm test:*)``, ``write(src/)``),
where a deny wins even over ``--allow-all-tools``. The asking channel is ACP (``copilot
--acp``, provider ``acp``).

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Denial,
    Invocation,
    InvocationContext,
    JsonLinesParser,
    as_object,
    clean_progress,
    extract_json,
    first_line,
    prompt_needs_stdin,
    relay_env,
)
from relay_engine.agents.adapters.claude import tool_progress
from relay_engine.contracts.numbers import as_count
from relay_engine.contracts.rules import parse_rule
from relay_engine.core.limits import LimitSignal

ACCESS_FLAGS = {
    "read-only": ["--deny-tool=write"],
    "workspace-write": ["--allow-all-tools"],
    "full": ["--allow-all"],
}
"""`access` -> copilot's permission flags: file writes denied (and shell commands, which
need approval, refused by ``-p``); every tool, with file access kept to the working folder
(copilot's default path check); every tool, path and URL."""
_KINDS = {"Bash": "shell", "Edit": "write", "Write": "write", "MultiEdit": "write"}


def copilot_rule(rule: str) -> str | None:
    """relay's rule in copilot's permission syntax: ``Bash(npm test:*)`` ->
    ``shell(npm test:*)``, ``Edit(src/**)`` -> ``write(src/)``; None when copilot has none."""
    parsed = parse_rule(rule)
    kind = _KINDS.get(parsed.tool)
    if kind is None:
        return None
    if parsed.spec is None:
        return kind
    spec = parsed.spec.removesuffix("**") if kind == "write" else parsed.spec
    return f"{kind}({spec})"


class CopilotAdapter:
    provider = "copilot"
    supports_resume = True
    state_paths = ("~/.copilot",)
    state_files: tuple[str, ...] = ()
    state_env: str | None = "COPILOT_HOME"
    state_read_only = ("config.json", "mcp-config.json", "copilot-instructions.md")
    cache_paths = ("~/.cache/copilot",)  # the bundled packages it unpacks on each start
    auth_env = ("COPILOT_*", "GH_TOKEN", "GITHUB_TOKEN")  # copilot signs in with a GitHub token
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        """copilot reads a prompt piped on stdin when ``-p`` is not given."""
        exe = list(ctx.command) if ctx.command else ["copilot"]
        via_stdin = prompt_needs_stdin(ctx.prompt)
        argv = [*exe, *([] if via_stdin else ["-p", ctx.prompt]), "--output-format", "json"]
        argv += ACCESS_FLAGS[ctx.access]
        if ctx.resume_session_id:
            argv.append(f"--resume={ctx.resume_session_id}")
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        allowed = [*ctx.tools, *filter(None, map(copilot_rule, ctx.allow_rules))]
        denied = filter(None, map(copilot_rule, ctx.deny_rules))
        argv += [f"--allow-tool={tool}" for tool in allowed]  # `=`: the flags are variadic
        argv += [f"--deny-tool={tool}" for tool in denied]
        return Invocation(argv, ctx.prompt if via_stdin else None, relay_env(ctx))

    def parser(self) -> CopilotParser:
        return CopilotParser()


class CopilotParser(JsonLinesParser):
    provider = "copilot"

    def __init__(self) -> None:
        super().__init__()
        self._last_text: str | None = None
        self._has_result = False

    def _event(self, event: dict[str, Any], now: datetime) -> None:
        if event.get("ephemeral"):
            return
        kind = event.get("type")
        data = as_object(event.get("data"))
        if kind == "assistant.message":
            self._message(data)
        elif kind == "tool.execution_start":
            block = {"name": data.get("toolName"), "input": data.get("arguments")}
            self._report.last_progress = tool_progress(block)
        elif kind == "tool.execution_complete":
            self._tool_done(data)
        elif kind == "session.error":
            self._session_error(data, now)
        elif kind == "result":
            self._result(event)
        if isinstance(data.get("model"), str) and not data["model"].startswith("$"):
            self._report.model = data["model"]

    def _message(self, data: dict[str, Any]) -> None:
        content = data.get("content")
        if isinstance(content, str) and content.strip():
            self._last_text = content
            self._report.last_progress = first_line(content)

    def _tool_done(self, data: dict[str, Any]) -> None:
        error = as_object(data.get("error"))
        if data.get("success") is False and error.get("code") == "denied":
            tool = str(data.get("toolName") or "tool")
            message = str(error.get("message") or "denied")
            self._report.denials = [
                *self._report.denials,
                Denial(tool, tool, "cli", f"copilot refused it: {message[:120]}",
                       data.get("toolCallId")),
            ]  # fmt: skip

    def _session_error(self, data: dict[str, Any], now: datetime) -> None:
        report = self._report
        message = str(data.get("message") or data.get("errorType") or "session error")
        report.is_error = True
        report.error = report.last_progress = clean_progress(message)
        self._cli_error(message)
        if data.get("errorType") == "rate_limit" or data.get("statusCode") == 429:
            self._merge_limit(LimitSignal(self.provider, None, message[:300], "rate"))
        self._event_limit({"type": "error", "message": message}, now)

    def _result(self, event: dict[str, Any]) -> None:
        report = self._report
        self._has_result = True
        report.turns_ended += 1
        if isinstance(event.get("sessionId"), str) and event["sessionId"]:
            report.session_id = event["sessionId"]
        code = event.get("exitCode")
        if code not in (0, None):
            report.is_error = True
            said = as_count(code)
            shown = f"exit code {said}" if said is not None else "an exit code that is no number"
            report.error = report.error or f"copilot's result line says {shown}"

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        report = self._report
        report.result_text = self._last_text
        report.result_data = extract_json(self._last_text)
        if exit_code == 0 and not self._has_result and not self._last_text:
            report.is_error = True
            report.error = "no result line in the stream"

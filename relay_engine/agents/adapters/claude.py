"""Claude Code: `claude -p PROMPT --output-format stream-json --verbose`.

The stream is JSONL: a `system`/`init` event (session_id, model), `assistant` and `user`
messages, optional `rate_limit_event`s, and a final `result` event carrying the answer, the
session id, `total_cost_usd`, `usage` and the `permission_denials` claude decided itself.

With relay's permission channel (``--input-format stream-json --permission-prompt-tool
stdio``) the prompt goes in on stdin as a user message, every tool use the permission mode
does not pre-approve arrives as a ``control_request`` (`can_use_tool`) that claude waits on,
and relay's answer goes back on stdin as a ``control_response``; an `AskUserQuestion` is
such a request too, answered with the question's answers. After its `result` claude waits
for the next user message; closing stdin ends it. (See docs/agent-clis.md.)

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Denial,
    Invocation,
    InvocationContext,
    JsonLinesParser,
    ToolAnswer,
    ToolRequest,
    add_tokens,
    as_object,
    clean_progress,
    extract_json,
    first_line,
    prompt_needs_stdin,
    relay_env,
)
from relay_engine.contracts.numbers import as_amount

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
    state_paths = ("~/.claude",)
    state_files = ("~/.claude.json",)
    # What the operator's own sessions, outside any sandbox, would run or obey.
    state_read_only = ("settings.json", "settings.local.json", "CLAUDE.md", "hooks", "commands")
    cache_paths: tuple[str, ...] = ()
    state_env: str | None = (
        "CLAUDE_CONFIG_DIR"  # set: everything lives in that folder, .claude.json too
    )
    auth_env = ("ANTHROPIC_*", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR")
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        exe = list(ctx.command) if ctx.command else ["claude"]
        talk = ctx.permission_channel and ctx.access != "full"
        via_stdin = talk or prompt_needs_stdin(ctx.prompt)
        argv = [*exe, "-p", *([] if via_stdin else [ctx.prompt])]
        argv += ["--output-format", "stream-json", "--verbose"]
        if talk:
            argv += ["--input-format", "stream-json", "--permission-prompt-tool", "stdio"]
        if ctx.memory_server:  # variadic like --allowedTools: an option must follow it
            argv += ["--mcp-config", str(ctx.memory_server.config_file)]
        argv += ["--permission-mode", PERMISSION_MODES[ctx.access]]
        if ctx.resume_session_id:
            argv += ["--resume", ctx.resume_session_id]
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        if ctx.deny_rules:
            argv += ["--disallowedTools", ",".join(ctx.deny_rules)]
        allowed = [*ctx.tools, *ctx.allow_rules]
        if ctx.memory_server:  # relay's own memory is never a question for the operator
            allowed.append(f"mcp__{ctx.memory_server.name}")
        if allowed:  # last: --allowedTools is variadic and would swallow what follows
            argv += ["--allowedTools", ",".join(allowed)]
        if talk:
            stdin = self.user_line(ctx.prompt).decode("utf-8")
            return Invocation(argv, stdin, relay_env(ctx), conversation=True)
        return Invocation(argv, ctx.prompt if via_stdin else None, relay_env(ctx))

    def parser(self) -> ClaudeParser:
        return ClaudeParser()

    def answer_line(self, request: ToolRequest, answer: ToolAnswer) -> bytes:
        if answer.allow:
            updated = dict(request.input)
            if answer.answers is not None:
                updated["answers"] = answer.answers
            body: dict[str, Any] = {"behavior": "allow", "updatedInput": updated}
        else:
            body = {"behavior": "deny", "message": answer.message or "denied by relay"}
        response = {"subtype": "success", "request_id": request.request_id, "response": body}
        return _line({"type": "control_response", "response": response})

    def user_line(self, text: str) -> bytes:
        message = {"role": "user", "content": text}
        return _line(
            {"type": "user", "message": message, "parent_tool_use_id": None, "session_id": ""}
        )


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n"


class ClaudeParser(JsonLinesParser):
    provider = "claude"

    def __init__(self) -> None:
        super().__init__()
        self._last_text: str | None = None
        self._has_result = False

    def _plain_is_progress(self) -> bool:
        return not self._has_result

    def _event(self, event: dict[str, Any], now: datetime) -> None:
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
        elif kind == "control_request":
            self._control_request(event)
        self._event_limit(event, now)

    def _control_request(self, event: dict[str, Any]) -> None:
        request = event.get("request")
        if not isinstance(request, dict) or request.get("subtype") != "can_use_tool":
            return
        tool = str(request.get("tool_name") or "tool")
        tool_input = as_object(request.get("input"))
        self._requests.append(
            ToolRequest(
                request_id=str(event.get("request_id") or ""),
                tool=tool,
                input=tool_input,
                kind="question" if tool == "AskUserQuestion" else "permission",
                suggestion=_suggestion(request.get("permission_suggestions")),
                context=self._last_text,
                tool_use_id=request.get("tool_use_id"),
            )
        )
        self._report.last_progress = (
            f"waiting: {tool_progress({'name': tool, 'input': tool_input})}"
        )

    def _assistant(self, event: dict[str, Any]) -> None:
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
                self._report.last_progress = tool_progress(block)

    def _result(self, event: dict[str, Any]) -> None:
        report = self._report
        self._has_result = True
        report.turns_ended += 1
        report.denials = [*report.denials, *denials(event.get("permission_denials"), self.provider)]
        result = event.get("result")
        report.result_text = result if isinstance(result, str) else self._last_text
        report.result_data = extract_json(report.result_text)
        subtype = str(event.get("subtype") or "success")
        report.is_error = bool(event.get("is_error")) or subtype != "success"
        if report.is_error:
            report.error = report.last_progress = clean_progress(report.result_text) or subtype
            if (report.result_text or "").startswith("API Error"):
                self._cli_error(report.result_text)
        cost = as_amount(event.get("total_cost_usd", event.get("cost_usd")))
        if cost is not None:
            report.cost_usd = cost
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


def tool_progress(block: dict[str, Any]) -> str | None:
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


def _suggestion(suggestions: object) -> str | None:
    """The first rule claude would add to allow the request: ``Bash(npm test *)``."""
    if not isinstance(suggestions, list):
        return None
    for suggestion in suggestions:
        rules = suggestion.get("rules") if isinstance(suggestion, dict) else None
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, dict) and rule.get("toolName"):
                content = rule.get("ruleContent")
                return f"{rule['toolName']}({content})" if content else str(rule["toolName"])
    return None


def denials(entries: object, cli: str = "claude") -> list[Denial]:
    """``permission_denials`` of a result: what the CLI refused without asking anyone."""
    if not isinstance(entries, list):
        return []
    found = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        tool = str(entry.get("tool_name") or "tool")
        summary = tool_progress({"name": tool, "input": entry.get("tool_input")}) or tool
        refused = Denial(
            tool,
            summary.replace(": ", " ", 1),
            "cli",
            f"{cli} refused it",
            entry.get("tool_use_id"),
        )
        found.append(refused)
    return found

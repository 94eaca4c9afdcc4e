"""Codex CLI: `codex exec --json PROMPT`, resumed with `codex exec --json resume THREAD PROMPT`.

The stream is JSONL: `thread.started` (thread_id, the resumable id), `turn.started`,
`item.started`/`item.updated`/`item.completed` (agent_message, reasoning, command_execution,
file_change, ...), then `turn.completed` with usage or `turn.failed` with an error; `error`
events carry stream-level failures such as a usage limit.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Invocation,
    InvocationContext,
    JsonLinesParser,
    McpServer,
    add_tokens,
    clean_progress,
    extract_json,
    first_line,
    prompt_needs_stdin,
    relay_env,
)

SANDBOX_MODES = {
    "read-only": "read-only",
    "workspace-write": "workspace-write",
    "full": "danger-full-access",
}
"""`access` -> `--sandbox`: `codex exec` is read-only unless told otherwise."""


class CodexAdapter:
    provider = "codex"
    supports_resume = True
    state_paths = ("~/.codex",)
    state_files: tuple[str, ...] = ()
    state_env: str | None = "CODEX_HOME"
    state_read_only = ("config.toml", "AGENTS.md")
    cache_paths: tuple[str, ...] = ()
    auth_env = ("OPENAI_*", "CODEX_*")
    needs_network = True
    sandboxed_by_default = True

    def build(self, ctx: InvocationContext) -> Invocation:
        """Codex has no tool allow-list flag, so `ctx.tools` is not passed on (config warns).

        relay owns the working directory (a worktree, or a folder that need not be a git
        repository), so the git-repository check is always skipped. The exec-level flags go
        before `resume`: `codex exec resume` takes no `--sandbox` of its own.
        """
        exe = list(ctx.command) if ctx.command else ["codex"]
        argv = [*exe, "exec", "--json", "--skip-git-repo-check"]
        argv += ["--sandbox", SANDBOX_MODES[ctx.access]]
        if ctx.model:
            argv += ["--model", ctx.model]
        argv += list(ctx.extra_args)
        if ctx.memory_server:
            argv += mcp_overrides(ctx.memory_server)
        if ctx.resume_session_id:
            argv += ["resume", ctx.resume_session_id]
        via_stdin = prompt_needs_stdin(ctx.prompt)
        argv.append("-" if via_stdin else ctx.prompt)  # "-": codex reads the prompt from stdin
        return Invocation(argv, ctx.prompt if via_stdin else None, relay_env(ctx))

    def parser(self) -> CodexParser:
        return CodexParser()


def mcp_overrides(server: McpServer) -> list[str]:
    """``-c`` overrides that add relay's MCP server to codex's config for this run only
    (values are TOML: a JSON string or list of strings is one)."""
    key = f"mcp_servers.{server.name}"
    return [
        "-c",
        f"{key}.command={json.dumps(server.command)}",
        "-c",
        f"{key}.args={json.dumps(list(server.args))}",
        "-c",
        f"{key}.required=true",
    ]


class CodexParser(JsonLinesParser):
    provider = "codex"

    def __init__(self) -> None:
        super().__init__()
        self._last_message: str | None = None

    def _event(self, event: dict[str, Any], now: datetime) -> None:
        kind = event.get("type")
        report = self._report
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            report.session_id = event["thread_id"]
        elif kind in ("item.started", "item.updated", "item.completed"):
            self._item(event.get("item"), completed=kind == "item.completed")
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            report.input_tokens = add_tokens(report.input_tokens, usage.get("input_tokens"))
            report.output_tokens = add_tokens(report.output_tokens, usage.get("output_tokens"))
            report.cached_tokens = add_tokens(
                report.cached_tokens, usage.get("cached_input_tokens")
            )
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            report.is_error = True
            report.error = report.last_progress = clean_progress(str(message or "turn failed"))
            self._cli_error(message)
        elif kind == "error":
            report.error = clean_progress(str(event.get("message") or "error"))
            self._cli_error(event.get("message"))
            report.last_progress = report.error
        self._event_limit(event, now)

    def _item(self, item: object, *, completed: bool) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type") or item.get("item_type")
        text = item.get("text")
        if kind in ("agent_message", "assistant_message") and isinstance(text, str):
            if completed:
                self._last_message = text
            self._report.last_progress = first_line(text) or self._report.last_progress
        elif kind == "reasoning" and isinstance(text, str):
            self._report.last_progress = first_line(text.replace("**", ""))
        elif kind == "command_execution" and isinstance(item.get("command"), str):
            self._report.last_progress = clean_progress(f"$ {item['command']}")
        elif kind == "file_change" and isinstance(item.get("changes"), list):
            paths = [c.get("path", "?") for c in item["changes"] if isinstance(c, dict)]
            self._report.last_progress = clean_progress("edited " + ", ".join(paths))
        elif kind == "error" and isinstance(item.get("message"), str):
            self._report.last_progress = clean_progress(item["message"])

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        self._report.result_text = self._last_message
        self._report.result_data = extract_json(self._last_message)

"""Any Agent Client Protocol CLI: `gemini --acp`, `qwen --acp`, `opencode acp`, `copilot --acp`.

ACP is JSON-RPC 2.0 over stdio, one message a line. relay is the client and drives the whole
conversation from the stream parser: the ``initialize`` request goes in with the launch;
each response the parser reads makes the next step (``session/new``, or ``session/load`` to
resume; ``session/set_mode`` for the agent's mode that matches the agent's ``access``;
``session/prompt``) come out of :meth:`AcpParser.take_outgoing`, which the engine writes to
the CLI's stdin as it pumps. During a prompt the agent sends ``session/update``
notifications (text chunks, tool calls, usage) and ``session/request_permission`` requests,
which become relay's :class:`ToolRequest`s: decided by relay's rules or asked of the
operator, answered with the agent's own option of kind ``allow_once`` or ``reject_once``
(option ids differ per CLI). The prompt's response (``stopReason``) ends the turn; the
engine then closes stdin and the CLI exits. Requests relay does not know (qwen's
``craft/drainMidTurnQueue``) are answered "method not found", so the agent never waits.

Why not the ``agent-client-protocol`` package: its client (``spawn_agent_process``, the
connection) is asyncio and owns the child's pipes, while relay's agents write to files the
engine reads as it ticks and read stdin from a writer thread. Its schema types validate the
four CLIs' recorded messages, but importing them costs ~0.4 s, they coerce values they do
not know (an unknown tool ``kind`` becomes None) and relay reads a dozen fields; a tolerant
reader of plain dicts keeps working when a vendor adds methods or ``_meta``.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay_engine.agents.adapters.base import (
    Adapter,
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
    relay_env,
)
from relay_engine.contracts.accounts import cli_of
from relay_engine.contracts.numbers import as_amount
from relay_engine.core.failures import AgentFailure, classify_text, session_gone
from relay_engine.core.limits import detect_limit

PROTOCOL_VERSION = 1
METHOD_NOT_FOUND = -32601
MODE_WANTED = {
    "read-only": re.compile(r"\bplan\b", re.IGNORECASE),
    "workspace-write": re.compile(r"auto.?edit|accept.?edits", re.IGNORECASE),
    "full": re.compile(r"yolo|bypass", re.IGNORECASE),
}
"""The agent's mode that matches ``access``, by its id or name (gemini ``autoEdit``, qwen
``auto-edit``, opencode ``plan``, …); an agent without one keeps its default mode, and
whatever that mode asks about comes to relay's rules."""
_KINDS = {"execute": "Bash", "edit": "Edit", "delete": "Edit", "move": "Edit",
          "read": "Read", "fetch": "WebFetch", "search": "Grep"}  # fmt: skip


@dataclass(frozen=True)
class AcpPlan:
    """What the conversation needs besides the protocol: from the invocation context."""

    cwd: str
    prompt: str
    resume: str | None
    access: str
    cli: str


class AcpAdapter:
    """One instance per launch: its parser carries the conversation that :meth:`answer_line`
    and :meth:`user_line` continue."""

    provider = "acp"
    supports_resume = True
    needs_network = True
    sandboxed_by_default = True

    def __init__(self, command: tuple[str, ...] | None = None) -> None:
        self._plan: AcpPlan | None = None
        self._parser: AcpParser | None = None
        self._cli = _cli_adapter(cli_of("acp", command))

    # What the sandbox needs is the CLI's behind the protocol: gemini's state for `gemini
    # --acp`, qwen's for `qwen --acp`.
    @property
    def state_paths(self) -> tuple[str, ...]:
        return self._cli.state_paths if self._cli else ()

    @property
    def state_files(self) -> tuple[str, ...]:
        return self._cli.state_files if self._cli else ()

    @property
    def state_env(self) -> str | None:
        return self._cli.state_env if self._cli else None

    @property
    def state_read_only(self) -> tuple[str, ...]:
        return self._cli.state_read_only if self._cli else ()

    @property
    def cache_paths(self) -> tuple[str, ...]:
        return self._cli.cache_paths if self._cli else ()

    @property
    def auth_env(self) -> tuple[str, ...]:
        return self._cli.auth_env if self._cli else ()

    def build(self, ctx: InvocationContext) -> Invocation:
        if not ctx.command:
            raise ValueError('provider "acp" needs its command, e.g. ["gemini", "--acp"]')
        argv = [*ctx.command, *ctx.extra_args]
        cli = cli_of("acp", ctx.command)
        self._plan = AcpPlan(str(ctx.cwd), ctx.prompt, ctx.resume_session_id, ctx.access, cli)
        first = request_line(1, "initialize", initialize_params())
        env = {**relay_env(ctx), "PWD": str(ctx.cwd)}  # opencode reads its folder from $PWD
        return Invocation(argv, first.decode("utf-8"), env, conversation=True)

    def parser(self) -> AcpParser:
        plan = self._plan or AcpPlan(".", "", None, "workspace-write", "acp")
        self._parser = AcpParser(plan)
        return self._parser

    def answer_line(self, request: ToolRequest, answer: ToolAnswer) -> bytes:
        assert self._parser is not None, "answer_line before parser()"
        return self._parser.answer(request, answer)

    def user_line(self, text: str) -> bytes:
        """The operator's words are a next prompt, sent once the agent's turn is over (an
        ACP session takes one prompt at a time): nothing to write right now."""
        if self._parser is not None:
            self._parser.queue_prompt(text)
        return b""


def _cli_adapter(cli: str) -> Adapter | None:
    from relay_engine.agents.adapters import ADAPTERS  # the registry imports this module

    found = ADAPTERS.get(cli)
    return found() if found is not None and cli != "acp" else None


def initialize_params() -> dict[str, Any]:
    capabilities = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "relay", "version": "0"},
    }


def request_line(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return _line(message)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


class AcpParser(JsonLinesParser):
    """Reads the agent's JSON-RPC lines and keeps the client's side of the conversation:
    which request ids wait for which answer, the session, the prompts still to send."""

    provider = "acp"

    def __init__(self, plan: AcpPlan) -> None:
        super().__init__()
        self.plan = plan
        self._next_id = 2  # 1 is the initialize request sent with the launch
        self._pending: dict[int, str] = {1: "initialize"}
        self._session: str | None = None
        self._can_load = False
        self._prompts: deque[str] = deque([plan.prompt])
        self._prompting = False
        self._chunks: list[str] = []
        self._last_text: str | None = None
        self._asked: dict[
            str, tuple[Any, list[dict[str, Any]]]
        ] = {}  # request -> (raw id, options)
        self._meta_tokens: tuple[int | None, int | None] = (None, None)

    # -- what relay sends ---------------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any]) -> None:
        request_id, self._next_id = self._next_id, self._next_id + 1
        self._pending[request_id] = method
        self._outgoing.append(request_line(request_id, method, params))

    def queue_prompt(self, text: str) -> None:
        self._prompts.append(text)
        self._maybe_prompt()

    def _maybe_prompt(self) -> None:
        if self._prompting or self._session is None or not self._prompts:
            return
        self._prompting, self._chunks = True, []
        text = self._prompts.popleft()
        prompt = [{"type": "text", "text": text}]
        self._send("session/prompt", {"sessionId": self._session, "prompt": prompt})

    def answer(self, request: ToolRequest, answer: ToolAnswer) -> bytes:
        """The agent's own option for relay's answer: allow once, or reject once."""
        raw_id, options = self._asked.pop(request.request_id, (request.request_id, []))
        wanted = (
            ("allow_once", "allow_always") if answer.allow else ("reject_once", "reject_always")
        )
        chosen = next((o for kind in wanted for o in options if o.get("kind") == kind), None)
        if chosen is None:
            outcome: dict[str, Any] = {"outcome": "cancelled"}
        else:
            outcome = {"outcome": "selected", "optionId": chosen.get("optionId")}
        return _line({"jsonrpc": "2.0", "id": raw_id, "result": {"outcome": outcome}})

    # -- what the agent says ------------------------------------------------------------
    def _event(self, event: dict[str, Any], now: datetime) -> None:
        method = event.get("method")
        if isinstance(method, str):
            if event.get("id") is not None:
                self._agent_request(event, method)
            elif method == "session/update":
                self._update(event.get("params"))
        elif event.get("id") is not None and ("result" in event or "error" in event):
            self._response(event, now)

    def _agent_request(self, event: dict[str, Any], method: str) -> None:
        if method == "session/request_permission":
            self._permission(event)
            return
        error = {"code": METHOD_NOT_FOUND, "message": f"relay does not handle {method}"}
        self._outgoing.append(_line({"jsonrpc": "2.0", "id": event["id"], "error": error}))

    def _permission(self, event: dict[str, Any]) -> None:
        params = as_object(event.get("params"))
        call = as_object(params.get("toolCall"))
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        tool, tool_input = tool_of(call)
        request_id = str(event["id"])
        self._asked[request_id] = (event["id"], options)
        self._requests.append(
            ToolRequest(
                request_id=request_id,
                tool=tool,
                input=tool_input,
                context="".join(self._chunks) or self._last_text,
                tool_use_id=call.get("toolCallId"),
            )
        )
        shown = tool_input.get("command") or tool_input.get("file_path") or call.get("title")
        self._report.last_progress = clean_progress(f"waiting: {tool} {shown or ''}")

    def _update(self, params: object) -> None:
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" and self._prompting:
            self._chunk(update)
        elif kind in ("tool_call", "tool_call_update") and update.get("title"):
            self._report.last_progress = clean_progress(f"tool: {update['title']}")
        elif kind == "usage_update":
            cost = update.get("cost")
            amount = as_amount(cost.get("amount") if isinstance(cost, dict) else None)
            if amount is not None:
                self._report.cost_usd = amount  # the session's so far

    def _chunk(self, update: dict[str, Any]) -> None:
        content = update.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        if isinstance(text, str) and text:
            self._chunks.append(text)
            self._report.last_progress = first_line("".join(self._chunks[-20:]))
        meta = update.get("_meta")
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if isinstance(usage, dict):  # qwen: per model call, its prompt result has none
            inputs, outputs = self._meta_tokens
            self._meta_tokens = (
                add_tokens(inputs, usage.get("inputTokens")),
                add_tokens(outputs, usage.get("outputTokens")),
            )

    def _response(self, event: dict[str, Any], now: datetime) -> None:
        purpose = self._pending.pop(event["id"], None) if isinstance(event["id"], int) else None
        if purpose is None:
            return
        error = event.get("error")
        if isinstance(error, dict):
            self._failed(purpose, error, now)
            return
        result = as_object(event.get("result"))
        if purpose == "initialize":
            self._initialized(result)
        elif purpose in ("session/new", "session/load"):
            self._session_ready(purpose, result)
        elif purpose in ("session/set_mode", "session/set_config_option"):
            self._maybe_prompt()
        elif purpose == "session/prompt":
            self._prompt_done(result)

    def _initialized(self, result: dict[str, Any]) -> None:
        capabilities = result.get("agentCapabilities")
        self._can_load = isinstance(capabilities, dict) and bool(capabilities.get("loadSession"))
        self._report.last_progress = "agent initialized"
        params = {"cwd": self.plan.cwd, "mcpServers": []}
        if self.plan.resume and self._can_load:
            self._send("session/load", {"sessionId": self.plan.resume, **params})
        else:
            self._send("session/new", params)

    def _session_ready(self, purpose: str, result: dict[str, Any]) -> None:
        session = result.get("sessionId") if purpose == "session/new" else self.plan.resume
        if not isinstance(session, str) or not session:
            self._end_with("the agent started no session", None)
            return
        self._session = self._report.session_id = session
        self._report.last_progress = f"session {session[:12]} started"
        if not self._set_mode(result):
            self._maybe_prompt()

    def _set_mode(self, result: dict[str, Any]) -> bool:
        """Switch to the mode ``access`` asks for, when the agent offers one; True when a
        request went out (the prompt follows its answer)."""
        change = mode_change(result, self.plan.access)
        if change is None:
            return False
        method, params = change
        self._send(method, {"sessionId": self._session, **params})
        return True

    def _prompt_done(self, result: dict[str, Any]) -> None:
        report = self._report
        self._prompting = False
        report.turns_ended += 1
        text = "".join(self._chunks)
        if text:
            self._last_text = report.result_text = text
            report.result_data = extract_json(text)
        self._tokens(result)
        stop = result.get("stopReason")
        if stop in ("refusal", "cancelled"):
            report.is_error = True
            report.error = f"the agent's turn ended: {stop}"
        self._maybe_prompt()

    def _tokens(self, result: dict[str, Any]) -> None:
        report = self._report
        usage = result.get("usage") if isinstance(result.get("usage"), dict) else None
        meta = as_object(result.get("_meta"))
        quota = as_object(meta.get("quota"))
        counted = as_object(quota.get("token_count"))
        if usage is not None:
            report.input_tokens = add_tokens(report.input_tokens, usage.get("inputTokens"))
            report.output_tokens = add_tokens(report.output_tokens, usage.get("outputTokens"))
            report.cached_tokens = add_tokens(report.cached_tokens, usage.get("cachedReadTokens"))
        elif counted:  # gemini
            report.input_tokens = add_tokens(report.input_tokens, counted.get("input_tokens"))
            report.output_tokens = add_tokens(report.output_tokens, counted.get("output_tokens"))
        elif self._meta_tokens != (None, None):  # qwen
            report.input_tokens, report.output_tokens = self._meta_tokens

    def _failed(self, purpose: str, error: dict[str, Any], now: datetime) -> None:
        """An error answer: the agent's login, network or session, or the task's failure."""
        message = str(error.get("message") or f"{purpose} failed")
        self._cli_error(message)
        if purpose in ("session/set_mode", "session/set_config_option"):
            self._maybe_prompt()  # the default mode will do; relay's rules still decide
            return
        self._merge_limit(detect_limit(message, self.provider, now))
        failure = classify_text(self.plan.cli, message)
        if purpose == "session/load" and failure is None:
            failure = session_gone(message)
        self._end_with(message, failure)

    def _end_with(self, message: str, failure: AgentFailure | None) -> None:
        report = self._report
        report.is_error = True
        report.error = report.last_progress = clean_progress(message)
        report.failure = report.failure or failure
        report.turns_ended += 1  # nothing more will happen: let the conversation end
        self._prompting = False
        self._prompts.clear()

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        report = self._report
        if report.result_text is None and self._chunks:
            report.result_text = "".join(self._chunks)
            report.result_data = extract_json(report.result_text)
        if exit_code == 0 and report.turns_ended == 0 and not report.is_error:
            report.is_error = True
            report.error = "the agent exited before its turn ended"


def tool_of(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """relay's name for an ACP tool call (so ``Bash(npm test:*)`` rules match every agent's
    shell) and the input its rules read: the command, the file, the URL."""
    raw = as_object(call.get("rawInput"))
    title = call.get("title") if isinstance(call.get("title"), str) else ""
    kind = call.get("kind")
    tool = _KINDS.get(kind) if isinstance(kind, str) else None
    if tool == "Bash":
        commands = raw.get("commands")
        command = raw.get("command") or (
            commands[0] if isinstance(commands, list) and commands else title
        )
        return tool, {"command": command}
    if tool in ("Edit", "Read"):
        return tool, {"file_path": _path_of(call, raw)}
    if tool == "WebFetch":
        return tool, {"url": raw.get("url") or title}
    meta = as_object(call.get("_meta"))
    return str(tool or meta.get("toolName") or title or "tool"), dict(raw)


def _path_of(call: dict[str, Any], raw: dict[str, Any]) -> str:
    for key in ("file_path", "filePath", "path", "abs_path"):
        value = raw.get(key)
        if isinstance(value, str):
            return value
    locations = call.get("locations")
    if isinstance(locations, list):
        for location in locations:
            path = location.get("path") if isinstance(location, dict) else None
            if isinstance(path, str):
                return path
    return str(call.get("title") or "")


def mode_change(result: dict[str, Any], access: str) -> tuple[str, dict[str, Any]] | None:
    """The request that puts a new session in the mode matching ``access``: ``session/
    set_mode`` for ``modes``, ``session/set_config_option`` for a ``mode`` config option
    (opencode), copilot's ``allow_all`` option for full access; None when nothing to do."""
    wanted = MODE_WANTED[access]
    modes = as_object(result.get("modes"))
    for mode in modes.get("availableModes") or []:
        if isinstance(mode, dict) and wanted.search(f"{mode.get('id')} {mode.get('name')}"):
            if mode.get("id") == modes.get("currentModeId"):
                return None
            return "session/set_mode", {"modeId": mode.get("id")}
    for option in result.get("configOptions") or []:
        if not isinstance(option, dict):
            continue
        if access == "full" and option.get("id") == "allow_all":
            return "session/set_config_option", {"configId": "allow_all", "value": "on"}
        if option.get("id") != "mode":
            continue
        for choice in option.get("options") or []:
            if isinstance(choice, dict) and wanted.search(
                f"{choice.get('value')} {choice.get('name')}"
            ):
                if choice.get("value") == option.get("currentValue"):
                    return None
                return "session/set_config_option", {"configId": "mode", "value": choice["value"]}
    return None

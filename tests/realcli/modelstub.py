"""A scripted model server on 127.0.0.1 that speaks the providers' HTTP APIs.

The real agent CLIs run whole sessions against it offline: each test writes a script, a
list of turns, and the stub answers the CLI's main-conversation requests (those that carry
tools) with the next turn, whichever API the CLI speaks: Anthropic Messages
(``/v1/messages``), OpenAI Responses (``/v1/responses``), OpenAI chat completions
(``/v1/chat/completions``) and Gemini (``…:streamGenerateContent``). Requests without
tools (claude's session titles, qwen's side questions) get a short text answer and leave
the script alone. Every request is recorded, so a test can assert what the CLI sent back,
above all the tool results after a command ran.

Stdlib only (``http.server``); answers are written whole with a Content-Length, which SSE
clients read as a stream all the same.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

SIDE_TEXT = "Stub session"
DONE_TEXT = "Done."

# The work the tests script for every CLI: write hello.txt, then run a command that shows it.
KEY = "sk-stub-not-a-key"  # each CLI's dummy key: the stub checks none
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the stub\n*** End Patch\n"
SHOW = "cat hello.txt && echo ran-ok"
# qwen 0.24 resolves a one-shot command on the child's "exit", not its "close", so under
# load the last chunk a fast command prints can miss the result the model gets (runs saw
# "Output: hello" alone): qwen's command leaves a mark the tests read instead.
QWEN_SHOW = "cat hello.txt && echo ran-ok | tee ran.txt"


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 120
    output_tokens: int = 30
    cached_tokens: int = 0


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``input`` is a JSON object, or the raw text of a freeform tool."""

    name: str
    input: dict[str, Any] | str


@dataclass(frozen=True)
class Turn:
    """What the model answers to one main-conversation request.

    ``status`` other than 200 makes it an HTTP error with the provider's error body and
    ``headers``; ``times`` is how many requests it answers (0: every request from then on,
    for a limit the CLI must give up on).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    status: int = 200
    message: str = ""
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1


def say(text: str, usage: Usage = Usage(), headers: dict[str, str] | None = None) -> Turn:
    return Turn(text=text, usage=usage, headers=headers or {})


def call(name: str, input: dict[str, Any] | str, text: str = "", usage: Usage = Usage()) -> Turn:
    return Turn(text=text, tool_calls=(ToolCall(name, input),), usage=usage)


def calls(*tool_calls: ToolCall, text: str = "", usage: Usage = Usage()) -> Turn:
    return Turn(text=text, tool_calls=tool_calls, usage=usage)


def rate_limited(
    retry_after: int = 1,
    times: int = 0,
    message: str = "This request would exceed your rate limit (stub).",
    headers: dict[str, str] | None = None,
) -> Turn:
    """A 429 with ``retry-after`` and each provider's rate-limit headers (see ``_limit_headers``)."""
    return Turn(
        status=429,
        message=message,
        error_type="rate_limit_error",
        headers={"retry-after": str(retry_after), **(headers or {})},
        times=times,
    )


def unified_limit_headers(status: str = "allowed_warning", utilization: float = 0.92) -> dict:
    """Claude subscription headers (``anthropic-ratelimit-unified-*``): reset is epoch seconds.

    claude reads them only when it is logged in to a subscription (``CLAUDE_CODE_OAUTH_TOKEN``),
    not with an API key; a warning needs the ``-surpassed-threshold`` header.
    """
    reset = str(int(time.time()) + 3600)
    warning = {"anthropic-ratelimit-unified-5h-surpassed-threshold": "0.9"}
    return {
        **(warning if status == "allowed_warning" else {}),
        "anthropic-ratelimit-unified-status": status,
        "anthropic-ratelimit-unified-reset": reset,
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": status,
        "anthropic-ratelimit-unified-5h-utilization": str(utilization),
        "anthropic-ratelimit-unified-5h-reset": reset,
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": "0.4",
        "anthropic-ratelimit-unified-7d-reset": str(int(time.time()) + 5 * 86400),
        "anthropic-ratelimit-unified-fallback-percentage": "0.5",
        "anthropic-ratelimit-unified-overage-status": "rejected",
    }


def codex_limit_headers(used_percent: float = 91.0) -> dict[str, str]:
    """The ``x-codex-*`` plan-usage headers (5-hour primary, weekly secondary window)."""
    now = int(time.time())
    return {
        "x-codex-primary-used-percent": str(used_percent),
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(now + 3600),
        "x-codex-primary-reset-after-seconds": "3600",
        "x-codex-secondary-used-percent": "40.0",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(now + 5 * 86400),
        "x-codex-secondary-reset-after-seconds": str(5 * 86400),
    }


def usage_limit(times: int = 0) -> Turn:
    """codex's plan limit: a 429 ``usage_limit_reached`` with the x-codex headers at 100%."""
    return Turn(
        status=429,
        message="You've hit your usage limit (stub).",
        error_type="usage_limit_reached",
        headers={"retry-after": "3600", **codex_limit_headers(100.0)},
        times=times,
    )


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    api: str
    turn: int | None  # index of the script turn that answered it; None for side requests
    status: int = 200


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str  # the tool the stub called with that id ("" if the stub did not issue it)
    output: str
    is_error: bool


class ModelStub:
    """The server and its script. ``url`` is the base URL (no trailing slash, no /v1)."""

    def __init__(self, script: list[Turn] | None = None, model: str = "stub-model") -> None:
        self.model = model
        self.requests: list[Request] = []
        self.issued: dict[str, ToolCall] = {}
        self._script: list[Turn] = []
        self._next = 0
        self._used = 0  # requests answered by the current turn
        self._lock = threading.Lock()
        self._ids = 0
        self.script(script or [])
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModelStub:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ModelStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def script(self, turns: list[Turn]) -> None:
        """Replace what is left of the script (a test may script a second run)."""
        with self._lock:
            self._script, self._next, self._used = list(turns), 0, 0

    @property
    def turns_left(self) -> int:
        with self._lock:
            return len(self._script) - self._next

    def main_requests(self, api: str | None = None) -> list[Request]:
        return [r for r in self.requests if r.turn is not None and api in (None, r.api)]

    def tool_results(self) -> list[ToolResult]:
        """Every tool result the CLI sent back, once each, in the order first seen."""
        seen: dict[str, ToolResult] = {}
        for request in self.requests:
            for call_id, output, is_error in _results_in(request):
                if call_id not in seen:
                    tool = self.issued.get(call_id)
                    seen[call_id] = ToolResult(call_id, tool.name if tool else "", output, is_error)
        return list(seen.values())

    def results_for(self, name: str) -> list[ToolResult]:
        return [r for r in self.tool_results() if r.name == name]

    # -- answering -----------------------------------------------------------------------

    def _take(self, has_tools: bool) -> tuple[Turn, int | None]:
        with self._lock:
            if not has_tools:
                return say(SIDE_TEXT), None
            if self._next >= len(self._script):
                return say(DONE_TEXT), len(self._script)
            index, turn = self._next, self._script[self._next]
            self._used += 1
            if turn.times and self._used >= turn.times:
                self._next, self._used = self._next + 1, 0
            return turn, index

    def new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}"

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content"):
            if key in content:
                return _text_of(content[key])
        return json.dumps(content)
    return "" if content is None else str(content)


def _results_in(request: Request) -> list[tuple[str, str, bool]]:
    body = request.body if isinstance(request.body, dict) else {}
    found: list[tuple[str, str, bool]] = []
    if request.api == "anthropic":
        for message in body.get("messages", []):
            for block in message.get("content", []) if isinstance(message, dict) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(
                        (
                            block.get("tool_use_id", ""),
                            _text_of(block.get("content")),
                            bool(block.get("is_error")),
                        )
                    )
    elif request.api == "responses":
        for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
            if isinstance(item, dict) and item.get("type", "").endswith("call_output"):
                found.append((item.get("call_id", ""), _text_of(item.get("output")), False))
    elif request.api == "chat":
        for message in body.get("messages", []):
            if isinstance(message, dict) and message.get("role") == "tool":
                found.append(
                    (message.get("tool_call_id", ""), _text_of(message.get("content")), False)
                )
    elif request.api == "gemini":
        for content in body.get("contents", []):
            for part in content.get("parts", []) if isinstance(content, dict) else []:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if response:
                    found.append(
                        (
                            response.get("id") or response.get("name", ""),
                            _text_of(response.get("response")),
                            False,
                        )
                    )
    return found


def _api_of(path: str) -> str:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/messages/count_tokens"):
        return "anthropic-count"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    if ":countTokens" in path:
        return "gemini-count"
    if path.endswith("/models"):
        return "models"
    return "other"


def _has_tools(api: str, body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if api == "gemini":
        return any(t.get("functionDeclarations") for t in body.get("tools", []) or [])
    return bool(body.get("tools"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A CLI that hangs up mid-request (killed, or done) is no error of the stub's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "relay-modelstub/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def stub(self) -> ModelStub:
        return self.server.stub  # type: ignore[attr-defined]

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        api = _api_of(path)
        self.stub.record(Request("GET", self.path, dict(self.headers.items()), None, api, None))
        if api == "models":
            now = int(time.time())
            models = [
                {"id": self.stub.model, "object": "model", "created": now, "owned_by": "stub"}
            ]
            self._json(200, {"object": "list", "data": models})
        else:
            self._json(200, {})

    def do_POST(self) -> None:
        raw = self._body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        path = urlsplit(self.path).path
        api = _api_of(path)
        headers = dict(self.headers.items())
        if api in ("anthropic-count", "gemini-count"):
            self.stub.record(Request("POST", self.path, headers, body, api, None))
            key = "input_tokens" if api == "anthropic-count" else "totalTokens"
            return self._json(200, {key: 100})
        if api not in ("anthropic", "responses", "chat", "gemini"):
            self.stub.record(Request("POST", self.path, headers, body, api, None, 404))
            return self._json(404, {"error": {"message": f"stub: no such endpoint {path}"}})
        turn, index = self.stub._take(_has_tools(api, body))
        self.stub.record(Request("POST", self.path, headers, body, api, index, turn.status))
        if turn.status != 200:
            return self._error(api, turn)
        model = body.get("model", self.stub.model) if isinstance(body, dict) else self.stub.model
        stream = isinstance(body, dict) and bool(body.get("stream"))
        if api == "gemini":
            model = path.rsplit("/", 1)[-1].split(":", 1)[0]
            stream = ":streamGenerateContent" in path
        answer = _WRITERS[api](self.stub, turn, model, body if isinstance(body, dict) else {})
        if stream:
            self._send(200, "text/event-stream", answer.sse(), turn.headers)
        else:
            self._json(200, answer.whole, turn.headers)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while size := int(self.rfile.readline().strip() or b"0", 16):
                raw += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        return raw

    def _error(self, api: str, turn: Turn) -> None:
        headers = {**_limit_headers(api, turn), **turn.headers}
        if api == "anthropic":
            kind = turn.error_type or "api_error"
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": kind, "message": turn.message},
            }
        elif api == "gemini":
            body = {
                "error": {
                    "code": turn.status,
                    "message": turn.message,
                    "status": "RESOURCE_EXHAUSTED",
                }
            }
        else:
            body = {"error": _openai_error(turn)}
        self._json(turn.status, body, headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(payload).encode(), headers or {})

    def _send(self, status: int, ctype: str, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_stub_{int(time.time() * 1000)}")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _openai_error(turn: Turn) -> dict[str, Any]:
    if turn.error_type == "usage_limit_reached":  # what codex gets on a ChatGPT plan
        resets = int(time.time()) + 3600
        return {"type": turn.error_type, "message": turn.message, "plan_type": "plus",
                "resets_at": resets}  # fmt: skip
    code = "rate_limit_exceeded" if turn.status == 429 else "server_error"
    return {"message": turn.message, "type": "requests", "param": None, "code": code}


def _limit_headers(api: str, turn: Turn) -> dict[str, str]:
    """The rate-limit headers each provider sends with a 429 (reset one minute ahead)."""
    if turn.status != 429:
        return {}
    if api == "anthropic":
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
        return {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-tokens-limit": "40000",
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": reset,
        }
    return {
        "x-ratelimit-limit-requests": "50",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "60s",
        "x-ratelimit-limit-tokens": "40000",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "60s",
    }


@dataclass
class _Answer:
    events: list[tuple[str | None, Any]]  # (SSE event name, data) in order
    whole: Any  # the non-streaming body

    def sse(self) -> bytes:
        out = []
        for name, data in self.events:
            text = data if isinstance(data, str) else json.dumps(data)
            out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
        return "".join(out).encode()


def _chunks(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _input_json(tool: ToolCall) -> str:
    return tool.input if isinstance(tool.input, str) else json.dumps(tool.input)


def _anthropic(stub: ModelStub, turn: Turn, model: str, body: dict) -> _Answer:
    usage = {
        "input_tokens": turn.usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": turn.usage.cached_tokens,
        "output_tokens": turn.usage.output_tokens,
    }
    message_id = stub.new_id("msg_stub_")
    blocks: list[dict[str, Any]] = []
    events: list[tuple[str | None, Any]] = []
    if turn.text or not turn.tool_calls:
        blocks.append({"type": "text", "text": turn.text})
    for tool in turn.tool_calls:
        call_id = stub.new_id("toolu_stub_")
        stub.issued[call_id] = tool
        blocks.append({"type": "tool_use", "id": call_id, "name": tool.name, "input": tool.input})
    stop = "tool_use" if turn.tool_calls else "end_turn"
    start = {"id": message_id, "type": "message", "role": "assistant", "model": model}
    start |= {"content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events.append(("message_start", {"type": "message_start", "message": start}))
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opening, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _chunks(block["text"])],
            )
        else:
            opening = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _chunks(json.dumps(block["input"]))
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    delta["usage"] = {"output_tokens": turn.usage.output_tokens}
    events += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
    whole = {**start, "content": blocks, "stop_reason": stop, "usage": usage}
    return _Answer(events, whole)


def _responses(stub: ModelStub, turn: Turn, model: str, body: dict) -> _Answer:
    """Responses API: a custom (freeform) tool the CLI declared gets a custom_tool_call."""
    custom = {t.get("name") for t in body.get("tools", []) if t.get("type") == "custom"}
    response_id = stub.new_id("resp_stub_")
    shell = {"id": response_id, "object": "response", "created_at": int(time.time())}
    shell |= {"model": model, "status": "in_progress", "output": []}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": shell}),
    ]
    items: list[dict[str, Any]] = []
    if turn.text or not turn.tool_calls:
        item_id = stub.new_id("msg_stub_")
        added = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress"}
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**added, "content": []},
                },
            )
        )
        for piece in _chunks(turn.text):
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": 0,
                        "content_index": 0,
                        "delta": piece,
                    },
                )
            )
        content = [{"type": "output_text", "text": turn.text, "annotations": []}]
        items.append({**added, "status": "completed", "content": content})
    for tool in turn.tool_calls:
        call_id = stub.new_id("call_stub_")
        stub.issued[call_id] = tool
        item: dict[str, Any] = {
            "id": stub.new_id("fc_stub_"),
            "call_id": call_id,
            "name": tool.name,
        }
        if tool.name in custom:
            item |= {"type": "custom_tool_call", "input": _input_json(tool)}
        else:
            item |= {"type": "function_call", "arguments": _input_json(tool)}
        item["status"] = "completed"
        items.append(item)
    for index, item in enumerate(items):
        if item["type"] != "message":
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": item},
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    usage = {
        "input_tokens": turn.usage.input_tokens,
        "input_tokens_details": {"cached_tokens": turn.usage.cached_tokens},
        "output_tokens": turn.usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.usage.input_tokens + turn.usage.output_tokens,
    }
    done = {**shell, "status": "completed", "output": items, "usage": usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return _Answer(events, done)


def _chat(stub: ModelStub, turn: Turn, model: str, body: dict) -> _Answer:
    chunk_id = stub.new_id("chatcmpl-stub-")
    created = int(time.time())
    usage = {
        "prompt_tokens": turn.usage.input_tokens,
        "completion_tokens": turn.usage.output_tokens,
        "total_tokens": turn.usage.input_tokens + turn.usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.usage.cached_tokens},
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": piece})) for piece in _chunks(turn.text) if piece]
    custom = {(t.get("custom") or {}).get("name") for t in body.get("tools") or []}
    tool_calls = []
    for index, tool in enumerate(turn.tool_calls):
        call_id = stub.new_id("call_stub_")
        stub.issued[call_id] = tool
        if tool.name in custom:  # a freeform tool (copilot's apply_patch): one whole chunk
            whole_call = {"id": call_id, "type": "custom"}
            whole_call["custom"] = {"name": tool.name, "input": _input_json(tool)}
            tool_calls.append(whole_call)
            events.append((None, chunk({"tool_calls": [{"index": index, **whole_call}]})))
            continue
        function = {"name": tool.name, "arguments": _input_json(tool)}
        tool_calls.append({"id": call_id, "type": "function", "function": function})
        opening = {"index": index, "id": call_id, "type": "function"}
        opening["function"] = {"name": tool.name, "arguments": ""}
        events.append((None, chunk({"tool_calls": [opening]})))
        for piece in _chunks(function["arguments"]):
            events.append(
                (None, chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
            )
    finish = "tool_calls" if tool_calls else "stop"
    events.append((None, chunk({}, finish)))
    last = chunk({})
    last["choices"], last["usage"] = [], usage
    events += [(None, last), (None, "[DONE]")]
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    whole = {
        "id": chunk_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return _Answer(events, whole)


def _gemini(stub: ModelStub, turn: Turn, model: str, body: dict) -> _Answer:
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text or not turn.tool_calls else []
    for tool in turn.tool_calls:
        call_id = stub.new_id("gcall_stub_")
        stub.issued[call_id] = tool
        parts.append({"functionCall": {"id": call_id, "name": tool.name, "args": tool.input}})
    usage = {
        "promptTokenCount": turn.usage.input_tokens,
        "candidatesTokenCount": turn.usage.output_tokens,
        "totalTokenCount": turn.usage.input_tokens + turn.usage.output_tokens,
        "cachedContentTokenCount": turn.usage.cached_tokens,
    }
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    whole = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
    return _Answer([(None, whole)], whole)


_WRITERS = {"anthropic": _anthropic, "responses": _responses, "chat": _chat, "gemini": _gemini}

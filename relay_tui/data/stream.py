"""An agent's stdout, read as the operator wants it: messages, tool calls, file changes, errors.

Claude Code and Codex stream JSON lines, Gemini's stream-json too; shown raw they are
unreadable JSON cut at the pane's edge. :func:`parse_line` turns one line into the items it
holds (pure; any line that is not a known event stays plain text, so nothing is lost).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from relay_engine.agents.adapters.base import parse_json_line

TEXT_CAP = 4000


@dataclass(frozen=True, slots=True)
class StreamItem:
    kind: str
    text: str


def _short(value: Any, cap: int = TEXT_CAP) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.strip()
    return text if len(text) <= cap else text[: cap - 1] + "…"


def parse_line(provider: str | None, line: str) -> list[StreamItem]:
    events = parse_json_line(line)
    if not events:
        return [StreamItem("text", line)] if line.strip() else []
    items: list[StreamItem] = []
    for event in events:
        if provider == "claude":
            items += _claude(event)
        elif provider == "codex":
            items += _codex(event)
        else:
            items += _generic(event)
    return items


def _claude(event: dict[str, Any]) -> list[StreamItem]:
    kind = event.get("type")
    if kind == "system" and event.get("subtype") == "init":
        return [StreamItem("session", f"session started · {event.get('model') or 'model'}")]
    if kind in ("assistant", "user"):
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        return _claude_blocks(content) if isinstance(content, list) else []
    if kind == "result":
        text = _short(event.get("result") or event.get("subtype") or "")
        failed = bool(event.get("is_error")) or event.get("subtype") not in (None, "success")
        cost = event.get("total_cost_usd")
        suffix = f" · ${cost:.4f}" if isinstance(cost, int | float) else ""
        return [StreamItem("error" if failed else "result", text + suffix)]
    if kind == "rate_limit_event":
        return [StreamItem("error", f"rate limit: {_short(event.get('rate_limit_info', event))}")]
    return []


def _claude_blocks(content: list[Any]) -> list[StreamItem]:
    items: list[StreamItem] = []
    for block in (b for b in content if isinstance(b, dict)):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            items.append(StreamItem("message", _short(block["text"])))
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            items.append(StreamItem("thinking", _short(block["thinking"])))
        elif kind == "tool_use":
            items.append(_tool_call(str(block.get("name") or "tool"), block.get("input")))
        elif kind == "tool_result" and block.get("is_error"):
            items.append(StreamItem("error", _short(block.get("content") or "tool failed")))
    return items


FILE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")


def _tool_call(name: str, tool_input: Any) -> StreamItem:
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "description"):
            if isinstance(tool_input.get(key), str):
                kind = "file" if name in FILE_TOOLS else "tool"
                return StreamItem(kind, f"{name}: {_short(tool_input[key], 300)}")
    detail = _short(tool_input, 300) if tool_input else ""
    return StreamItem("tool", f"{name}: {detail}" if detail else name)


def _codex(event: dict[str, Any]) -> list[StreamItem]:
    kind = event.get("type")
    if kind == "thread.started":
        return [StreamItem("session", f"thread {event.get('thread_id', '?')} started")]
    if kind in ("turn.failed", "error"):
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return [StreamItem("error", _short(message or event.get("message") or kind))]
    if kind == "turn.completed":
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        tokens = usage.get("output_tokens") if usage else None
        return [
            StreamItem("result", f"turn completed{f' · {tokens} output tokens' if tokens else ''}")
        ]
    item = event.get("item")
    if kind != "item.completed" or not isinstance(item, dict):
        return []
    return _codex_item(item)


def _codex_item(item: dict[str, Any]) -> list[StreamItem]:
    kind = item.get("type") or item.get("item_type")
    text = item.get("text")
    if kind in ("agent_message", "assistant_message") and isinstance(text, str):
        return [StreamItem("message", _short(text))]
    if kind == "reasoning" and isinstance(text, str):
        return [StreamItem("thinking", _short(text.replace("**", "")))]
    if kind == "command_execution":
        code = item.get("exit_code")
        status = f" → exit {code}" if code not in (None, 0) else ""
        return [StreamItem("error" if status else "tool", f"$ {item.get('command', '')}{status}")]
    if kind == "file_change" and isinstance(item.get("changes"), list):
        changes = [c for c in item["changes"] if isinstance(c, dict)]
        return [
            StreamItem("file", f"{c.get('kind', 'edit')} {c.get('path', '?')}") for c in changes
        ]
    if kind == "error":
        return [StreamItem("error", _short(item.get("message") or "error"))]
    return []


def _generic(event: dict[str, Any]) -> list[StreamItem]:
    """Gemini's stream-json and anything else shaped like it."""
    kind = event.get("type")
    if kind == "message" and isinstance(event.get("content"), str):
        return [StreamItem("message", _short(event["content"]))]
    if kind == "tool_use":
        return [_tool_call(str(event.get("tool_name") or "tool"), event.get("parameters"))]
    if kind == "error" or "error" in event:
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return [StreamItem("error", _short(message or event.get("message") or "error"))]
    if kind == "result":
        return [StreamItem("result", _short(event.get("status") or "done"))]
    if kind == "init":
        return [StreamItem("session", f"session started · {event.get('model') or 'model'}")]
    return [StreamItem("text", _short(event))]

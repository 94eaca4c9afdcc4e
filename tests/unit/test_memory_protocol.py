"""The memory server's side of MCP's stdio transport, line by line: what a CLI that asks for
another revision, sends a batch, a typo or a bad argument gets back. (The whole session, as
the CLIs run it, is in tests/engine/test_memory_server.py and the real-CLI tier.)"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from relay_engine.agents.memory_server import PROTOCOL_VERSIONS, Memory, serve


def replies(tmp_path: Path, *messages: Any) -> list[Any]:
    (tmp_path / "notes.json").write_text("[]")
    memory = Memory(tmp_path / "notes.json", tmp_path / "added.jsonl", "j/t")
    lines = b"".join(
        (m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages
    )
    out = io.BytesIO()
    serve(memory, io.BytesIO(lines), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def request(request_id: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def test_a_client_gets_the_revision_it_asks_for_or_the_newest_this_server_speaks(
    tmp_path: Path,
) -> None:
    old, future = replies(
        tmp_path,
        request(1, "initialize", protocolVersion="2025-03-26", capabilities={}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request("two", "initialize", protocolVersion="2099-01-01", capabilities={}),
    )
    assert old["id"] == 1 and old["result"]["protocolVersion"] == "2025-03-26"
    assert old["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert old["result"]["serverInfo"]["name"] == "relay_memory"
    assert future["id"] == "two" and future["result"]["protocolVersion"] == PROTOCOL_VERSIONS[0]


def test_unknown_methods_and_broken_lines_get_json_rpc_errors_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    unknown, broken, pong = replies(
        tmp_path,
        request(1, "resources/list"),
        b"{not json",
        request(2, "ping"),
    )
    assert (unknown["id"], unknown["error"]["code"]) == (1, -32601)
    assert "resources/list" in unknown["error"]["message"]
    assert (broken["id"], broken["error"]["code"]) == (None, -32700)
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_a_bad_argument_is_a_tool_error_the_model_reads(tmp_path: Path) -> None:
    no_query, bad_limit, no_tool, empty = (
        reply["result"]
        for reply in replies(
            tmp_path,
            request(1, "tools/call", name="memory_search", arguments={}),
            request(2, "tools/call", name="memory_search", arguments={"query": "x", "limit": 0}),
            request(3, "tools/call", name="memory_forget", arguments={}),
            request(4, "tools/call", name="memory_add", arguments={"note": "  "}),
        )
    )
    assert all(result["isError"] for result in (no_query, bad_limit, no_tool, empty))
    assert "'query' is missing" in no_query["content"][0]["text"]
    assert "'limit' must be a whole number" in bad_limit["content"][0]["text"]
    assert "no tool 'memory_forget'" in no_tool["content"][0]["text"]
    assert "empty" in empty["content"][0]["text"]
    assert not (tmp_path / "added.jsonl").exists()


def test_a_batch_is_answered_as_a_batch_and_a_note_added_is_found_at_once(
    tmp_path: Path,
) -> None:
    (batch,) = replies(
        tmp_path,
        [
            request(1, "tools/call", name="memory_add", arguments={"note": "tests use tmp dirs"}),
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
            request(2, "tools/call", name="memory_search", arguments={"query": "tmp"}),
        ],
    )
    added, found = (reply["result"] for reply in batch)
    assert not added["isError"] and "Noted" in added["content"][0]["text"]
    assert "tests use tmp dirs" in found["content"][0]["text"]
    listed = replies(tmp_path, request(3, "tools/list"))[0]["result"]["tools"]
    assert [tool["name"] for tool in listed] == ["memory_search", "memory_add"]
    assert listed[0]["inputSchema"]["required"] == ["query"]

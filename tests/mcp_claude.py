"""A stand-in for claude that uses relay's memory the way claude does: it reads the
``--mcp-config`` file relay passed, starts the server named there over stdio with the ``mcp``
client SDK, and calls its tools; then prints a stream-json result and exits.

Attempt 1 adds a note and fails (exit 1); a later attempt searches and reports what it
found as its result. Used by tests/engine/test_memory_engine.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

NOTE = "attempt 1 learned: the fixtures need make seed first"


async def use_memory(server: dict[str, Any], attempt: int) -> str:
    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        if attempt == 1:
            await session.call_tool("memory_add", {"note": NOTE})
            token = os.environ.get("DEPLOY_TOKEN", "")
            await session.call_tool("memory_add", {"note": f"the deploy token is {token}"})
            return "failed after noting"
        found = await session.call_tool("memory_search", {"query": "fixtures seed"})
        return "\n".join(part.text for part in found.content)


def main() -> int:
    config_file = sys.argv[sys.argv.index("--mcp-config") + 1]
    with open(config_file, encoding="utf-8") as handle:
        server = json.load(handle)["mcpServers"]["relay_memory"]
    attempt = int(os.environ.get("RELAY_ATTEMPT", "1"))
    said = asyncio.run(use_memory(server, attempt))
    failed = attempt == 1
    result = {"type": "result", "subtype": "error_during_execution" if failed else "success",
              "is_error": failed, "result": said, "session_id": f"fake-{attempt}"}  # fmt: skip
    print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Agent CLI adapters and their registry.

Pure: adapters build argv and parse bytes; :mod:`relay_engine.agents.runner` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay_engine.agents.adapters.acp import AcpAdapter
from relay_engine.agents.adapters.base import (
    Adapter,
    AgentReport,
    Invocation,
    InvocationContext,
    StreamParser,
    extract_json,
)
from relay_engine.agents.adapters.claude import ClaudeAdapter
from relay_engine.agents.adapters.codex import CodexAdapter
from relay_engine.agents.adapters.command import CommandAdapter, TextParser
from relay_engine.agents.adapters.copilot import CopilotAdapter
from relay_engine.agents.adapters.gemini import GeminiAdapter
from relay_engine.agents.adapters.opencode import OpenCodeAdapter
from relay_engine.agents.adapters.qwen import QwenAdapter
from relay_engine.agents.adapters.sim import SimAdapter
from relay_engine.contracts.config import PROVIDERS

ADAPTERS: dict[str, type[Adapter]] = {
    "claude": ClaudeAdapter,
    "codex": CodexAdapter,
    "gemini": GeminiAdapter,
    "opencode": OpenCodeAdapter,
    "qwen": QwenAdapter,
    "copilot": CopilotAdapter,
    "acp": AcpAdapter,
    "sim": SimAdapter,
}
STATE_PATHS = {
    cls.provider: (*cls.state_paths, *cls.state_files)
    for cls in (ClaudeAdapter, CodexAdapter, GeminiAdapter, OpenCodeAdapter, QwenAdapter,
                CopilotAdapter)
}  # fmt: skip
"""Where each CLI keeps its logins and sessions: an agent of one provider never sees
another's (a claude agent has no business reading codex's tokens)."""

MEMORY_TOOL_PROVIDERS = frozenset({"claude", "codex"})
"""CLIs relay hands its memory server to (claude's ``--mcp-config``, codex's ``-c
mcp_servers``); the others get the memory as their prompt's prelude only."""

__all__ = [
    "MEMORY_TOOL_PROVIDERS",
    "PROVIDERS",
    "STATE_PATHS",
    "AcpAdapter",
    "Adapter",
    "AgentReport",
    "ClaudeAdapter",
    "CodexAdapter",
    "CommandAdapter",
    "CopilotAdapter",
    "GeminiAdapter",
    "Invocation",
    "InvocationContext",
    "OpenCodeAdapter",
    "QwenAdapter",
    "SimAdapter",
    "StreamParser",
    "TextParser",
    "extract_json",
    "get_adapter",
]


def get_adapter(provider: str, *, command_template: Sequence[str] | None = None) -> Adapter:
    """A new adapter for `provider` (one per launch: the ACP adapter keeps its conversation);
    "command" needs `command_template` (argv with placeholders)."""
    if provider == "acp":
        return AcpAdapter(tuple(command_template) if command_template else None)
    if provider in ADAPTERS:
        return ADAPTERS[provider]()
    if provider == "command":
        if not command_template:
            raise ValueError("provider 'command' needs a command_template")
        return CommandAdapter(command_template)
    raise ValueError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS)})")

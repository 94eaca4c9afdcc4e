"""Agent CLI adapters and their registry.

Pure: adapters build argv and parse bytes; :mod:`relay_engine.agents.runner` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from relay_engine.agents.adapters.gemini import GeminiAdapter
from relay_engine.agents.adapters.sim import SimAdapter

PROVIDERS = ("claude", "codex", "gemini", "command", "sim")

__all__ = [
    "PROVIDERS",
    "Adapter",
    "AgentReport",
    "ClaudeAdapter",
    "CodexAdapter",
    "CommandAdapter",
    "GeminiAdapter",
    "Invocation",
    "InvocationContext",
    "SimAdapter",
    "StreamParser",
    "TextParser",
    "extract_json",
    "get_adapter",
]


def get_adapter(provider: str, *, command_template: Sequence[str] | None = None) -> Adapter:
    """Adapter for `provider`; "command" needs `command_template` (argv with placeholders)."""
    if provider == "claude":
        return ClaudeAdapter()
    if provider == "codex":
        return CodexAdapter()
    if provider == "gemini":
        return GeminiAdapter()
    if provider == "sim":
        return SimAdapter()
    if provider == "command":
        if not command_template:
            raise ValueError("provider 'command' needs a command_template")
        return CommandAdapter(command_template)
    raise ValueError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS)})")

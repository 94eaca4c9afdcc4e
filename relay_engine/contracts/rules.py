"""Permission rules as operators write them, in Claude Code's syntax: ``Tool`` or
``Tool(pattern)`` (``Bash(npm test:*)``, ``Edit(src/**)``, ``WebFetch(domain:x.org)``).

Pure: the shape of a rule and its parsing, so relay.toml can be checked when it is read;
what a rule matches is :mod:`relay_engine.core.permissions`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_RULE = re.compile(r"^(?P<tool>[A-Za-z_][A-Za-z0-9_.:-]*)(?:\((?P<spec>.*)\))?$", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One rule: a tool, and what of its input it covers (None: every use of the tool)."""

    tool: str
    spec: str | None = None

    def __str__(self) -> str:
        return self.tool if self.spec is None else f"{self.tool}({self.spec})"


def parse_rule(text: str) -> Rule:
    """``Bash(npm test:*)`` -> Rule("Bash", "npm test:*"); a clear error for anything else."""
    match = _RULE.match(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a permission rule: write Tool or Tool(pattern), "
            'e.g. "Bash(npm test:*)", "Edit(src/**)", "WebFetch(domain:example.com)"'
        )
    spec = match["spec"]
    if spec is not None and not spec.strip():
        raise ValueError(f"{text!r}: the pattern in parentheses is empty; write just the tool")
    return Rule(match["tool"], spec.strip() if spec is not None else None)


def parse_rules(texts: Iterable[str]) -> tuple[Rule, ...]:
    return tuple(parse_rule(text) for text in texts)

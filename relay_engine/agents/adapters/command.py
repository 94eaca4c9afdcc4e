"""Any command: an argv template with {prompt}, {prompt_file}, {result_file} and {cwd}
substituted per element (never through a shell). Output is plain text.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from relay_engine.agents.adapters.base import (
    BaseParser,
    Invocation,
    InvocationContext,
    clean_progress,
    extract_json,
    relay_env,
)

_PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|result_file|cwd)\}")


def render_template(template: Sequence[str], ctx: InvocationContext) -> list[str]:
    """One pass of plain replacement, not str.format: templates may hold literal braces, and
    a prompt that itself contains "{cwd}" must come through untouched."""
    values = {
        "prompt": ctx.prompt,
        "prompt_file": str(ctx.prompt_file),
        "result_file": str(ctx.result_file),
        "cwd": str(ctx.cwd),
    }
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], element) for element in template]


class CommandAdapter:
    provider = "command"
    supports_resume = False
    state_paths: tuple[str, ...] = ()
    state_files: tuple[str, ...] = ()
    state_env: str | None = None
    state_read_only: tuple[str, ...] = ()
    cache_paths: tuple[str, ...] = ()
    auth_env: tuple[str, ...] = ()
    needs_network = False  # tests and scripts: give it the network with network = "on"
    sandboxed_by_default = True

    def __init__(self, command_template: Sequence[str]) -> None:
        if not command_template:
            raise ValueError("the command provider needs a non-empty command template")
        self.command_template = tuple(command_template)

    def build(self, ctx: InvocationContext) -> Invocation:
        template = ctx.command or self.command_template
        argv = render_template(template, ctx) + list(ctx.extra_args)
        return Invocation(argv, None, relay_env(ctx))

    def parser(self) -> TextParser:
        return TextParser(self.provider)


class TextParser(BaseParser):
    """Plain stdout: the last non-empty line is progress, the text (tail) is the result."""

    def __init__(self, provider: str = "command") -> None:
        super().__init__()
        self.provider = provider

    def _line(self, line: str, now: datetime) -> None:
        self._raw.add(line)
        self._report.last_progress = clean_progress(line) or self._report.last_progress

    def _complete(self, exit_code: int, stderr_tail: str, now: datetime) -> None:
        text = self._raw.tail.strip()
        self._report.result_text = text or None
        self._report.result_data = extract_json(text)

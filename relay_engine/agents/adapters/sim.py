"""The simulated agent (`python -m relay_engine.agents.sim_agent`), for demos and tests.

The engine sets RELAY_SIM_SCRIPT itself. To exercise a real provider's parser, the engine pairs
the sim executable with that provider's adapter via `InvocationContext.command` instead.

Pure: argv is built and output parsed here; the runner runs the CLI.
"""

from __future__ import annotations

import sys

from relay_engine.agents.adapters.base import Invocation, InvocationContext, relay_env
from relay_engine.agents.adapters.command import TextParser

SIM_MODULE = "relay_engine.agents.sim_agent"


class SimAdapter:
    provider = "sim"
    supports_resume = False
    state_paths: tuple[str, ...] = ()
    state_files: tuple[str, ...] = ()
    state_env: str | None = None
    state_read_only: tuple[str, ...] = ()
    cache_paths: tuple[str, ...] = ()
    auth_env: tuple[str, ...] = ()
    needs_network = False
    # relay's own test double, which runs no model and no tools; tests drive it to write
    # facts (pid files) anywhere. sandbox = "bwrap" puts it in one like any agent.
    sandboxed_by_default = False

    def build(self, ctx: InvocationContext) -> Invocation:
        exe = list(ctx.command) if ctx.command else [sys.executable, "-m", SIM_MODULE]
        argv = [*exe, "--prompt-file", str(ctx.prompt_file), *ctx.extra_args]
        return Invocation(argv, None, relay_env(ctx))

    def parser(self) -> TextParser:
        return TextParser(self.provider)

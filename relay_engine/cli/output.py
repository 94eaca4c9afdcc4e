"""What every ``relay`` command shares: the workspace and database it was pointed at,
and the consoles it prints on (stdout for results, stderr for faults, never folded)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from relay_engine.contracts.config import RelayConfig
from relay_engine.ops import commands
from relay_engine.store.db import Store

console = Console()
err = Console(stderr=True, soft_wrap=True)  # never fold a path or message in two


def workspace_of(args: argparse.Namespace) -> Path:
    return Path(args.workspace).resolve()


def open_store(
    args: argparse.Namespace, *, readonly: bool = False, config: RelayConfig | None = None
) -> Store:
    if config is None:
        return Store.for_workspace(workspace_of(args), args.db, readonly=readonly)
    return Store.for_workspace(
        workspace_of(args),
        args.db,
        readonly=readonly,
        auto_migrate=config.engine.auto_migrate,
        lease_s=config.engine.lease_seconds,
    )


def command(
    build: Callable[[argparse.Namespace], commands.OperatorCommand],
    after: Callable[[argparse.Namespace, Store], int] | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A subcommand that stores an operator command, applies it, and reports its outcome.

    A running engine may apply the command before this process does; the outcome is read
    back from the command row either way. ``after`` runs once the command was accepted.
    """

    def run(args: argparse.Namespace) -> int:
        store = open_store(args)
        command = build(args)
        command_id = commands.enqueue(store, command)
        commands.apply_pending(store, "cli", time.time())
        result = commands.wait_for_outcome(store, command_id)
        if result is None:
            err.print(f"{command.kind}: stored as command {command_id}; no engine applied it yet")
            return 1
        (console if result.ok else err).print(result.outcome, markup=False)
        if not result.ok:
            return 1
        return after(args, store) if after is not None else 0

    return run

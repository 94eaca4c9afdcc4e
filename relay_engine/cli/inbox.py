"""The subcommands that steer through the command inbox (:mod:`relay_engine.ops.commands`):
each stores an operator command, applies it, and prints its outcome. Not in
:mod:`relay_engine.cli.output`, which every command loads: the inbox loads most of the
operations layer, which the commands that only read have no use for."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from relay_engine.cli.output import console, err, open_store
from relay_engine.ops import commands
from relay_engine.store.db import Store


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
        if not apply_command(store, build(args)):
            return 1
        return after(args, store) if after is not None else 0

    return run


def apply_command(store: Store, command: commands.OperatorCommand) -> bool:
    """Store ``command``, apply it, and print its outcome (or that no engine applied it
    yet): whether it was accepted."""
    command_id = commands.enqueue(store, command)
    commands.apply_pending(store, "cli", time.time())
    result = commands.wait_for_outcome(store, command_id)
    if result is None:
        err.print(f"{command.kind}: stored as command {command_id}; no engine applied it yet")
        return False
    (console if result.ok else err).print(result.outcome, markup=False)
    return result.ok

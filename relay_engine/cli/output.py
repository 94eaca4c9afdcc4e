"""What every ``relay`` command shares: the workspace and database it was pointed at,
and the consoles it prints on (stdout for results, stderr for faults, never folded)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from relay_engine.contracts.config import RelayConfig
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

"""``relay db upgrade`` and ``relay db current``: the database's schema revision."""

from __future__ import annotations

import argparse

from relay_engine.cli.output import console, workspace_of
from relay_engine.contracts.config import load_config
from relay_engine.store.db import Store


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    """Bring the database to this relay's schema; refused while an engine runs on it."""
    config = load_config(workspace_of(args))
    store = Store.for_workspace(
        workspace_of(args), args.db, create=False, lease_s=config.engine.lease_seconds
    )
    before, after = store.upgrade()
    if before.up_to_date:
        console.print(f"{store.display_url()}: already at {after.head}")
    else:
        console.print(
            f"{store.display_url()}: upgraded from {before.current or 'empty'} to {after.head}"
        )
    return 0


def cmd_db_current(args: argparse.Namespace) -> int:
    store = Store.for_workspace(workspace_of(args), args.db, create=False)
    state = store.schema_state()
    mark = "up to date" if state.up_to_date else f"this relay's head is {state.head}"
    console.print(f"{store.display_url()}: {state.current or 'empty'} ({mark})")
    return 0 if state.up_to_date else 1


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    db = parser.add_subparsers(dest="db_command", required=True)
    db.add_parser(
        "upgrade", help="migrate to this relay's schema (stop older engines first)"
    ).set_defaults(func=cmd_db_upgrade)
    db.add_parser(
        "current", help="the schema revision, and whether it is this relay's"
    ).set_defaults(func=cmd_db_current)

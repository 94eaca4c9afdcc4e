"""``relay engines``: the engines sharing this database, live and gone, and how busy each is."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import JustifyMethod
from rich.table import Table

from relay_engine.cli.output import open_store, print_listing
from relay_engine.contracts.config import load_config
from relay_engine.contracts.time_format import format_time
from relay_engine.store.db import Store
from relay_engine.store.engines import (
    RECENT_SECONDS,
    EngineRow,
    age_text,
    agents_cell,
    capacity_cell,
    read_engines,
)
from relay_engine.store.wakes import NOT_HEARD

STATE_STYLES = {"live": "green", "gone": "red"}
NOT_HEARD_NOTE = "wake-ups unheard"  # it ticks at its interval; short, as ASLEEP_NOTE
ASLEEP_NOTE = "asleep: no work"  # short: the state column is narrow at 80 columns


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--all", action="store_true", help="also engines gone more than a day ago")
    parser.set_defaults(func=lambda a: cmd_engines(a, open_store(a, readonly=True)))


def cmd_engines(args: argparse.Namespace, store: Store) -> int:
    """Every engine's facts; gone means stopped, or silent for longer than one lease."""
    lease = load_config(Path(args.workspace).resolve()).engine.lease_seconds
    with store.read() as session:
        recent = None if args.all else RECENT_SECONDS
        rows = read_engines(session, now=time.time(), lease_seconds=lease, recent_seconds=recent)
    empty = "no engines yet: start one with [bold]relay run[/]"
    return print_listing(args.json, rows, EngineRow.as_dict, engines_table, empty=empty)


def engines_table(rows: Sequence[EngineRow], title: str = "engines") -> Table:
    table = Table(title=title, title_justify="left")
    # "seen": how long ago its last heartbeat; a header as short as its values, so the
    # table fits 80 columns with no header cut ("heartbeat" came out as "heartb…").
    for column in ("engine", "host", "pid", "started", "seen", "state", "running", "agents"):
        justify: JustifyMethod = "right" if column in ("pid", "seen", "running") else "left"
        table.add_column(column, justify=justify, no_wrap=column in ("engine", "started"))
    for row in rows:
        state = row.state if row.why_gone != "silent" else "gone (silent)"
        state = f"[{STATE_STYLES[row.state]}]{state}[/]"
        if row.condition:
            state += f" [yellow]{row.condition}[/]"
        if row.state == "live" and row.wake_ups == NOT_HEARD:
            state += f" [yellow]{NOT_HEARD_NOTE}[/]"
        if row.asleep_since is not None:
            state += f" [dim]{ASLEEP_NOTE}[/]"
        table.add_row(
            row.id,
            row.host,
            str(row.pid),
            format_time(row.started_at),
            age_text(row.heartbeat_age),
            state,
            capacity_cell(row),
            agents_cell(row),
        )
    return table

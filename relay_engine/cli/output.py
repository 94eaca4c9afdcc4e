"""What every ``relay`` command shares: the workspace and database it was pointed at,
and the consoles it prints on (stdout for results, stderr for faults, never folded)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    Group,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.contracts.config import RelayConfig
from relay_engine.contracts.printable import printable_segments
from relay_engine.core.faults import DatabaseFault, explain
from relay_engine.store.db import Store, database_url, location, missing_database


class _Printable:
    """A renderable drawn without control characters in its text (see
    :mod:`relay_engine.contracts.printable`): Rich prints an ESC it is given as it is."""

    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from printable_segments(console.render(self.inner, options))


class _NoControls(RenderHook):
    """Every command's printing goes through it: no call site can forget an agent's words."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Printable(renderable) for renderable in renderables]


def _console(*, stderr: bool = False, soft_wrap: bool = False) -> Console:
    printing = Console(stderr=stderr, soft_wrap=soft_wrap)
    printing.push_render_hook(_NoControls())
    return printing


console = _console()
err = _console(stderr=True, soft_wrap=True)  # never fold a path or message in two

Row = TypeVar("Row")
Field = tuple[str, str]  # a label and its value, markup escaped where it is not relay's


def table_or_records(
    table: Table, records: list[tuple[str, list[Field]]], *, wide: int
) -> RenderableType:
    """``table`` when the terminal has ``wide`` columns for it, else one block per row: its
    heading, then a label and value per line. Eleven columns folded into 80 left four
    letters a cell ("acce ss flag s"), a table nobody could read."""
    if console.width >= wide:
        return table
    blocks: list[RenderableType] = [Text.from_markup(f"[bold]{table.title}[/]")]
    for heading, fields in records:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for label, value in fields:
            grid.add_row(label, value)
        blocks += [Text.from_markup(heading), Padding(grid, (0, 0, 0, 2))]
    return Group(*blocks)


def workspace_of(args: argparse.Namespace) -> Path:
    return Path(args.workspace).resolve()


def open_store(
    args: argparse.Namespace, *, readonly: bool = False, config: RelayConfig | None = None
) -> Store:
    if config is None:  # a command that runs no engine: what it writes wakes the engines
        store = Store.for_workspace(workspace_of(args), args.db, readonly=readonly)
        store.wakes_engines = not readonly
        return store
    return Store.for_workspace(
        workspace_of(args),
        args.db,
        readonly=readonly,
        auto_migrate=config.engine.auto_migrate,
        lease_s=config.engine.lease_seconds,
    )


def print_listing(
    as_json: bool,
    rows: list[Row],
    dump: Callable[[Row], Mapping[str, object]],
    table: Callable[[list[Row]], Table],
    *,
    empty: str,
) -> int:
    """The listing commands answer alike: with ``--json`` every row, even none (``[]``, so a
    script never has to read prose), else the table, or a line saying there is nothing."""
    if as_json:
        print(json.dumps([dump(row) for row in rows], indent=2))
    else:
        console.print(table(rows) if rows else empty)
    return 0


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command line. What it cannot do is one line on stderr and exit 2, never
    a trace: a refused request, a bad job file or config (each a ValueError), or a fault
    of the database met mid-command."""
    missing = missing_database(args.db) if args.db and not args.create else None
    if missing is not None and args.command != "init":
        err.print(f"[red]error:[/] {escape(missing)}", highlight=False)
        return 2
    try:
        return int(args.func(args))
    except (DatabaseFault, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False)
        return 2
    except SQLAlchemyError as error:
        where = location(database_url(workspace_of(args), args.db))
        err.print(f"[red]error:[/] {escape(explain(error, where))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130

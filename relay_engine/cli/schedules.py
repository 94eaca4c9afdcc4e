"""``relay schedules``: the scheduled jobs (templates), the run each starts next, and the
last one it started; ``relay schedules pause|resume|remove ID`` stops, restarts or forgets
one (a changed definition is submitted again after ``remove``).

A template's slots are decided by whichever engine ticks, so this is also where an operator
sees the slots that passed while no engine ran (``missed``).
"""

from __future__ import annotations

import argparse
import time

from rich.markup import escape
from rich.table import Table

from relay_engine.cli.output import console, open_store, print_listing
from relay_engine.contracts.time_format import format_time
from relay_engine.ops.schedules import (
    ScheduleView,
    pause_schedule,
    read_schedules,
    remove_schedule,
    resume_schedule,
)
from relay_engine.store.db import Store

ACTIONS = {"pause": pause_schedule, "resume": resume_schedule, "remove": remove_schedule}


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=sorted(ACTIONS), help="change one template")
    parser.add_argument("template", nargs="?", help="the scheduled job's id")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=lambda args: _run(args, parser))


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.action is None:
        return cmd_schedules(args, open_store(args, readonly=True))
    if args.template is None:
        parser.error(f"relay schedules {args.action} needs the scheduled job's id")
    said = ACTIONS[args.action](open_store(args), args.template, time.time())
    console.print(said, markup=False, highlight=False)
    return 0


def cmd_schedules(args: argparse.Namespace, store: Store) -> int:
    with store.read() as session:
        views = read_schedules(session, time.time())
    empty = 'no scheduled jobs: a job file\'s \\[job] takes schedule = "0 9 * * 1-5"'
    return print_listing(args.json, views, ScheduleView.as_dict, schedules_table, empty=empty)


def schedules_table(views: list[ScheduleView]) -> Table:
    table = Table(title="schedules", title_justify="left")
    for column in ("schedule", "cron", "timezone", "catch up", "next run", "last run", "missed"):
        table.add_column(column, no_wrap=column in ("schedule", "next run", "last run"))
    for view in views:
        last = "never"
        if view.last_run is not None:
            last = f"{view.last_run} ({view.last_run_state or 'gone'})"
        if view.problem:
            last += f"\n[red]{escape(view.problem)}[/]"
        missed = str(view.missed)
        if view.last_missed_at is not None:
            missed += f" (last {format_time(view.last_missed_at)})"
        table.add_row(
            view.id,
            view.cron,
            view.timezone,
            view.catch_up,
            view.next_text(),
            last,
            missed,
        )
    return table

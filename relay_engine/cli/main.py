"""The ``relay`` command: the engine, headless. This module only assembles the parser;
each group of subcommands lives in a module of its own in this package."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.cli import (
    agents,
    asks,
    db,
    engines,
    schedules,
    status,
    steer,
    takeover,
    usage,
)
from relay_engine.cli import run as workspace
from relay_engine.cli.output import err
from relay_engine.contracts.config import ConfigError
from relay_engine.contracts.job_file import JobFileError
from relay_engine.core.faults import DatabaseFault, explain
from relay_engine.core.usage import GROUPINGS
from relay_engine.ops.jobs import JobConflict
from relay_engine.store.db import default_db_url, location, missing_database


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relay", description="Run fleets of AI coding agents.")
    parser.add_argument("--workspace", default=".", help="workspace directory (default: .)")
    parser.add_argument(
        "--db", default=None, help="database URL (default: RELAY_DB or .relay/relay.db)"
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="with --db: make the SQLite file when it does not exist yet (relay init always does)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_engine_commands(sub)
    steer.add_task_commands(sub)
    steer.add_job_commands(sub)
    agents.add_commands(sub)
    asks.add_commands(sub)
    takeover.add_commands(sub)
    engines.add_commands(sub)
    schedules.add_commands(sub)
    steer.add_pull_commands(sub)
    db.add_commands(sub)
    return parser


def _add_engine_commands(sub: Any) -> None:
    """Set up, submit, run and look: what a workspace is used with."""
    sub.add_parser("init", help="write relay.toml and an example job").set_defaults(
        func=workspace.cmd_init
    )
    submit = sub.add_parser("submit", help="submit job files")
    submit.add_argument("files", nargs="+")
    submit.set_defaults(func=workspace.cmd_submit)
    runner = sub.add_parser("run", help="run the engine (Ctrl-C stops)")
    runner.add_argument(
        "--until-idle",
        action="store_true",
        help="exit when nothing is queued or running: 0 all done, 1 a job failed, 3 only "
        "waits are left (one line each: what for, until when, the command that releases it)",
    )
    runner.add_argument(
        "--wait",
        action="store_true",
        help="with --until-idle: keep running through waits (limits, gates, held tasks, "
        "blocked jobs) until the work is done",
    )
    runner.add_argument("--quiet", action="store_true", help="do not print events")
    runner.set_defaults(func=workspace.cmd_run)
    status_parser = sub.add_parser("status", help="jobs, tasks and providers")
    status_parser.add_argument(
        "job", nargs="?", help="a job, or JOB/TASK for one task and its runs"
    )
    status_parser.add_argument("--json", action="store_true")
    status_parser.set_defaults(func=status.cmd_status)
    usage_parser = sub.add_parser(
        "usage", help="tokens and cost by job, task, agent, provider or day"
    )
    usage_parser.add_argument("--by", choices=GROUPINGS, default="job")
    usage_parser.add_argument("--since", help="only executions started on or after this date")
    usage_parser.add_argument("--job", help="only this job")
    usage_parser.add_argument("--json", action="store_true")
    usage_parser.set_defaults(func=usage.cmd_usage)
    events = sub.add_parser("events", help="the event log")
    events.add_argument("--follow", "-f", action="store_true")
    events.add_argument("--limit", "-n", type=int, default=0)
    events.set_defaults(func=workspace.cmd_events)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = missing_database(args.db) if args.db and not args.create else None
    if missing is not None and args.command != "init":
        err.print(f"[red]error:[/] {escape(missing)}", highlight=False)
        return 2
    try:
        return int(args.func(args))
    except (JobFileError, ConfigError, JobConflict, DatabaseFault, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False)
        return 2
    except SQLAlchemyError as error:  # a database fault met mid-command: one line, not a trace
        where = location(args.db or default_db_url(Path(args.workspace).resolve()))
        err.print(f"[red]error:[/] {escape(explain(error, where))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

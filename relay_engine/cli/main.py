"""The ``relay`` command: the engine, headless. This module only assembles the parser;
each group of subcommands lives in a module of its own in this package.

A command's module is imported only when that command runs: the modules reach every
layer of the engine between them, and loading all of them cost a short command such as
``relay status`` most of its time. So the parser names every subcommand with its help
line here, and the module fills in the arguments of the one a command line names.
"""

from __future__ import annotations

import argparse
from importlib import import_module

from relay_engine.cli.startup import imports_frozen

COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("run", "write relay.toml and an example job"),
    "submit": ("run", "submit job files"),
    "run": ("run", "run the engine (Ctrl-C stops)"),
    "status": ("status", "jobs, tasks and providers"),
    "usage": ("usage", "tokens and cost by job, task, agent, provider or day"),
    "events": ("run", "the event log"),
    "cancel": ("steer", "cancel a task and drop the tasks that need it"),
    "retry": ("steer", "retry a task"),
    "drop": ("steer", "drop a task not needed: its dependents go on without it"),
    "pin": ("steer", "pin a workstream (or JOB/TASK) to an agent"),
    "cancel-job": ("steer", "cancel a whole job"),
    "replan": ("steer", "start a new planner round with guidance"),
    "budget": ("steer", "raise a job's budget; work parked on it resumes"),
    "approve": ("steer", "approve the next wave of a gated job"),
    "plan": ("steer", "install a plan written by hand"),
    "agents": ("agents", "agents and whether they can work"),
    "doctor": ("agents", "check every configured agent's CLI, flags and login"),
    "asks": ("asks", "what agents wait on you for: tool requests, questions"),
    "answer": ("steer", "allow, deny or answer what an agent asked"),
    "takeover": ("takeover", "work on a task yourself, in the agent's own CLI"),
    "handback": ("takeover", "give a task you took over back to relay"),
    "say": ("takeover", "tell a task's agent something (now, or in its next prompt)"),
    "engines": ("engines", "engines on this database: live, gone, busy"),
    "schedules": ("schedules", "scheduled jobs: their next and last runs"),
    "merge": ("steer", "merge a job's pull request (READY, or any with --force)"),
    "close": ("steer", "close a job's pull request and cancel its work"),
    "db": ("db", "the database's schema"),
}
"""Every subcommand, in the order ``relay --help`` lists them: the module of this package
whose ``add_arguments(name, parser)`` fills its parser in (and sets ``func``, what runs
it), and its line in ``relay --help``."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``relay`` parser with only ``command``'s arguments filled in; every other
    subcommand is its name and help line, enough for ``relay --help`` and to tell which
    command a line names."""
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
    for name, (module, helptext) in COMMANDS.items():
        child = sub.add_parser(name, help=helptext, add_help=name == command)
        if name == command:
            import_module(f"relay_engine.cli.{module}").add_arguments(name, child)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Two passes: the first, over empty subcommands, finds the command (or prints
    ``relay --help``, or refuses a line naming none); the second parses the line with that
    command's own arguments, so its errors and ``--help`` are its own."""
    named, _ = build_parser().parse_known_args(argv)
    return build_parser(named.command).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    with imports_frozen():
        args = parse_args(argv)
        from relay_engine.cli.output import run_command  # after parsing: `--help` needs none

    return run_command(args)


if __name__ == "__main__":
    raise SystemExit(main())

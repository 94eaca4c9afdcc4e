"""``relay asks``: what agents wait on you for.

``relay answer`` (in :mod:`relay_engine.cli.steer`) is an operator command like any other:
it reaches the agent through whichever engine runs it, on that engine's next tick, from
any host on the database. This module only reads, so ``relay status`` shows the asks
without loading the operations an answer applies.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from functools import partial

from rich.markup import escape
from rich.table import Table

from relay_engine.cli.output import open_store, print_listing
from relay_engine.contracts.time_format import format_time
from relay_engine.store.read_model.asks import AskView, read_asks


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--all", action="store_true", help="answered and expired ones too")
    parser.set_defaults(func=cmd_asks)


def cmd_asks(args: argparse.Namespace) -> int:
    with open_store(args, readonly=True).read() as session:
        rows = read_asks(session, open_only=not args.all)
    table = partial(asks_table, now=time.time())
    return print_listing(args.json, rows, ask_json, table, empty="nothing waits on you")


def ask_json(ask: AskView) -> dict[str, object]:
    body = asdict(ask)
    body["tool_input"] = dict(ask.tool_input)
    return body


def asks_table(rows: list[AskView], now: float) -> Table:
    table = Table(title="waiting on you", title_justify="left")
    for column in ("ask", "task", "agent", "wants", "age", "times out", "always adds"):
        table.add_column(column)
    for ask in rows:
        table.add_row(
            str(ask.id),
            ask.task_key or ask.job_id,
            ask.agent,
            escape(ask.summary[:120]),
            f"{max(0, now - ask.asked_at) / 60:.0f} min",
            format_time(ask.timeout_at) if ask.timeout_at else "never",
            escape(ask.suggested_rule or "(a question)") if ask.status == "open" else ask.status,
        )
    return table

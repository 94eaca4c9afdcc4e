"""``relay usage``: tokens and cost by job, task, agent, provider, model or day."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from rich.table import Table

from relay_engine.cli.output import console, open_store
from relay_engine.contracts.pricing import PRICES_TAKEN
from relay_engine.core.usage import GROUPINGS, UsageRow, rollup, total
from relay_engine.store.spend import read_usage


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", choices=GROUPINGS, default="job")
    parser.add_argument("--since", help="only executions started on or after this date")
    parser.add_argument("--job", help="only this job")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_usage)


def cmd_usage(args: argparse.Namespace) -> int:
    since = _since(args.since)
    rows = rollup(
        read_usage(open_store(args, readonly=True), since=since, job_id=args.job), args.by
    )
    overall = total(rows)
    if args.json:
        body = {"by": args.by, "since": since, "prices_taken": PRICES_TAKEN}
        body |= {"rows": [r.as_json() for r in rows], "total": overall.as_json()}
        print(json.dumps(body, indent=2))
        return 0
    table = Table(title=f"usage by {args.by}", title_justify="left")
    for column in (args.by, "runs", "input", "cached", "output", "cost"):
        table.add_column(column, justify="left" if column == args.by else "right")
    for row in [*rows, overall]:
        table.add_row(
            row.key,
            str(row.executions),
            f"{row.input_tokens:,}",
            f"{row.cached_tokens:,}",
            f"{row.output_tokens:,}",
            _cost_cell(row),
            style="bold" if row is overall else None,
            end_section=row is rows[-1] if rows else False,
        )
    console.print(table)
    if overall.estimated:
        console.print(
            f"[dim]~ estimated from token counts (prices as of {PRICES_TAKEN}; "
            "override under \\[pricing] in relay.toml)[/]"
        )
    if overall.unpriced:
        console.print(
            f"[yellow]{overall.unpriced} runs used tokens of a model without a price: "
            "add it under \\[pricing] in relay.toml[/]"
        )
    return 0


def _cost_cell(row: UsageRow) -> str:
    mark = "~" if row.estimated else ""
    unpriced = " +?" if row.unpriced else ""
    return f"{mark}${row.cost_usd:,.4f}{unpriced}"


def _since(text: str | None) -> float | None:
    """``--since``: a date (local midnight) or a date and time, in ISO form."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as error:
        raise ValueError(f"--since {text!r}: expected a date like 2026-11-30") from error

"""The ``relay`` command: the engine, headless."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from sqlalchemy.exc import SQLAlchemyError

from relay_engine.cli import agents as cli_agents
from relay_engine.cli import engines as cli_engines
from relay_engine.cli.status import status_report
from relay_engine.contracts.config import (
    CONFIG_FILE,
    ConfigError,
    EngineConfig,
    RelayConfig,
    load_config,
)
from relay_engine.contracts.inputs import check_json_shape, check_toml_shape, read_capped
from relay_engine.contracts.job_file import JobFileError, load_job_file
from relay_engine.contracts.keys import split_key
from relay_engine.contracts.pricing import PRICES_TAKEN
from relay_engine.contracts.review import finding_lines
from relay_engine.contracts.time_format import format_time
from relay_engine.core.faults import DatabaseBusy, DatabaseFault, explain
from relay_engine.ops import commands
from relay_engine.ops.jobs import JobConflict, submit_job
from relay_engine.ops.upstream import check_batch
from relay_engine.store.db import Store, default_db_url, location
from relay_engine.store.engines import EngineRow
from relay_engine.store.schema import Event
from relay_engine.store.usage import GROUPINGS, UsageRow, read_usage, rollup, total

console = Console()
err = Console(stderr=True, soft_wrap=True)  # never fold a path or message in two
STATE_STYLES = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "magenta",
    "RUNNING": "cyan",
    "QUEUED": "yellow",
    "PARKED": "blue",
    "DRAFT": "dim",
    "ACTIVE": "cyan",
    "REVIEWING": "yellow",
    "READY": "green",
    "MERGED": "green",
    "CLOSED": "magenta",
}


def _workspace(args: argparse.Namespace) -> Path:
    return Path(args.workspace).resolve()


def _store(
    args: argparse.Namespace, *, readonly: bool = False, config: RelayConfig | None = None
) -> Store:
    if config is None:
        return Store.for_workspace(_workspace(args), args.db, readonly=readonly)
    return Store.for_workspace(
        _workspace(args),
        args.db,
        readonly=readonly,
        auto_migrate=config.engine.auto_migrate,
        lease_s=config.engine.lease_seconds,
    )


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    """Bring the database to this relay's schema; refused while an engine runs on it."""
    config = load_config(_workspace(args))
    store = Store.for_workspace(
        _workspace(args), args.db, create=False, lease_s=config.engine.lease_seconds
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
    store = Store.for_workspace(_workspace(args), args.db, create=False)
    state = store.schema_state()
    mark = "up to date" if state.up_to_date else f"this relay's head is {state.head}"
    console.print(f"{store.display_url()}: {state.current or 'empty'} ({mark})")
    return 0 if state.up_to_date else 1


def cmd_init(args: argparse.Namespace) -> int:
    workspace = _workspace(args)
    workspace.mkdir(parents=True, exist_ok=True)
    templates = resources.files("relay_engine.cli") / "templates"
    for name, target in ((CONFIG_FILE, CONFIG_FILE), ("example-job.toml", "example-job.toml")):
        path = workspace / target
        if path.exists():
            console.print(f"[dim]kept existing {path}[/]")
            continue
        path.write_text((templates / name).read_text(encoding="utf-8"), encoding="utf-8")
        console.print(f"wrote {path}")
    Store(args.db or default_db_url(workspace), create_empty=True)
    console.print("next: [bold]relay submit example-job.toml && relay run --until-idle[/]")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    config = load_config(_workspace(args))
    agents = {a.id for a in config.agents}
    specs = [
        load_job_file(
            Path(f),
            known_roles=config.roles,
            known_agents=agents,
            max_bytes=config.inputs.max_file_bytes,
            max_input_bytes=config.inputs.max_task_input_bytes,
        )
        for f in args.files
    ]
    store = _store(args)
    check_batch(store, specs)
    for spec in specs:
        outcome = submit_job(store, spec, now=time.time(), engine=config.engine)
        verb = "submitted" if outcome.created else "unchanged (already submitted)"
        console.print(f"job [bold]{outcome.job_id}[/] {verb}: {outcome.task_count} tasks")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from relay_engine.loop.engine import Engine

    config = load_config(_workspace(args))  # a bad relay.toml is refused before anything opens
    engine = Engine(_workspace(args), store=_store_when_free(args, config), config=config)
    _log_to_stderr()
    stop = threading.Event()

    interrupted = threading.Event()

    def _interrupt(signum: int, _frame: FrameType | None) -> None:
        err.print("[yellow]stopping: running agents are released back to the queue[/]")
        interrupted.set()
        stop.set()
        engine.wake()

    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    engine.subscribe(lambda: None)
    follower = None if args.quiet else _follow_in_thread(engine.store, stop)
    ok = engine.run(stop, until_idle=args.until_idle)
    stop.set()
    if follower is not None:
        follower.join(timeout=2)
    if args.until_idle:
        _print_status(engine.store, _report(engine.store, None, config.engine))
    if interrupted.is_set():
        return 0  # stopping on request, with the work released, is a clean exit
    return 0 if ok else 1


def _store_when_free(args: argparse.Namespace, config: RelayConfig) -> Store:
    """An engine started while another process holds the database waits its turn."""
    while True:
        try:
            return _store(args, config=config)
        except DatabaseBusy:
            err.print("database busy, retrying", highlight=False)
            time.sleep(1.0)


def _log_to_stderr() -> None:
    """The engine's own warnings ("database busy, retrying", "disk full: …") reach the operator."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s relay: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("relay_engine")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)


def _follow_in_thread(store: Store, stop: threading.Event) -> threading.Thread:
    start = _last_event_id(store)

    def follow() -> None:
        last = start
        while True:
            stopping = stop.is_set()
            for event in store.events_after(last):
                last = event.id or last
                _print_event(event)
            if stopping:
                return
            stop.wait(0.3)

    thread = threading.Thread(target=follow, daemon=True, name="relay-events")
    thread.start()
    return thread


def _last_event_id(store: Store) -> int:
    events = store.events_after(0, limit=1_000_000)
    return events[-1].id if events and events[-1].id else 0


def _print_event(event: Event) -> None:
    line = Text()
    line.append(time.strftime("%H:%M:%S ", time.localtime(event.at)), style="dim")
    line.append(
        f"{event.kind:<18} ", style={"error": "red", "warning": "yellow"}.get(event.level, "")
    )
    line.append(event.message)
    console.print(line)


def cmd_status(args: argparse.Namespace) -> int:
    store = _store(args, readonly=True)
    report = _report(store, args.job, load_config(_workspace(args)).engine)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_status(store, report)
    return 0


def _report(store: Store, job_id: str | None, engine: EngineConfig) -> dict[str, Any]:
    """The status report, judged by this workspace's lease and budget warning share."""
    return status_report(
        store, job_id, lease_seconds=engine.lease_seconds, budget_warn_at=engine.budget_warn_at
    )


def _print_status(store: Store, report: dict[str, list[dict[str, Any]]]) -> None:
    for held in report["conditions"]:
        who = f"engine {held['engine']} (pid {held['pid']} on {held['host']})"
        err.print(f"[yellow]{who if held['engine'] else store.where}: {held['condition']}[/]")
    if not report["jobs"]:
        console.print(
            "no jobs yet: [bold]relay submit JOB.toml[/] (or [bold]relay init[/] for an example)"
        )
    for job in report["jobs"]:
        tasks = [t for t in report["tasks"] if t["job_id"] == job["id"]]
        console.print(_job_table(job, tasks))
        for line in execution_lines(tasks):
            console.print(escape(line), highlight=False, soft_wrap=True)  # whole paths
    for provider in report["providers"]:
        if provider["status"] == "limited":
            reset = format_time(provider["reset_at"])
            console.print(f"provider [bold]{provider['provider']}[/] limited until {reset}")
    for agent in report["agents"]:
        if agent["status"] not in ("ready", "limited"):  # limits are listed just above
            console.print(
                f"agent [bold]{agent['id']}[/] {agent['status']}: {escape(agent['reason'] or '')}"
                f" [dim]fix: {escape(agent['fix'] or '')}[/]"
            )
    if report["engines"]:
        rows = [EngineRow.from_dict(e) for e in report["engines"]]
        console.print(cli_engines.engines_table(rows))


def _job_table(job: dict[str, Any], tasks: list[dict[str, Any]]) -> Table:
    table = Table(
        title=f"{job['id']}: {job['title']} [{job['state']}]",
        title_justify="left",
        caption=escape("\n".join(pull_lines(job))) or None,
        caption_justify="left",
    )
    for column in ("task", "wave", "state", "attempt", "agent", "note"):
        table.add_column(column)
    for task in tasks:
        style = STATE_STYLES.get(task["state"], "")
        note = task["error"] or task["result"] or ""
        if task["blocked_by"]:
            note = f"blocked by {task['blocked_by']}"
        elif task["waiting_on_provider"]:
            note = f"waiting on {task['waiting_on_provider']}"
        table.add_row(
            task["id"],
            str(task["wave"]),
            f"[{style}]{task['state']}[/]",
            f"{task['attempt']}/{task['max_attempts']}",
            task["agent"] or "",
            (note or "")[:80],
        )
    return table


def execution_lines(tasks: list[dict[str, Any]]) -> list[str]:
    """Where to read why: every run of a task asked about by key, else the artifact folder
    of each task whose last attempt failed."""
    lines = []
    for task in tasks:
        if "executions" in task:
            for run in task["executions"]:
                code = f" (exit {run['exit_code']})" if run["exit_code"] not in (None, 0) else ""
                lines.append(
                    f"run {run['id'][:8]} try {run['attempt']} on {run['agent'] or 'no agent'}: "
                    f"{run['outcome'] or 'running'}{code} {run['error'] or ''}".rstrip()
                )
                lines.append(f"  artifacts: {run['artifact_dir'] or 'none'}")
                if sandbox := run.get("sandbox"):
                    lines.append(f"  sandbox: {sandbox_line(sandbox)}")
            continue
        last = task["last_execution"]
        if task["error"] and last and last["outcome"] not in (None, "succeeded"):
            lines.append(f"{task['id']} attempt {last['attempt']} {last['outcome']}: "
                         f"artifacts in {last['artifact_dir'] or 'none'}")  # fmt: skip
    return lines


def sandbox_line(sandbox: dict[str, Any]) -> str:
    """``bwrap, network off, writes …`` or ``none (why)``: what the run could touch."""
    if sandbox.get("kind") != "bwrap":
        return f"none ({sandbox.get('why', 'not recorded')}), network {sandbox.get('network')}"
    writable = ", ".join(sandbox.get("writable") or []) or "nothing"
    return f"bwrap, network {sandbox.get('network')}, writes {writable}"


def pull_lines(job: dict[str, Any]) -> list[str]:
    """The pull request and final review of a ``relay status`` job, in a few lines."""
    pr, review = job.get("pr"), job.get("review")
    if pr is None:
        return []
    number = f" #{pr['number']}" if pr["number"] else ""
    head = (pr["head_sha"] or "")[:12]
    line = f"PR {pr['forge']}{number} {pr['state']}: {pr['head_branch']} @ {head} -> "
    line += pr["base_branch"] + (f" ({pr['mergeable'].lower()})" if pr["mergeable"] else "")
    lines = [line + (f" {pr['url']}" if pr["url"] else "")]
    if review is not None:
        verdict = review["verdict"] or "running"
        seen = "stale" if review["stale"] else "current head"
        lines.append(f"review {review['round']}: {verdict} ({seen}) {review['summary'] or ''}")
        lines += ["  " + line for line in finding_lines(review["findings"])]
    lines += [f"{label}: {pr[key]}" for key, label in (("note", "waiting"), ("error", "error"))
              if pr[key]]  # fmt: skip
    return lines


def _command(
    build: Callable[[argparse.Namespace], commands.OperatorCommand],
    after: Callable[[argparse.Namespace, Store], int] | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A subcommand that stores an operator command, applies it, and reports its outcome.

    A running engine may apply the command before this process does; the outcome is read
    back from the command row either way. ``after`` runs once the command was accepted.
    """

    def run(args: argparse.Namespace) -> int:
        store = _store(args)
        command = build(args)
        command_id = commands.enqueue(store, command)
        commands.apply_pending(store, "cli", time.time())
        result = commands.wait_for_outcome(store, command_id)
        if result is None:
            err.print(f"{command.kind}: stored as command {command_id}; no engine applied it yet")
            return 1
        (console if result.ok else err).print(result.outcome, markup=False)
        if not result.ok:
            return 1
        return after(args, store) if after is not None else 0

    return run


def _settle_pull(args: argparse.Namespace, store: Store) -> int:
    """Perform the merge or close now, so it happens whether or not an engine runs."""
    from relay_engine.git.worktrees import Worktrees
    from relay_engine.loop.pullstep import PullRequests
    from relay_engine.loop.runtime import EngineRuntime
    from relay_engine.store.engines import this_host

    workspace = _workspace(args)
    runtime = EngineRuntime(
        engine_id=f"cli-{os.getpid()}",
        host=this_host(),
        workspace=workspace,
        store=store,
        config=load_config(workspace),
        wake=lambda *_: None,
        worktrees=Worktrees(workspace),
    )
    PullRequests(runtime, background=False).safe_reconcile(args.job, time.time())
    (job,) = status_report(store, args.job)["jobs"]
    console.print(f"job {job['id']} is {job['state']}", markup=False)
    for line in pull_lines(job):
        console.print(line, markup=False, highlight=False)
    return 1 if job["pr"] and job["pr"]["error"] else 0


def _plan_command(args: argparse.Namespace) -> commands.InstallPlan:
    path = Path(args.file)
    config = load_config(_workspace(args))
    is_json = path.suffix == ".json"
    try:
        text = read_capped(path, config.inputs.max_file_bytes)
        (check_json_shape if is_json else check_toml_shape)(
            text, max_bytes=config.inputs.max_file_bytes
        )
        plan = json.loads(text) if is_json else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot use this plan: {error}") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror}") from None
    return commands.InstallPlan(job=args.job, plan=plan, roles=sorted(config.roles))


def _task_command(
    model: type[commands.CancelTask] | type[commands.RetryTask],
) -> Callable[[argparse.Namespace], commands.OperatorCommand]:
    def build(args: argparse.Namespace) -> commands.OperatorCommand:
        split_key(args.task)
        return model(task=args.task)

    return build


def _pin_command(args: argparse.Namespace) -> commands.Pin:
    if "/" in args.job:
        return commands.Pin(task=args.job, agent=args.agent)
    return commands.Pin(job=args.job, workstream=args.workstream, role=args.role, agent=args.agent)


def cmd_events(args: argparse.Namespace) -> int:
    store = _store(args, readonly=True)
    last = 0
    if args.limit and not args.follow:
        events = store.events_after(0, limit=10_000_000)[-args.limit :]
    else:
        events = store.events_after(0, limit=10_000_000)
    for event in events:
        _print_event(event)
        last = event.id or last
    while args.follow:
        for event in store.events_after(last):
            _print_event(event)
            last = event.id or last
        time.sleep(0.3)
    return 0


def cmd_usage(args: argparse.Namespace) -> int:
    since = _since(args.since)
    rows = rollup(read_usage(_store(args, readonly=True), since=since, job_id=args.job), args.by)
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


def _add_pull_commands(sub: Any) -> None:
    merge = sub.add_parser("merge", help="merge a job's pull request (READY, or any with --force)")
    merge.add_argument("job")
    merge.add_argument("--force", action="store_true", help="merge even without an approval")
    merge.set_defaults(
        func=_command(lambda a: commands.Merge(job=a.job, force=a.force), _settle_pull)
    )
    close = sub.add_parser("close", help="close a job's pull request and cancel its work")
    close.add_argument("job")
    close.set_defaults(func=_command(lambda a: commands.Close(job=a.job), _settle_pull))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relay", description="Run fleets of AI coding agents.")
    parser.add_argument("--workspace", default=".", help="workspace directory (default: .)")
    parser.add_argument(
        "--db", default=None, help="database URL (default: RELAY_DB or .relay/relay.db)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_engine_commands(sub)
    _add_task_commands(sub)
    _add_job_commands(sub)
    cli_agents.add_commands(sub, _store, _command)
    cli_engines.add_commands(sub, _store)
    _add_pull_commands(sub)
    _add_db_commands(sub)
    return parser


def _add_engine_commands(sub: Any) -> None:
    """Set up, submit, run and look: what a workspace is used with."""
    sub.add_parser("init", help="write relay.toml and an example job").set_defaults(func=cmd_init)
    submit = sub.add_parser("submit", help="submit job files")
    submit.add_argument("files", nargs="+")
    submit.set_defaults(func=cmd_submit)
    run = sub.add_parser("run", help="run the engine (Ctrl-C stops)")
    run.add_argument(
        "--until-idle", action="store_true", help="exit when nothing is queued or running"
    )
    run.add_argument("--quiet", action="store_true", help="do not print events")
    run.set_defaults(func=cmd_run)
    status = sub.add_parser("status", help="jobs, tasks and providers")
    status.add_argument("job", nargs="?", help="a job, or JOB/TASK for one task and its runs")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    usage = sub.add_parser("usage", help="tokens and cost by job, task, agent, provider or day")
    usage.add_argument("--by", choices=GROUPINGS, default="job")
    usage.add_argument("--since", help="only executions started on or after this date")
    usage.add_argument("--job", help="only this job")
    usage.add_argument("--json", action="store_true")
    usage.set_defaults(func=cmd_usage)
    events = sub.add_parser("events", help="the event log")
    events.add_argument("--follow", "-f", action="store_true")
    events.add_argument("--limit", "-n", type=int, default=0)
    events.set_defaults(func=cmd_events)


def _add_task_commands(sub: Any) -> None:
    for name, model, helptext in (
        ("cancel", commands.CancelTask, "cancel a task"),
        ("retry", commands.RetryTask, "retry a task"),
    ):
        command = sub.add_parser(name, help=helptext)
        command.add_argument("task", help="JOB/TASK")
        command.set_defaults(func=_command(_task_command(model)))
    pin = sub.add_parser("pin", help="pin a workstream (or JOB/TASK) to an agent")
    pin.add_argument("job", help="JOB, or JOB/TASK to pin one task")
    pin.add_argument("workstream", nargs="?", default="")
    pin.add_argument("agent")
    pin.add_argument("--role", default="implementer")
    pin.set_defaults(func=_command(_pin_command))


def _add_job_commands(sub: Any) -> None:
    cancel_job = sub.add_parser("cancel-job", help="cancel a whole job")
    cancel_job.add_argument("job")
    cancel_job.set_defaults(func=_command(lambda a: commands.CancelJob(job=a.job)))
    replan = sub.add_parser("replan", help="start a new planner round with guidance")
    replan.add_argument("job")
    replan.add_argument("--guidance", "-g", default="", help="what the planner should change")
    replan.set_defaults(func=_command(lambda a: commands.Replan(job=a.job, guidance=a.guidance)))
    budget = sub.add_parser("budget", help="raise a job's budget; work parked on it resumes")
    budget.add_argument("job")
    budget.add_argument("--add", type=float, dest="add_usd", help="dollars to add")
    budget.add_argument("--tokens", type=int, dest="add_tokens", help="tokens to add")
    budget.set_defaults(
        func=_command(
            lambda a: commands.RaiseBudget(job=a.job, add_usd=a.add_usd, add_tokens=a.add_tokens)
        )
    )
    approve = sub.add_parser("approve", help="approve the next wave of a gated job")
    approve.add_argument("job")
    approve.set_defaults(func=_command(lambda a: commands.ApproveWave(job=a.job)))
    plan = sub.add_parser("plan", help="install a plan written by hand")
    plan.add_argument("job")
    plan.add_argument("--file", "-f", required=True, help="plan TOML or JSON")
    plan.set_defaults(func=_command(_plan_command))


def _add_db_commands(sub: Any) -> None:
    db = sub.add_parser("db", help="the database's schema").add_subparsers(
        dest="db_command", required=True
    )
    db.add_parser(
        "upgrade", help="migrate to this relay's schema (stop older engines first)"
    ).set_defaults(func=cmd_db_upgrade)
    db.add_parser(
        "current", help="the schema revision, and whether it is this relay's"
    ).set_defaults(func=cmd_db_current)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    sys.exit(main())

"""``relay status``: a point-in-time report of jobs, tasks, providers, plans, agents and
engines, rendered from the read model (:mod:`relay_engine.store.read_model`) as the JSON
that ``relay status --json`` prints and the tables print from.

Each job carries ``pr`` (its pull request: forge, number/url, state, head, mergeable, and
the ``note`` saying why it waits) and ``review`` (the latest final review: round, verdict,
the head it saw, whether that head is still current, summary and findings). Each task
carries ``last_execution`` (outcome, error and ``artifact_dir``, where prompt.md, the
output and, for a start that failed before the agent ran, error.txt are). Asked about one
task (``JOB/TASK``), the report lists only that task, with all its ``executions``. ``engines``
lists the engines on the database, live and recently gone (see :mod:`relay_engine.store.engines`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from sqlmodel import Session

from relay_engine.cli import engines as cli_engines
from relay_engine.cli.asks import ask_json, asks_table
from relay_engine.cli.output import console, err, open_store, workspace_of
from relay_engine.contracts.config import EngineConfig, load_config
from relay_engine.contracts.review import finding_lines
from relay_engine.contracts.time_format import format_time, limit_words
from relay_engine.core.waits import Wait
from relay_engine.loop.health import low_space
from relay_engine.ops.notes import read_notes
from relay_engine.store.db import Store
from relay_engine.store.engines import EngineRow, read_engines
from relay_engine.store.read_model.agents import agent_rows
from relay_engine.store.read_model.asks import AskView, read_added_rules, read_asks
from relay_engine.store.read_model.executions import ExecutionView, read_executions
from relay_engine.store.read_model.jobs import JobView, read_jobs
from relay_engine.store.read_model.plans import PlanView, read_plans
from relay_engine.store.read_model.providers import LimitView, read_limits, read_quota
from relay_engine.store.read_model.spend import SpendView, spend_by
from relay_engine.store.read_model.tasks import TaskView, read_tasks
from relay_engine.store.read_model.waits import read_waits
from relay_engine.store.schema import Execution, Schedule

BUDGET_WARN_AT = EngineConfig().budget_warn_at
LEASE_SECONDS = EngineConfig().lease_seconds
Report = dict[str, list[dict[str, Any]]]


def status_report(
    store: Store,
    job_id: str | None = None,
    *,
    lease_seconds: float = LEASE_SECONDS,
    budget_warn_at: float = BUDGET_WARN_AT,
) -> Report:
    """``job_id``: a job, or ``JOB/TASK`` for one task with all its runs. ``lease_seconds``:
    the silence after which an engine counts as gone; ``budget_warn_at``: the share of a
    budget that warns (both from the workspace's relay.toml when the caller has it)."""
    job, _, task = (job_id or "").partition("/")
    now = time.time()
    with store.read() as session:
        report = _read(session, job or None, task or None, budget_warn_at, lease_seconds)
        report["agents"] = [row.as_dict() for row in agent_rows(session, now)]
        report["quota"] = [asdict(q) for q in read_quota(session, None, now)]
        engines = read_engines(session, now=now, lease_seconds=lease_seconds)
    report["engines"] = [e.as_dict() for e in engines]
    report["conditions"] = conditions(store, [e for e in engines if e.why_gone != "stopped"])
    return report


def _read(
    session: Session, job_id: str | None, task_id: str | None, warn_at: float, lease_s: float
) -> Report:
    jobs = read_jobs(session, job_ids=[job_id] if job_id else None, warn_at=warn_at)
    scope = [j.id for j in jobs] if job_id else None
    tasks = read_tasks(session, job_ids=scope, clip=False)
    if task_id:
        tasks = [t for t in tasks if t.task_id == task_id]
    keys = {t.key for t in tasks}
    spend = spend_by(session, Execution.task_key, keys, with_models=True)
    runs: dict[str, list[ExecutionView]] = {}
    for run in read_executions(session, job_id=job_id):
        if run.task_key:
            runs.setdefault(run.task_key, []).append(run)
    open_asks = [a for a in read_asks(session, job_id=job_id) if a.task_key in keys or not task_id]
    waiting: dict[str, list[str]] = {}
    for ask in open_asks:
        waiting.setdefault(ask.task_key or "", []).append(ask.waiting)
    found = read_waits(session, job_id=job_id, lease_seconds=lease_s)
    waits = {w.subject: _wait(w) for w in found}
    return {
        "jobs": [{**_job(j), "wait": waits.get(f"job {j.id}")} for j in jobs],
        "tasks": [
            _task(t, spend, runs.get(t.key, []), waiting.get(t.key, []), all_runs=bool(task_id))
            | {"wait": waits.get(f"task {t.key}")}
            for t in tasks
        ],
        "asks": [ask_json(a) for a in open_asks],
        "rules": [asdict(r) for r in read_added_rules(session, job_id=job_id)],
        "providers": [_provider(p) for p in read_limits(session)],
        "plans": [_plan(p) for p in read_plans(session, job_ids=scope)],
    }


def _wait(wait: Wait) -> dict[str, Any]:
    return {
        "what": wait.what, "until": wait.until, "release": wait.release, "note": wait.note(),
        "line": wait.line(),
    }  # fmt: skip


def conditions(store: Store, engines: list[EngineRow]) -> list[dict[str, Any]]:
    """What holds engines up: what they recorded, and a full disk under the database, which
    an engine cannot record precisely because the disk is full."""
    found = [
        {"engine": e.id, "host": e.host, "pid": e.pid, "condition": e.condition}
        for e in engines
        if e.condition
    ]
    path = store.sqlite_path
    full = low_space(Path(path).parent) if path else None
    if full and not any(c["condition"] == full for c in found):
        found.append({"engine": None, "host": None, "pid": None, "condition": full})
    return found


def spend_json(spend: SpendView) -> dict[str, Any]:
    return {
        "executions": spend.executions,
        "input_tokens": spend.input_tokens,
        "output_tokens": spend.output_tokens,
        "cached_tokens": spend.cached_tokens,
        "cost_usd": round(spend.cost_usd, 6),
        "estimated": spend.estimated,
        "unpriced_executions": spend.unpriced,
        "models": list(spend.models),
    }


def _job(job: JobView) -> dict[str, Any]:
    return {
        "id": job.id,
        "title": job.title,
        "state": job.state,
        "mode": job.mode,
        "priority": job.priority,
        "wave_gate": job.wave_gate,
        "approved_wave": job.approved_wave,
        "after": list(job.after),
        "blocked_by": job.blocked_by,
        "error": job.error,
        "head_sha": job.head_sha,
        "auto_merge": job.auto_merge,
        "review_enabled": job.review_enabled,
        "pr": asdict(job.pr) if job.pr else None,
        "review": _review(job),
        "spend": spend_json(job.spend),
        "budget": {
            "usd": job.budget_usd,
            "tokens": job.budget_tokens,
            "level": job.budget.level,
            "text": job.budget.text,
            "fraction": job.budget.fraction,
        },
    }


def _review(job: JobView) -> dict[str, Any] | None:
    review = job.review
    if review is None:
        return None
    return {
        "round": review.round,
        "task": review.task,
        "head_sha": review.head_sha,
        "verdict": review.verdict,
        "stale": review.stale,
        "summary": review.summary,
        "findings": [dict(f) for f in review.findings],
    }


EXECUTION_FIELDS = ("id", "attempt", "agent", "outcome", "exit_code", "error", "artifact_dir")


def _task(
    task: TaskView,
    spend: dict[str, SpendView],
    runs: list[ExecutionView],
    waiting: list[str],
    *,
    all_runs: bool,
) -> dict[str, Any]:
    shown = [{name: getattr(run, name) for name in EXECUTION_FIELDS} for run in runs]
    body = {
        "job_id": task.job_id,
        "id": task.task_id,
        "key": task.key,
        "title": task.title,
        "state": task.state,
        "attempt": task.attempt,
        "max_attempts": task.max_attempts,
        "agent": task.agent,
        "provider": task.provider,
        "role": task.role,
        "priority": task.priority,
        "workstream": task.workstream,
        "wave": task.wave,
        "dependencies": [
            *task.dependencies,
            *(dep if "/" in dep else f"job {dep}" for dep in task.external_deps),
        ],
        "blocked_by": task.blocked_by,
        "not_before": task.not_before,
        "waiting_on_provider": task.waiting_on_provider,
        "result": task.result_summary,
        "error": task.error,
        "plan_id": task.plan_id,
        "kind": task.kind,
        "troubleshoots": task.parent_key,
        "guidance": task.guidance,
        "held_by": task.held_by,
        "held_at": task.held_at,
        "waiting_on_you": waiting,
        "spend": spend_json(spend.get(task.key, SpendView())),
        "last_execution": shown[-1] if shown else None,
    }
    if all_runs:
        body["executions"] = [_ran_in(run) for run in shown]
    return body


def _ran_in(run: dict[str, Any]) -> dict[str, Any]:
    """One run with the sandbox its prompt-packet.json records (None: no packet, or a run
    from before sandboxes), for the single task's view, where runs are few."""
    try:
        packet = json.loads((Path(run["artifact_dir"] or "") / "prompt-packet.json").read_text())
        sandbox = packet.get("sandbox") if isinstance(packet, dict) else None
    except (OSError, ValueError):
        sandbox = None
    return {**run, "sandbox": sandbox if isinstance(sandbox, dict) else None}


def sandbox_line(sandbox: dict[str, Any]) -> str:
    """``bwrap, network off, writes …`` or ``none (why)``: what the run could touch."""
    if sandbox.get("kind") != "bwrap":
        return f"none ({sandbox.get('why', 'not recorded')}), network {sandbox.get('network')}"
    writable = ", ".join(sandbox.get("writable") or []) or "nothing"
    return f"bwrap, network {sandbox.get('network')}, writes {writable}"


def _provider(limit: LimitView) -> dict[str, Any]:
    return asdict(limit)


def _plan(plan: PlanView) -> dict[str, Any]:
    return {
        "id": plan.id,
        "job_id": plan.job_id,
        "round": plan.round,
        "trigger": plan.trigger,
        "guidance": plan.guidance,
        "status": plan.status,
        "objective_status": plan.objective_status,
        "generated_task_ids": list(plan.generated_task_ids),
        "error": plan.error,
    }


# -- printing -------------------------------------------------------------------------------
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
    "HELD": "bold yellow",
}


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", help="a job, or JOB/TASK for one task and its runs")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    store = open_store(args, readonly=True)
    report = report_for(store, args.job, load_config(workspace_of(args)).engine)
    if args.job and not (report["tasks"] if "/" in args.job else report["jobs"]):
        with store.read() as session:
            known = ", ".join(j.id for j in read_jobs(session)) or "none yet"
            scheduled = session.get(Schedule, args.job) is not None
        what = "task" if "/" in args.job else "job"
        if scheduled:  # a template: its runs are the jobs
            err.print(f"[red]error:[/] {escape(args.job)} is a scheduled job: its runs are "
                      f"jobs {escape(args.job)}@SLOT (relay schedules lists them)")  # fmt: skip
            return 2
        err.print(f"[red]error:[/] no {what} {escape(args.job)} (jobs: {escape(known)})")
        return 2
    notes = _notes(store, args.job) if args.job and "/" not in args.job else None
    if args.json:
        print(json.dumps({**report, **({"notes": notes} if notes is not None else {})}, indent=2))
        return 0
    print_status(store, report)
    for note in notes or []:
        console.print(f"\n[bold]{note['key']}[/] [dim]({escape(note['where'])})[/]")
        console.print(escape(note["body"]), highlight=False, soft_wrap=True)
    return 0


def _notes(store: Store, job_id: str) -> list[dict[str, str]]:
    """What relay writes back on the job's pull request: the local forge's record of it."""
    with store.read() as session:
        return [view.as_dict() for view in read_notes(session, job_id)]


def report_for(store: Store, job_id: str | None, engine: EngineConfig) -> dict[str, Any]:
    """The status report, judged by this workspace's lease and budget warning share."""
    return status_report(
        store, job_id, lease_seconds=engine.lease_seconds, budget_warn_at=engine.budget_warn_at
    )


def print_status(store: Store, report: dict[str, list[dict[str, Any]]]) -> None:
    for held in report["conditions"]:
        who = f"engine {held['engine']} (pid {held['pid']} on {held['host']})"
        where = who if held["engine"] else store.where
        err.print(f"[yellow]{escape(where)}: {escape(held['condition'])}[/]")
    if not report["jobs"]:
        console.print(
            "no jobs yet: [bold]relay submit JOB.toml[/] (or [bold]relay init[/] for an example)"
        )
    for job in report["jobs"]:
        tasks = [t for t in report["tasks"] if t["job_id"] == job["id"]]
        console.print(_job_table(job, tasks), highlight=False)  # its cells are styled already
        for line in execution_lines(tasks):
            console.print(escape(line), highlight=False, soft_wrap=True)  # whole paths
    if report["asks"]:
        console.print(asks_table([AskView(**a) for a in report["asks"]], time.time()))
    for rule in report["rules"]:
        console.print(f"always ({rule['created_by'] or 'operator'}): {rule['scope']} "
                      f"{rule['target']}: {rule['effect']} {rule['rule']}", markup=False)  # fmt: skip
    for provider in report["providers"]:
        if provider["status"] == "limited":
            reset = format_time(provider["reset_at"])
            name = provider.get("key") or provider["provider"]
            console.print(f"provider [bold]{name}[/] limited until {reset}")
    for window in report.get("quota", []):
        if window["holding"]:
            console.print(f"quota [bold]{window['key']}[/]: {escape(window['reason'] or '')}")
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
        title=f"{job['id']}: {escape(job['title'])} [{job['state']}]",
        title_justify="left",
        caption=escape("\n".join(pull_lines(job))) or None,
        caption_justify="left",
    )
    for column in ("task", "wave", "state", "attempt", "agent", "note"):
        table.add_column(column, no_wrap=column in ("wave", "state", "attempt"))
    if job.get("wait"):
        table.caption = escape("\n".join([*pull_lines(job), job["wait"]["line"]]))
    for task in tasks:  # Text cells: no id or agent is parsed (or misread) as markup
        table.add_row(
            Text(task["id"]),
            Text(str(task["wave"])),
            Text(task["state"], style=STATE_STYLES.get(task["state"], "")),
            Text(f"{task['attempt']}/{task['max_attempts']}"),
            Text(task["agent"] or ""),
            Text(task_note(task)[:80]),
        )
    return table


def task_note(task: dict[str, Any]) -> str:
    """Why a task is where it is, most pressing first: the operator, a block, a wait."""
    if task["waiting_on_you"]:
        return "; ".join(task["waiting_on_you"])
    if task["held_by"]:
        return f"held by {task['held_by']} since {format_time(task['held_at'])}"
    if wait := task.get("wait"):
        return f"waits for {wait['note']}"
    if task["blocked_by"]:
        return f"blocked by {task['blocked_by']}"
    if task["waiting_on_provider"]:
        return f"waiting on {task['waiting_on_provider']}"
    return limit_words(task["error"], time.time()) or task["result"] or ""


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
                    f"{run['outcome'] or 'running'}{code} {limit_words(run['error'])}".rstrip()
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

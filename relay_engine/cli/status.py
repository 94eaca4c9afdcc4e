"""A point-in-time report of jobs, tasks, providers and plans (``relay status``).

Each job carries ``pr`` (its pull request: forge, number/url, state, head, mergeable, and
the ``note`` saying why it waits) and ``review`` (the latest final review: round, verdict,
the head it saw, whether that head is still current, summary and findings). Each task
carries ``last_execution`` (outcome, error and ``artifact_dir``, where prompt.md, the
output and, for a start that failed before the agent ran, error.txt are). Asked about one
task (``JOB/TASK``), the report lists only that task, with all its ``executions``. ``engines``
lists the engines on the database, live and recently gone (see :mod:`relay_engine.store.engines`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from relay_engine.contracts.config import EngineConfig
from relay_engine.loop.health import low_space
from relay_engine.ops.agents import agent_rows
from relay_engine.ops.budgets import Cap, Spend, judge
from relay_engine.ops.pulls import pull_summaries
from relay_engine.store.db import Store
from relay_engine.store.engines import EngineRow, read_engines
from relay_engine.store.schema import Execution, Job, Plan, ProviderLimit, Task
from relay_engine.store.usage import UsageRow, read_usage, rollup

BUDGET_WARN_AT = EngineConfig().budget_warn_at
LEASE_SECONDS = EngineConfig().lease_seconds


def status_report(
    store: Store,
    job_id: str | None = None,
    *,
    lease_seconds: float = LEASE_SECONDS,
    budget_warn_at: float = BUDGET_WARN_AT,
) -> dict[str, list[dict[str, Any]]]:
    """``lease_seconds``: the silence after which an engine counts as gone;
    ``budget_warn_at``: the share of a budget that warns (both from the workspace's
    relay.toml when the caller has it)."""
    with store.read() as session:
        jobs = session.exec(select(Job).order_by(Job.created_at)).all()
        tasks = session.exec(select(Task).order_by(Task.job_id, Task.wave, Task.created_at)).all()
        limits = session.exec(select(ProviderLimit).order_by(ProviderLimit.provider)).all()
        plans = session.exec(select(Plan).order_by(Plan.job_id, Plan.round)).all()
        agents = [row.as_dict() for row in agent_rows(session, time.time())]
        engines = read_engines(session, now=time.time(), lease_seconds=lease_seconds)
        job_id, _, task_id = (job_id or "").partition("/")
        if job_id:
            jobs = [j for j in jobs if j.id == job_id]
            tasks = [t for t in tasks if t.job_id == job_id]
            plans = [p for p in plans if p.job_id == job_id]
        if task_id:
            tasks = [t for t in tasks if t.task_id == task_id]
        runs = _executions(session, job_id or None)
        pulls = pull_summaries(session, [j.id for j in jobs])
    records = read_usage(store, job_id=job_id or None)
    by_job = {row.key: row for row in rollup(records, "job")}
    by_task = {row.key: row for row in rollup(records, "task")}
    return {
        "jobs": [
            {
                **_job(j),
                **pulls[j.id],
                "spend": _spend(by_job.get(j.id)),
                "budget": _budget(j, by_job, budget_warn_at),
            }
            for j in jobs
        ],
        "tasks": [
            {
                **_task(t),
                "spend": _spend(by_task.get(t.key)),
                "last_execution": (runs.get(t.key) or [None])[-1],
                **({"executions": [_ran_in(r) for r in runs.get(t.key, [])]} if task_id else {}),
            }
            for t in tasks
        ],
        "providers": [_provider(p) for p in limits],
        "plans": [_plan(p) for p in plans],
        "agents": agents,
        "engines": [e.as_dict() for e in engines],
        "conditions": conditions(store, [e for e in engines if e.why_gone != "stopped"]),
    }


EXECUTION_FIELDS = ("id", "attempt", "agent", "outcome", "exit_code", "error", "artifact_dir")


def _executions(session: Any, job_id: str | None) -> dict[str, list[dict[str, Any]]]:
    """Each task's executions, oldest first (one not yet started last): the report's columns."""
    columns = [getattr(Execution, name) for name in EXECUTION_FIELDS]
    query = select(Execution.task_key, *columns).where(col(Execution.task_key).is_not(None))
    if job_id:
        query = query.where(col(Execution.job_id) == job_id)
    query = query.order_by(col(Execution.started_at).asc().nulls_last(), col(Execution.id))
    runs: dict[str, list[dict[str, Any]]] = {}
    for key, *values in session.exec(query):
        runs.setdefault(key, []).append(dict(zip(EXECUTION_FIELDS, values, strict=True)))
    return runs


def _ran_in(run: dict[str, Any]) -> dict[str, Any]:
    """One run with the sandbox its prompt-packet.json records (None: no packet, or a run
    from before sandboxes), for the single task's view, where runs are few."""
    try:
        packet = json.loads((Path(run["artifact_dir"] or "") / "prompt-packet.json").read_text())
        sandbox = packet.get("sandbox") if isinstance(packet, dict) else None
    except (OSError, ValueError):
        sandbox = None
    return {**run, "sandbox": sandbox if isinstance(sandbox, dict) else None}


def _spend(row: UsageRow | None) -> dict[str, Any]:
    spend = (row or UsageRow("")).as_json()
    del spend["key"]
    return spend


def _budget(job: Job, by_job: dict[str, UsageRow], warn_at: float) -> dict[str, Any]:
    row = by_job.get(job.id) or UsageRow(job.id)
    spend = Spend(row.cost_usd, row.input_tokens + row.output_tokens)
    state = judge(spend, Cap(job.budget_usd, job.budget_tokens), warn_at)
    return {
        "usd": job.budget_usd,
        "tokens": job.budget_tokens,
        "level": state.level,
        "text": state.text,
        "fraction": round(state.fraction, 4),
    }


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


def _job(job: Job) -> dict[str, Any]:
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
    }


def _task(task: Task) -> dict[str, Any]:
    return {
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
        "dependencies": [*task.dependencies, *task.external_deps],
        "blocked_by": task.blocked_by,
        "not_before": task.not_before,
        "waiting_on_provider": task.waiting_on_provider,
        "result": task.result_summary,
        "error": task.error,
        "plan_id": task.plan_id,
        "kind": task.kind,
        "troubleshoots": task.parent_key,
        "guidance": task.guidance,
    }


def _provider(limit: ProviderLimit) -> dict[str, Any]:
    return {
        "provider": limit.provider,
        "status": limit.status,
        "reset_at": limit.reset_at,
        "source_text": limit.source_text,
    }


def _plan(plan: Plan) -> dict[str, Any]:
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

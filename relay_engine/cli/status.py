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

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlmodel import Session

from relay_engine.contracts.config import EngineConfig
from relay_engine.loop.health import low_space
from relay_engine.store.db import Store
from relay_engine.store.engines import EngineRow, read_engines
from relay_engine.store.read_model import (
    ExecutionView,
    JobView,
    LimitView,
    PlanView,
    SpendView,
    TaskView,
    agent_rows,
    read_executions,
    read_jobs,
    read_limits,
    read_plans,
    read_tasks,
    spend_by,
)
from relay_engine.store.schema import Execution

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
        report = _read(session, job or None, task or None, budget_warn_at)
        report["agents"] = [row.as_dict() for row in agent_rows(session, now)]
        engines = read_engines(session, now=now, lease_seconds=lease_seconds)
    report["engines"] = [e.as_dict() for e in engines]
    report["conditions"] = conditions(store, [e for e in engines if e.why_gone != "stopped"])
    return report


def _read(session: Session, job_id: str | None, task_id: str | None, warn_at: float) -> Report:
    jobs = read_jobs(session, job_ids=[job_id] if job_id else None, warn_at=warn_at)
    scope = [j.id for j in jobs] if job_id else None
    tasks = read_tasks(session, job_ids=scope, clip=False)
    if task_id:
        tasks = [t for t in tasks if t.task_id == task_id]
    spend = spend_by(session, Execution.task_key, [t.key for t in tasks], with_models=True)
    runs: dict[str, list[ExecutionView]] = {}
    for run in read_executions(session, job_id=job_id):
        if run.task_key:
            runs.setdefault(run.task_key, []).append(run)
    return {
        "jobs": [_job(j) for j in jobs],
        "tasks": [_task(t, spend, runs.get(t.key, []), all_runs=bool(task_id)) for t in tasks],
        "providers": [_provider(p) for p in read_limits(session)],
        "plans": [_plan(p) for p in read_plans(session, job_ids=scope)],
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
    task: TaskView, spend: dict[str, SpendView], runs: list[ExecutionView], *, all_runs: bool
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
        "spend": spend_json(spend.get(task.key, SpendView())),
        "last_execution": shown[-1] if shown else None,
    }
    if all_runs:
        body["executions"] = shown
    return body


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

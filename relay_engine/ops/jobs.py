"""Storing submitted jobs: idempotent, all-or-nothing, with waves computed up front."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, select

from relay_engine.contracts.config import EngineConfig
from relay_engine.contracts.job_file import JobSpec
from relay_engine.contracts.task_definitions import (
    TaskDef,
    definition_hash,
    external_deps,
    local_deps,
)
from relay_engine.core.scheduler import waves
from relay_engine.core.states import JobState, TaskState
from relay_engine.store.db import Store, record_event
from relay_engine.store.schema import Job, Task

STORY_TIMEOUTS_S = {"S": 15 * 60, "M": 30 * 60, "L": 60 * 60, "XL": 120 * 60}


class JobConflict(ValueError):
    """A different job was submitted under an id that is already taken."""


@dataclass(frozen=True)
class SubmitOutcome:
    job_id: str
    created: bool
    task_count: int


def task_key(job_id: str, task_id: str) -> str:
    return f"{job_id}/{task_id}"


def split_key(key: str) -> tuple[str, str]:
    """``JOB/TASK`` -> (job, task); a clear error for anything else."""
    job_id, sep, task_id = key.partition("/")
    if not sep or not job_id or not task_id:
        raise ValueError(f"{key!r} is not a task address; write it as JOB/TASK")
    return job_id, task_id


def submit_job(
    store: Store, spec: JobSpec, *, now: float, engine: EngineConfig | None = None
) -> SubmitOutcome:
    """Store a job and its tasks in one transaction, or nothing at all.

    ``engine`` gives the workspace's default budgets to a job that names none."""
    job_def = spec.job
    with store.write() as session:
        existing = session.get(Job, job_def.id)
        if existing is not None:
            if existing.spec_hash == spec.spec_hash():
                return SubmitOutcome(job_def.id, created=False, task_count=len(spec.tasks))
            raise JobConflict(
                f"{spec.source}: job {job_def.id!r} already exists with a different definition "
                f"(submitted from {existing.source_path}); choose another id"
            )
        session.add(
            Job(
                id=job_def.id,
                title=job_def.title,
                objective=job_def.objective,
                repo_path=job_def.repo,
                base_branch=job_def.base_branch,
                priority=job_def.priority,
                mode=job_def.mode,
                wave_gate=job_def.wave_gate,
                auto_merge=job_def.auto_merge,
                review_enabled=job_def.review,
                max_review_rounds=job_def.max_review_rounds,
                state=JobState.DRAFT if job_def.after else JobState.ACTIVE,
                after=list(job_def.after),
                troubleshoot=job_def.troubleshoot,
                budget_usd=_first(job_def.budget_usd, engine and engine.default_budget_usd),
                budget_tokens=_first(
                    job_def.budget_tokens, engine and engine.default_budget_tokens
                ),
                spec_hash=spec.spec_hash(),
                source_path=str(spec.source),
                max_plan_rounds=job_def.max_plan_rounds,
                sim=job_def.sim,
                created_at=now,
                updated_at=now,
            )
        )
        add_tasks(session, job_def.id, job_def.priority, spec.tasks, now=now)
        waits = f", waiting on {', '.join(job_def.after)}" if job_def.after else ""
        record_event(
            session,
            "job.submitted",
            f"job {job_def.id} submitted with {len(spec.tasks)} tasks{waits}",
            now=now,
            job_id=job_def.id,
        )
    return SubmitOutcome(job_def.id, created=True, task_count=len(spec.tasks))


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def add_tasks(
    session: Session,
    job_id: str,
    job_priority: str,
    tasks: tuple[TaskDef, ...] | list[TaskDef],
    *,
    now: float,
    plan_id: int | None = None,
) -> list[Task]:
    """Insert DRAFT tasks; readiness queues them on the next tick."""
    existing_waves = _existing_waves(session, job_id) if plan_id is not None else {}
    graph = {t.id: local_deps(t.depends_on) for t in tasks}
    depth = waves(graph)
    offset = max(existing_waves.values(), default=0)
    rows = []
    for index, definition in enumerate(tasks):
        row = Task(
            key=task_key(job_id, definition.id),
            job_id=job_id,
            task_id=definition.id,
            kind=definition.kind,
            title=definition.title or definition.id,
            input=definition.input,
            role=definition.role,
            model_class=definition.model_class,
            workstream=definition.workstream,
            priority=definition.priority or job_priority,
            story_size=definition.size,
            dependencies=local_deps(definition.depends_on),
            external_deps=external_deps(definition.depends_on),
            state=TaskState.DRAFT,
            max_attempts=definition.max_attempts,
            timeout_s=definition.timeout,
            pinned_agent=definition.agent,
            plan_id=plan_id,
            wave=offset + depth.get(definition.id, 1),
            spec_hash=definition_hash(definition, job_priority),
            sim=definition.sim,
            # created_at orders tasks of equal priority; the index keeps file order stable.
            created_at=now + index * 1e-6,
            updated_at=now,
        )
        session.add(row)
        rows.append(row)
    return rows


def _existing_waves(session: Session, job_id: str) -> dict[str, int]:
    rows = session.exec(select(Task.task_id, Task.wave).where(Task.job_id == job_id))
    return dict(rows.all())


def timeout_for(task: Task) -> float:
    return task.timeout_s or STORY_TIMEOUTS_S.get(task.story_size, STORY_TIMEOUTS_S["M"])

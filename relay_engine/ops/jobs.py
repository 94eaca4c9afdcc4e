"""Operations on whole jobs: submit one (idempotent, all-or-nothing, waves computed up
front), cancel one, cancel what is left of one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from sqlmodel import Session, select

from relay_engine.contracts.config import EngineConfig
from relay_engine.contracts.job_file import JobSpec
from relay_engine.core.states import ACTIVE_TASK_STATES, TERMINAL_JOB_STATES, JobState, PlanState
from relay_engine.ops.plans import fail_plan
from relay_engine.ops.refusals import Refused
from relay_engine.ops.tasks import cancel_task
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, Plan, Schedule
from relay_engine.store.task_rows import insert_tasks, job_tasks


class JobConflict(ValueError):
    """A different job was submitted under an id that is already taken."""


@dataclass(frozen=True)
class SubmitOutcome:
    job_id: str
    created: bool
    task_count: int


def submit_job(
    store: Store, spec: JobSpec, *, now: float, engine: EngineConfig | None = None
) -> SubmitOutcome:
    """Store a job and its tasks in one transaction, or nothing at all; a job file with a
    ``schedule`` is stored as a template instead (:mod:`relay_engine.ops.schedules`).

    ``engine`` gives the workspace's default budgets to a job that names none."""
    if spec.job.schedule is not None:
        from relay_engine.ops.schedules import submit_schedule

        return submit_schedule(store, spec, now=now)
    job_def = spec.job
    with store.write(wakes=True) as session:
        existing = session.get(Job, job_def.id)
        if existing is not None:
            if existing.spec_hash == spec.spec_hash():
                return SubmitOutcome(job_def.id, created=False, task_count=len(spec.tasks))
            raise JobConflict(
                f"{spec.source}: job {job_def.id!r} already exists with a different definition "
                f"(submitted from {existing.source_path}); choose another id"
            )
        if session.get(Schedule, job_def.id) is not None:
            raise JobConflict(
                f"{spec.source}: job {job_def.id!r} is a scheduled job's id; choose another id"
            )
        add_job(session, spec, job_id=job_def.id, now=now, engine=engine)
    return SubmitOutcome(job_def.id, created=True, task_count=len(spec.tasks))


def add_job(
    session: Session,
    spec: JobSpec,
    *,
    job_id: str,
    now: float,
    engine: EngineConfig | None,
    why: str = "",
) -> Job:
    """The job row, its tasks and the submitted event, in the caller's transaction: what a
    submit and a schedule's run share (a run's ``job_id`` is ``<template>@<slot>``)."""
    job_def = spec.job
    job = Job(
        id=job_id,
        title=job_def.title
        if job_id == job_def.id
        else f"{job_def.title} @ {job_id.rpartition('@')[2]}",
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
        budget_usd=_first(job_def.budget_usd, engine.default_budget_usd if engine else None),
        budget_tokens=_first(
            job_def.budget_tokens, engine.default_budget_tokens if engine else None
        ),
        spec_hash=spec.spec_hash(),
        source_path=str(spec.source),
        max_plan_rounds=job_def.max_plan_rounds,
        sim=job_def.sim,
        created_at=now,
        updated_at=now,
    )
    session.add(job)
    insert_tasks(session, job_id, job_def.priority, spec.tasks, now=now)
    waits = f", waiting on {', '.join(job_def.after)}" if job_def.after else ""
    record_event(
        session,
        EventKind.JOB_SUBMITTED,
        f"job {job_id} submitted with {len(spec.tasks)} tasks{waits}{why}",
        now=now,
        job_id=job_id,
    )
    return job


_T = TypeVar("_T")


def _first(*values: _T | None) -> _T | None:
    return next((v for v in values if v is not None), None)


def find_job(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise Refused(f"no job {job_id}")
    return job


def cancel_job(session: Session, job: Job, now: float) -> str:
    if job.state in TERMINAL_JOB_STATES:
        raise Refused(f"job {job.id} is already {job.state}")
    cancel_unfinished(session, job.id, "job cancelled", now)
    move_job(session, job, JobState.CANCELLED, now=now)
    return f"cancelled job {job.id}"


def cancel_unfinished(session: Session, job_id: str, reason: str, now: float) -> int:
    """Cancel a job's unfinished tasks and fail its running planner rounds; how many tasks."""
    tasks = job_tasks(session, job_id, ACTIVE_TASK_STATES)
    for task in tasks:
        cancel_task(session, task, reason, now, with_dependents=False)
    for plan in session.exec(
        select(Plan).where(Plan.job_id == job_id, Plan.status == PlanState.PLANNING)
    ):
        fail_plan(session, plan, reason, now)
    return len(tasks)

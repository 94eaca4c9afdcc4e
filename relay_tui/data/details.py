"""Reads for the task and job screens, run in their workers (they may touch many rows).

They return the read model's typed views (:mod:`relay_engine.store.read_model`), whole
where the tables clip them, so nothing above :mod:`relay_tui.data` holds an ORM row or a
session.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from relay_engine.core.waits import Wait
from relay_engine.store.db import Store
from relay_engine.store.engines import EngineRow, engine_rows, job_engines
from relay_engine.store.read_model.executions import ExecutionView
from relay_engine.store.read_model.jobs import JobView, read_jobs
from relay_engine.store.read_model.plans import PlanView, read_plans
from relay_engine.store.read_model.pulls import ReviewView, read_reviews
from relay_engine.store.read_model.tasks import TaskView, read_task_detail, read_tasks
from relay_engine.store.read_model.waits import read_waits
from relay_engine.store.schema import EngineRecord, Event, Execution, Job, Task
from relay_tui.data.projection import event_view
from relay_tui.data.snapshot import EventView


@dataclass(frozen=True)
class TaskDetail:
    """One task in full; ``task`` is None when there is no such task."""

    task: TaskView | None
    input: str = ""
    diffstat: str | None = None
    executions: tuple[ExecutionView, ...] = ()
    """The latest runs, newest first."""
    job: JobView | None = None
    events: tuple[EventView, ...] = ()
    wait: Wait | None = None
    """What it waits for, until when, and the command that releases it."""


@dataclass(frozen=True)
class JobDetail:
    """One job for the job view; ``job`` is None when there is no such job."""

    job: JobView | None
    tasks: tuple[TaskView, ...] = ()
    """In creation order: the graph chains review, fix and rebase work in that order."""
    plans: tuple[PlanView, ...] = ()
    reviews: tuple[ReviewView, ...] = ()
    upstream: Mapping[str, str] = field(default_factory=dict)
    """States of what this job waits on in other jobs: job ids (``after``) and "JOB/TASK"
    keys (tasks' ``external_deps``)."""
    engines: tuple[EngineRow, ...] = ()
    """Engines holding the job's claimed tasks."""
    waits: tuple[Wait, ...] = ()
    """What the job and its tasks wait for (the job's own wait first)."""


def task_detail(store: Store, key: str, event_limit: int = 200) -> TaskDetail:
    """Everything the detail screen shows about one task."""
    with store.read() as session:
        found = read_task_detail(session, key)
        if found is None:
            return TaskDetail(None)
        events = session.exec(
            select(Event)
            .where(col(Event.task_key) == key)
            .order_by(col(Event.id).desc())
            .limit(event_limit)
        )
        jobs = read_jobs(session, job_ids=[found.task.job_id])
        waits = read_waits(session, job_id=found.task.job_id)
        return TaskDetail(
            task=found.task,
            input=found.input,
            diffstat=found.diffstat,
            executions=found.executions,
            job=jobs[0] if jobs else None,
            events=tuple(event_view(e) for e in reversed(list(events))),
            wait=next((w for w in waits if w.subject == f"task {key}"), None),
        )


def job_detail(store: Store, job_id: str, *, now: float, lease_seconds: float) -> JobDetail:
    """A job with its tasks, plan rounds and reviews, for the job view; ``lease_seconds`` is
    the silence after which an engine holding its work counts as gone."""
    with store.read() as session:
        jobs = read_jobs(session, job_ids=[job_id])
        if not jobs:
            return JobDetail(None)
        tasks = sorted(
            read_tasks(session, job_ids=[job_id], clip=False), key=lambda t: (t.created_at, t.key)
        )
        return JobDetail(
            job=jobs[0],
            tasks=tuple(tasks),
            plans=tuple(read_plans(session, job_ids=[job_id])),
            reviews=tuple(read_reviews(session, job_id)),
            upstream=upstream_states(session, jobs[0], tasks),
            engines=tuple(holding_engines(session, job_id, now=now, lease_seconds=lease_seconds)),
            waits=tuple(read_waits(session, job_id=job_id, now=now, lease_seconds=lease_seconds)),
        )


def holding_engines(
    session: Any, job_id: str, *, now: float, lease_seconds: float
) -> list[EngineRow]:
    """The engines holding the job's claimed tasks, and those running its planner rounds
    (a planner holds no task, so the engine's own listing leaves it out)."""
    rows = job_engines(session, job_id, now=now, lease_seconds=lease_seconds)
    query = select(Execution.engine_id).where(
        col(Execution.job_id) == job_id,
        col(Execution.ended_at).is_(None),
        col(Execution.task_key).is_(None),
        col(Execution.started_at).is_not(None),
    )
    planners = Counter(engine for engine in session.exec(query) if engine)
    if not planners:
        return rows
    running = Counter({row.id: row.running for row in rows}) + planners
    records = session.exec(select(EngineRecord).where(col(EngineRecord.id).in_(sorted(running))))
    return engine_rows(records, running, now=now, lease_seconds=lease_seconds, recent_seconds=None)


def upstream_states(session: Any, job: JobView, tasks: Sequence[TaskView]) -> dict[str, str]:
    """The state of every job in ``after`` and every other job's task a task waits for."""
    keys = sorted({key for task in tasks for key in task.external_deps})
    states: dict[str, str] = {}
    if job.after:
        query = select(Job.id, Job.state).where(col(Job.id).in_(list(job.after)))
        states.update({name: str(state) for name, state in session.exec(query)})
    if keys:
        query = select(Task.key, Task.state).where(col(Task.key).in_(keys))
        states.update({key: str(state) for key, state in session.exec(query)})
    return states

"""Reads for the task and job screens (run in workers: they may touch git and many rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from relay_engine.store.db import Store
from relay_engine.store.engines import EngineRow, job_engines
from relay_engine.store.read_model import NO_SPEND, PullView, SpendView, read_pulls, spend_by
from relay_engine.store.schema import Event, Execution, Job, Plan, Review, Task
from relay_tui.projection import event_view
from relay_tui.views import EventView


@dataclass(frozen=True)
class TaskDetail:
    task: Task | None
    job: Job | None = None
    executions: list[Execution] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)


@dataclass(frozen=True)
class JobDetail:
    job: Job | None
    tasks: list[Task] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    pr: PullView | None = None
    reviews: list[Review] = field(default_factory=list)
    upstream: dict[str, str] = field(default_factory=dict)
    """States of what this job waits on in other jobs: job ids (``after``) and "JOB/TASK"
    keys (tasks' ``external_deps``)."""
    spend: SpendView = NO_SPEND
    engines: list[EngineRow] = field(default_factory=list)
    """Engines holding the job's claimed tasks."""


def task_detail(store: Store, key: str, event_limit: int = 200) -> TaskDetail:
    """Everything the detail screen shows about one task."""
    with store.read() as session:
        task = session.get(Task, key)
        if task is None:
            return TaskDetail(None)
        executions = list(
            session.exec(
                select(Execution)
                .where(col(Execution.task_key) == key)
                .order_by(col(Execution.started_at).desc(), col(Execution.id).desc())
                .limit(8)
            )
        )
        events = list(
            session.exec(
                select(Event)
                .where(col(Event.task_key) == key)
                .order_by(col(Event.id).desc())
                .limit(event_limit)
            )
        )
        return TaskDetail(
            task=task,
            job=session.get(Job, task.job_id),
            executions=executions,
            events=[event_view(e) for e in reversed(events)],
        )


def job_detail(store: Store, job_id: str, *, now: float, lease_seconds: float) -> JobDetail:
    """A job with its tasks and plan rounds, for the job view; ``lease_seconds`` is the
    silence after which an engine holding its work counts as gone."""
    with store.read() as session:
        job = session.get(Job, job_id)
        if job is None:
            return JobDetail(None)
        tasks = list(
            session.exec(
                select(Task)
                .where(Task.job_id == job_id)
                .order_by(col(Task.created_at), col(Task.key))
            )
        )
        plans = list(
            session.exec(select(Plan).where(Plan.job_id == job_id).order_by(col(Plan.round)))
        )
        reviews = list(
            session.exec(select(Review).where(Review.job_id == job_id).order_by(col(Review.number)))
        )
        return JobDetail(
            job=job,
            tasks=tasks,
            plans=plans,
            pr=read_pulls(session, [job_id])[job_id][0],
            reviews=reviews,
            upstream=upstream_states(session, job, tasks),
            spend=spend_by(session, Execution.job_id, [job_id]).get(job_id, NO_SPEND),
            engines=job_engines(session, job_id, now=now, lease_seconds=lease_seconds),
        )


def upstream_states(session: Any, job: Job, tasks: list[Task]) -> dict[str, str]:
    """The state of every job in ``after`` and every other job's task a task waits for."""
    keys = sorted({key for task in tasks for key in task.external_deps or ()})
    states: dict[str, str] = {}
    if job.after:
        query = select(Job.id, Job.state).where(col(Job.id).in_(list(job.after)))
        states.update({name: str(state) for name, state in session.exec(query)})
    if keys:
        query = select(Task.key, Task.state).where(col(Task.key).in_(keys))
        states.update({key: str(state) for key, state in session.exec(query)})
    return states

"""Task state changes inside a transaction: checked, timestamped and logged together.

Every path that changes a task's state (completion, recovery, operator commands,
readiness) goes through :func:`move_task`, so the transition table is enforced in
one place and the change feed never misses a change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.core.states import ACTIVE_TASK_STATES, TaskState, check_task
from relay_engine.store.db import record_event
from relay_engine.store.schema import Job, Task

EXECUTION_HISTORY_KEPT = 8


def move_task(
    session: Session,
    task: Task,
    target: TaskState,
    *,
    now: float,
    kind: str,
    message: str,
    level: str = "info",
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> Task:
    """Change a task's state (and other fields) and append the event that says so."""
    check_task(task.state, target, key=task.key)
    task.state = target
    for name, value in fields.items():
        setattr(task, name, value)
    if target is not TaskState.RUNNING:
        _release_claim(task)
    task.updated_at = now
    session.add(task)
    record_event(
        session,
        kind,
        message,
        now=now,
        job_id=task.job_id,
        task_key=task.key,
        level=level,
        data=data,
    )
    return task


def _release_claim(task: Task) -> None:
    task.execution_id = None
    task.lease_owner = None
    task.lease_expires_at = None


def job_tasks(session: Session, job_id: str, states: Iterable[TaskState]) -> list[Task]:
    query = select(Task).where(Task.job_id == job_id, col(Task.state).in_(list(states)))
    return list(session.exec(query))


def active_tasks(session: Session, job_id: str) -> list[Task]:
    return job_tasks(session, job_id, ACTIVE_TASK_STATES)


def tasks_by_key(session: Session, keys: Iterable[str]) -> dict[str, Task]:
    wanted = list(set(keys))
    found: dict[str, Task] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for task in session.exec(select(Task).where(col(Task.key).in_(chunk))):
            found[task.key] = task
    return found


def touch_job(session: Session, job_id: str, now: float) -> Job | None:
    job = session.get(Job, job_id)
    if job is not None:
        job.updated_at = now
        session.add(job)
    return job


def resume_parked_task(session: Session, task: Task, now: float, message: str) -> None:
    """A parked task goes back to the queue; dispatch decides again where it runs."""
    move_task(
        session,
        task,
        TaskState.QUEUED,
        now=now,
        kind="task.resumed",
        message=message,
        resumed_at=now,
        waiting_on_provider=None,
        not_before=None,
    )

"""Operations on one task: cancel it, retry it, find it by its key.

Operator commands, planner rounds, troubleshooters and pull requests all call these typed
functions; only the command inbox (:mod:`relay_engine.ops.commands`) reads payloads.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from relay_engine.contracts.keys import split_key
from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    RETRYABLE_TASK_STATES,
    TERMINAL_JOB_STATES,
    JobState,
    TaskState,
)
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, Task
from relay_engine.store.task_rows import job_tasks, mark_blocked, move_task


def find_task(session: Session, key: str) -> Task:
    split_key(key)
    task = session.get(Task, key)
    if task is None:
        raise Refused(f"no task {key}")
    return task


def cancel_task(session: Session, task: Task, reason: str, now: float) -> str:
    """Cancel an unfinished task; a running one's engine sees its claim gone and stops it."""
    if task.state not in ACTIVE_TASK_STATES:
        raise Refused(f"task {task.key} is already {task.state}")
    move_task(
        session,
        task,
        TaskState.CANCELLED,
        now=now,
        kind=EventKind.TASK_CANCELLED,
        message=f"{task.key} cancelled: {reason}",
        level="warning",
        error=reason,
        finished_at=now,
    )
    return f"cancelled {task.key}"


def retry_task(session: Session, task: Task, now: float, *, why: str = "by operator") -> str:
    """A FAILED or CANCELLED task runs again (one more attempt if it had spent them); the
    tasks it blocked wait for it again, and a job that had ended is active again."""
    if task.state not in RETRYABLE_TASK_STATES:
        raise Refused(f"task {task.key} is {task.state}; only FAILED or CANCELLED retry")
    states = {t.task_id: t.state for t in job_tasks(session, task.job_id, list(TaskState))}
    ready = not task.external_deps and all(
        states.get(dep) == TaskState.SUCCEEDED for dep in task.dependencies
    )
    max_attempts = max(task.max_attempts, task.attempt + 1)
    move_task(
        session,
        task,
        TaskState.QUEUED if ready else TaskState.DRAFT,
        now=now,
        kind=EventKind.TASK_RETRIED,
        message=f"{task.key} retried {why} (attempt {task.attempt + 1} of {max_attempts})",
        max_attempts=max_attempts,
        error=None,
        blocked_by=None,
        finished_at=None,
    )
    blocked = select(Task).where(
        col(Task.job_id) == task.job_id, col(Task.blocked_by) == task.task_id
    )
    for dependent in session.exec(blocked):
        why_not = f"{dependent.key} unblocked: {task.task_id} was retried"
        mark_blocked(session, dependent, None, why_not, now)
    job = session.get(Job, task.job_id)
    if job is not None and job.state in TERMINAL_JOB_STATES:
        message = f"job {job.id} active again"
        move_job(
            session, job, JobState.ACTIVE, now=now, kind=EventKind.JOB_REACTIVATED, message=message
        )
    return f"retried {task.key}"

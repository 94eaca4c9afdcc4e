"""Operator commands: durable rows applied exactly once by whichever engine sees them first.

Any process may apply a command (the `relay` CLI does so right after storing it), because
applying only changes rows: an engine that owns a cancelled task's process notices on
its next tick that its execution id no longer matches (fencing) and kills the process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session, col, select, update

from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    TERMINAL_JOB_STATES,
    JobState,
    PlanState,
    TaskState,
    check_job,
    check_plan,
)
from relay_engine.ops.jobs import split_key
from relay_engine.store.db import Store, record_event
from relay_engine.store.schema import Command, Job, Plan, Task
from relay_engine.store.tasks import job_tasks, move_task

Handler = Callable[[Session, dict, float], str]


class CommandRejected(ValueError):
    """The command names something that does not exist or cannot change now."""


@dataclass(frozen=True)
class AppliedCommand:
    id: int
    kind: str
    outcome: str
    ok: bool


def _task(session: Session, payload: dict) -> Task:
    key = str(payload.get("task", ""))
    split_key(key)
    task = session.get(Task, key)
    if task is None:
        raise CommandRejected(f"no task {key}")
    return task


def cancel_task(session: Session, payload: dict, now: float) -> str:
    task = _task(session, payload)
    if task.state not in ACTIVE_TASK_STATES:
        raise CommandRejected(f"task {task.key} is already {task.state}")
    reason = str(payload.get("reason") or "cancelled by operator")
    move_task(
        session,
        task,
        TaskState.CANCELLED,
        now=now,
        kind="task.cancelled",
        message=f"{task.key} cancelled: {reason}",
        level="warning",
        error=reason,
        finished_at=now,
    )
    return f"cancelled {task.key}"


def retry_task(session: Session, payload: dict, now: float) -> str:
    task = _task(session, payload)
    if task.state not in (TaskState.FAILED, TaskState.CANCELLED):
        raise CommandRejected(f"task {task.key} is {task.state}; only FAILED or CANCELLED retry")
    deps = {t.task_id: t.state for t in job_tasks(session, task.job_id, list(TaskState))}
    ready = not task.external_deps and all(
        deps.get(dep) == TaskState.SUCCEEDED for dep in task.dependencies
    )
    target = TaskState.QUEUED if ready else TaskState.DRAFT
    max_attempts = max(task.max_attempts, task.attempt + 1)
    why = str(payload.get("reason") or "by operator")
    move_task(
        session,
        task,
        target,
        now=now,
        kind="task.retried",
        message=f"{task.key} retried {why} (attempt {task.attempt + 1} of {max_attempts})",
        max_attempts=max_attempts,
        error=None,
        blocked_by=None,
        finished_at=None,
    )
    _unblock_dependents(session, task, now)
    _reactivate_job(session, task.job_id, now)
    return f"retried {task.key}"


def _unblock_dependents(session: Session, task: Task, now: float) -> None:
    """Tasks blocked by ``task`` wait for it again; each says so in the change feed, which
    is how consoles (reading only the rows events name) see them unblocked at once."""
    blocked = session.exec(
        select(Task).where(col(Task.job_id) == task.job_id, col(Task.blocked_by) == task.task_id)
    )
    for dependent in blocked:
        dependent.blocked_by = None
        dependent.updated_at = now
        session.add(dependent)
        record_event(
            session,
            "task.unblocked",
            f"{dependent.key} unblocked: {task.task_id} was retried",
            now=now,
            job_id=dependent.job_id,
            task_key=dependent.key,
        )


def _reactivate_job(session: Session, job_id: str, now: float) -> None:
    job = session.get(Job, job_id)
    if job is not None and job.state in TERMINAL_JOB_STATES:
        job.state = check_job(job.state, JobState.ACTIVE, key=job.id)
        job.error = None
        job.updated_at = now
        session.add(job)
        record_event(
            session, "job.reactivated", f"job {job_id} active again", now=now, job_id=job_id
        )


def cancel_job(session: Session, payload: dict, now: float) -> str:
    job = session.get(Job, str(payload.get("job", "")))
    if job is None:
        raise CommandRejected(f"no job {payload.get('job')}")
    if job.state in TERMINAL_JOB_STATES:
        raise CommandRejected(f"job {job.id} is already {job.state}")
    cancel_unfinished(session, job.id, "job cancelled", now)
    job.state = check_job(job.state, JobState.CANCELLED, key=job.id)
    job.updated_at = now
    session.add(job)
    record_event(session, "job.finished", f"job {job.id} cancelled", now=now, job_id=job.id)
    return f"cancelled job {job.id}"


def cancel_unfinished(session: Session, job_id: str, reason: str, now: float) -> int:
    """Cancel a job's unfinished tasks and fail its running planner rounds; how many tasks."""
    tasks = job_tasks(session, job_id, ACTIVE_TASK_STATES)
    for task in tasks:
        cancel_task(session, {"task": task.key, "reason": reason}, now)
    for plan in session.exec(
        select(Plan).where(Plan.job_id == job_id, Plan.status == PlanState.PLANNING)
    ):
        fail_plan(session, plan, reason, now)
    return len(tasks)


def fail_plan(session: Session, plan: Plan, reason: str, now: float) -> None:
    """End a planner round for good. Its execution loses the claim, so the engine running
    the planner kills it (fencing) and nothing it answers is ever materialised."""
    plan.status = check_plan(plan.status, PlanState.FAILED, key=f"plan {plan.id}")
    plan.error = reason
    plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
    plan.updated_at = now
    session.add(plan)
    record_event(
        session,
        "plan.failed",
        f"job {plan.job_id} round {plan.round}: {reason}",
        now=now,
        job_id=plan.job_id,
        plan_id=plan.id,
        level="warning",
    )


HANDLERS: dict[str, Handler] = {
    "cancel": cancel_task,
    "retry": retry_task,
    "cancel_job": cancel_job,
}


def apply_pending(
    store: Store, applier: str, now: float, handlers: dict[str, Handler] | None = None
) -> list[AppliedCommand]:
    """Apply every command nobody has applied yet, each in its own transaction."""
    handlers = handlers or HANDLERS
    with store.read() as session:
        query = select(Command.id).where(col(Command.applied_at).is_(None)).order_by(Command.id)
        pending = list(session.exec(query))
    return [a for a in (_apply_one(store, cid, applier, now, handlers) for cid in pending) if a]


def _apply_one(
    store: Store, command_id: int | None, applier: str, now: float, handlers: dict[str, Handler]
) -> AppliedCommand | None:
    with store.write() as session:
        claimed = session.exec(
            update(Command)
            .where(col(Command.id) == command_id, col(Command.applied_at).is_(None))
            .values(applied_at=now, applied_by=applier)
        )
        if claimed.rowcount != 1:
            return None  # another engine applied it first
        command = session.get(Command, command_id)
        assert command is not None
        outcome, ok = _run_handler(session, command, now, handlers)
        command.outcome = outcome
        command.succeeded = ok
        session.add(command)
    return AppliedCommand(command.id or 0, command.kind, outcome, ok)


def _run_handler(
    session: Session, command: Command, now: float, handlers: dict[str, Handler]
) -> tuple[str, bool]:
    handler = handlers.get(command.kind)
    payload = command.payload or {}
    job_id = payload.get("job") or str(payload.get("task", "")).partition("/")[0] or None
    if handler is None:
        message = f"{command.kind}: not supported yet by this engine"
        record_event(
            session, "command.unsupported", message, now=now, job_id=job_id, level="warning"
        )
        return message, False
    try:
        with session.begin_nested():
            outcome = handler(session, payload, now)
    except (CommandRejected, ValueError) as error:
        message = f"{command.kind} refused: {error}"
        record_event(session, "command.rejected", message, now=now, job_id=job_id, level="warning")
        return message, False
    return outcome, True


def wait_for_outcome(store: Store, command_id: int, timeout: float = 10.0) -> AppliedCommand | None:
    """The outcome of a command, whichever process applied it; None if nobody did in time."""
    deadline = time.monotonic() + timeout
    while True:
        with store.read() as session:
            command = session.get(Command, command_id)
        if command is not None and command.applied_at is not None:
            return AppliedCommand(
                command_id, command.kind, command.outcome or "", bool(command.succeeded)
            )
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)

"""Operations on one task: cancel it, retry it, find it by its key.

Operator commands, planner rounds, troubleshooters and pull requests all call these typed
functions; only the command inbox (:mod:`relay_engine.ops.commands`) reads payloads.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from relay_engine.contracts.keys import split_key
from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    DONE_TASK_STATES,
    DROPPABLE_TASK_STATES,
    RETRYABLE_TASK_STATES,
    TAKEOVER_STATES,
    TERMINAL_JOB_STATES,
    JobState,
    TaskState,
)
from relay_engine.ops.notes import note_retry
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, Task
from relay_engine.store.task_rows import job_tasks, mark_blocked, move_task


def find_task(session: Session, key: str) -> Task:
    split_key(key)
    task = session.get(Task, key)
    if task is None:
        raise Refused(f"no task {key}")
    return task


def cancel_task(
    session: Session, task: Task, reason: str, now: float, *, with_dependents: bool = True
) -> str:
    """Cancel an unfinished task, and drop with it the unfinished tasks that need it (the job
    goes on with the rest); a running one's engine sees its claim gone and stops it. Callers
    that cancel a whole set themselves (a replan, a cancelled job) pass ``with_dependents``
    False, so each task keeps its own reason."""
    if task.state not in ACTIVE_TASK_STATES:
        raise Refused(f"task {task.key} is already {task.state}")
    dropped = [
        d for d in (dependents_of(session, task) if with_dependents else [])
        if d.state in ACTIVE_TASK_STATES
    ]  # fmt: skip
    with_it = f"; dropped with it: {', '.join(d.task_id for d in dropped)}" if dropped else ""
    move_task(
        session,
        task,
        TaskState.CANCELLED,
        now=now,
        kind=EventKind.TASK_CANCELLED,
        message=f"{task.key} cancelled: {reason}{with_it}"[:500],
        level="warning",
        error=reason,
        finished_at=now,
        data={"dropped": [d.key for d in dropped]} if dropped else None,
    )
    for dependent in dropped:  # every task that needs one of these is among them
        move_task(
            session, dependent, TaskState.DROPPED, now=now, kind=EventKind.TASK_DROPPED,
            message=f"{dependent.key} dropped with {task.task_id}", level="warning",
            error=f"dropped with {task.task_id}: {reason}", finished_at=now, blocked_by=None,
        )  # fmt: skip
    return f"cancelled {task.key}{with_it}"


def dependents_of(session: Session, task: Task) -> list[Task]:
    """Every task of the job that needs ``task``, directly or through another, in job order."""
    tasks = job_tasks(session, task.job_id, list(TaskState))
    needed = {task.task_id}
    found: list[Task] = []
    grew = True
    while grew:
        grew = False
        for other in tasks:
            if other.task_id not in needed and needed.intersection(other.dependencies or ()):
                needed.add(other.task_id)
                found.append(other)
                grew = True
    return sorted(found, key=lambda t: (t.wave, t.created_at))


def drop_task(session: Session, task: Task, now: float, *, by: str = "operator") -> str:
    """DROPPED: not needed after all. It never runs (a running agent is stopped); what needs
    it goes on as if it had succeeded with nothing to show."""
    if task.state not in DROPPABLE_TASK_STATES:
        raise Refused(f"task {task.key} is {task.state}: only unfinished or failed work drops")
    move_task(
        session, task, TaskState.DROPPED, now=now, kind=EventKind.TASK_DROPPED,
        message=f"{task.key} dropped by {by}: its dependents go on without it",
        level="warning", finished_at=now, blocked_by=None,
    )  # fmt: skip
    blocked = select(Task).where(
        col(Task.job_id) == task.job_id, col(Task.blocked_by) == task.task_id
    )
    for dependent in session.exec(blocked):
        mark_blocked(
            session, dependent, None, f"{dependent.key} unblocked: {task.task_id} dropped", now
        )
    return f"dropped {task.key}"


def retry_task(session: Session, task: Task, now: float, *, why: str = "by operator") -> str:
    """A FAILED or CANCELLED task runs again (one more attempt if it had spent them); the
    tasks it blocked wait for it again, and a job that had ended is active again."""
    if task.state not in RETRYABLE_TASK_STATES:
        raise Refused(f"task {task.key} is {task.state}; only FAILED or CANCELLED retry")
    states = {t.task_id: t.state for t in job_tasks(session, task.job_id, list(TaskState))}
    ready = not task.external_deps and all(
        states.get(dep) in DONE_TASK_STATES for dep in task.dependencies
    )
    max_attempts = max(task.max_attempts, task.attempt + 1)
    note_retry(session, task, now)
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
    _bring_back_dropped_with(session, task, now)
    reactivate_job(session, task, now)
    return f"retried {task.key}"


def _bring_back_dropped_with(session: Session, task: Task, now: float) -> None:
    """The tasks a cancel dropped along with ``task`` wait for it again: retrying it means
    the work that needed it is wanted after all."""
    mark = f"dropped with {task.task_id}: "
    for dependent in dependents_of(session, task):
        if dependent.state == TaskState.DROPPED and (dependent.error or "").startswith(mark):
            move_task(
                session, dependent, TaskState.DRAFT, now=now, kind=EventKind.TASK_RETRIED,
                message=f"{dependent.key} back: {task.task_id} was retried", error=None,
                finished_at=None,
            )  # fmt: skip


def reactivate_job(session: Session, task: Task, now: float) -> None:
    """The operator brought a task back: a job that had ended or was BLOCKED is active again
    (and settles again once its tasks are done)."""
    job = session.get(Job, task.job_id)
    if job is not None and (job.state in TERMINAL_JOB_STATES or job.state == JobState.BLOCKED):
        move_job(
            session, job, JobState.ACTIVE, now=now, kind=EventKind.JOB_REACTIVATED,
            message=f"job {job.id} active again", blocked_by=None,
        )  # fmt: skip


def take_over(session: Session, task: Task, by: str, now: float) -> str:
    """HELD: no engine claims it and no timeout runs until the operator hands it back; a
    running agent loses its claim, so its engine stops it and leaves its worktree alone."""
    if task.state not in TAKEOVER_STATES:
        raise Refused(f"task {task.key} is {task.state}: only a queued, running, parked or "
                      "failed task can be taken over")  # fmt: skip
    move_task(
        session,
        task,
        TaskState.HELD,
        now=now,
        kind=EventKind.TASK_HELD,
        message=f"{task.key} taken over by {by}",
        level="warning",
        held_by=by,
        held_at=now,
        data={"by": by},
    )
    return f"took over {task.key}"


def hand_back(
    session: Session, task: Task, now: float, *, done: bool, text: str | None = None
) -> str:
    """``done``: SUCCEEDED (the caller merged the worktree first); else QUEUED to run on in
    the same session and on the same branch, with ``text`` for the agent to read."""
    if task.state != TaskState.HELD:
        raise Refused(f"task {task.key} is {task.state}, not held: nothing to hand back")
    if done:
        move_task(
            session, task, TaskState.SUCCEEDED, now=now, kind=EventKind.TASK_HANDED_BACK,
            message=f"{task.key} handed back done by {task.held_by or 'the operator'}",
            held_by=None, held_at=None, finished_at=now, error=None,
        )  # fmt: skip
        return f"{task.key} done: merged into its job's branch"
    notes = [*(task.operator_notes or []), *([text] if text else [])]
    move_task(
        session, task, TaskState.QUEUED, now=now, kind=EventKind.TASK_HANDED_BACK,
        message=f"{task.key} handed back to run on" + (f": {text}" if text else ""),
        held_by=None, held_at=None, keep_work=True, operator_notes=notes,
        max_attempts=max(task.max_attempts, task.attempt + 1), error=None,
    )  # fmt: skip
    return f"{task.key} runs on in its session"


def say(session: Session, task: Task, text: str, now: float) -> str:
    """The operator's words for the task: handed to its running session where the CLI takes
    input while it runs, else put in its next prompt."""
    if not text.strip():
        raise Refused("say what? the text is empty")
    task.operator_notes = [*(task.operator_notes or []), text.strip()]
    task.updated_at = now
    session.add(task)
    record_event(
        session, EventKind.OPERATOR_SAID, f"{task.key}: the operator says: {text.strip()}"[:500],
        now=now, job_id=task.job_id, task_key=task.key,
    )  # fmt: skip
    return f"{task.key} will read it"

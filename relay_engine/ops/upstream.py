"""Applying the waits on other jobs (:mod:`relay_engine.core.upstream`): references and
cycles refused at submit and in a planner's blockers, and on full ticks the jobs and tasks
their upstream lets go.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlmodel import Session, col, select

from relay_engine.contracts.job_file import JobFileError, JobSpec
from relay_engine.contracts.keys import task_key
from relay_engine.contracts.planner import PlannedBlocker
from relay_engine.contracts.task_definitions import Problem, external_deps
from relay_engine.core.states import DONE_JOB_STATES, DONE_TASK_STATES, JobState, TaskState
from relay_engine.core.upstream import (
    DEAD_JOBS,
    DEAD_TASKS,
    Blocked,
    Ready,
    Wait,
    Waiting,
    batch_cycles,
    blocker_of,
    closing_field,
    job_wait,
    node_name,
    reference_problems,
    task_wait,
    wait_path,
)
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, Task
from relay_engine.store.task_rows import mark_blocked


def check_batch(store: Store, specs: Sequence[JobSpec]) -> None:
    """Refuse a batch whose cross-job references do not resolve or go round in a circle."""
    wanted = {name for spec in specs for name in spec.job.after}
    wanted |= {
        d.partition("/")[0] for s in specs for t in s.tasks for d in external_deps(t.depends_on)
    }
    if not wanted:
        return
    with store.read() as session:
        stored_jobs = set(session.exec(select(Job.id).where(col(Job.id).in_(sorted(wanted)))))
        stored_tasks = set(
            session.exec(select(Task.key).where(col(Task.job_id).in_(sorted(wanted))))
        )
    known_jobs = stored_jobs | {s.job.id for s in specs}
    known_tasks = stored_tasks | {task_key(s.job.id, t.id) for s in specs for t in s.tasks}
    for spec in specs:
        problems = reference_problems(spec, known_jobs, known_tasks)
        if problems:
            raise JobFileError(spec.source, problems)
    for cycle in batch_cycles(specs):
        spec, field = closing_field(specs, cycle)
        path = " -> ".join(node_name(node) for node in cycle)
        raise JobFileError(spec.source, [Problem(field, f"cycle across jobs: {path}")])


# --- the tick: release what its upstream lets go ----------------------------------------


def release_waiting_jobs(store: Store, now: float) -> bool:
    """DRAFT jobs whose ``after`` jobs are done start; a dead upstream blocks them."""
    with store.read() as session:
        waiting = list(session.exec(select(Job).where(Job.state == JobState.DRAFT)))
        if not waiting:
            return False
        states = _job_states(session, {name for job in waiting for name in job.after})
    decisions = {job.id: job_wait(job.after, states) for job in waiting}
    changed = False
    with store.write() as session:
        for job in waiting:
            fresh = session.get(Job, job.id)
            if fresh is not None and fresh.state == JobState.DRAFT:
                changed |= _apply_job_wait(session, fresh, decisions[job.id], now)
    return changed


def _apply_job_wait(session: Session, job: Job, wait: Wait, now: float) -> bool:
    """A waiting job starts, or its wait changes (blocked by a failed upstream, or waiting
    again); the state stays DRAFT until it starts."""
    if isinstance(wait, Ready):
        message = f"job {job.id} started: {', '.join(job.after)} done"
        move_job(
            session, job, JobState.ACTIVE, now=now, kind=EventKind.JOB_STARTED, message=message,
            blocked_by=None,
        )  # fmt: skip
        return True
    if isinstance(wait, Blocked) and job.blocked_by != wait.reason:
        job.blocked_by = wait.reason
        message, kind, level = (
            f"job {job.id} blocked: {wait.reason}",
            EventKind.JOB_BLOCKED,
            "warning",
        )
    elif isinstance(wait, Waiting) and job.blocked_by is not None:
        job.blocked_by = None
        message = f"job {job.id} waiting on {', '.join(wait.on)} again"
        kind, level = EventKind.JOB_WAITING, "info"
    else:
        return False
    job.updated_at = now
    session.add(job)
    record_event(session, kind, message, now=now, job_id=job.id, level=level)
    return True


def _job_states(session: Session, job_ids: Iterable[str]) -> dict[str, str]:
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    return dict(session.exec(select(Job.id, Job.state).where(col(Job.id).in_(ids))).all())


def hold_for_other_jobs(
    session: Session, drafts: Sequence[Task]
) -> tuple[set[str], dict[str, str]]:
    """Of ``drafts``, the keys that must keep waiting (their job is DRAFT, or a task of
    another job they need has not succeeded) and those blocked by a dead upstream task."""
    draft_jobs = set(session.exec(select(Job.id).where(Job.state == JobState.DRAFT)))
    upstream = {key for task in drafts for key in task.external_deps}
    states = _task_states(session, {key for key in upstream if "/" in key})
    states |= _job_states(session, {key for key in upstream if "/" not in key})
    waiting: set[str] = set()
    blocked: dict[str, str] = {}
    for task in drafts:
        wait = task_wait(task.external_deps, states) if task.external_deps else Ready()
        if task.job_id in draft_jobs or isinstance(wait, Waiting):
            waiting.add(task.key)
        elif isinstance(wait, Blocked):
            blocked[task.key] = wait.reason
    return waiting, blocked


def unblock_revived(store: Store, now: float) -> bool:
    """Tasks blocked by another job's task (or by a job a planner made them wait on) that
    an operator revived wait again."""
    with store.read() as session:
        query = select(Task.blocked_by).where(
            Task.state == TaskState.DRAFT,
            col(Task.blocked_by).contains("/") | col(Task.blocked_by).startswith("job "),
        )
        reasons = {r: blocker_of(r) for r in set(session.exec(query.distinct())) if r}
        keys = {key for key in reasons.values() if key}
        states = _task_states(session, {k for k in keys if "/" in k})
        states |= _job_states(session, {k for k in keys if "/" not in k})
    revived = sorted(
        reason
        for reason, key in reasons.items()
        if key and states.get(key) not in (*DEAD_TASKS, *DEAD_JOBS, JobState.BLOCKED)
    )
    if not revived:
        return False
    with store.write() as session:
        for blocker in revived:
            held = select(Task).where(Task.state == TaskState.DRAFT, Task.blocked_by == blocker)
            for task in session.exec(held):
                mark_blocked(session, task, None, f"{task.key} waits on {blocker} again", now)
    return True


def _task_states(session: Session, keys: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    return dict(session.exec(select(Task.key, Task.state).where(col(Task.key).in_(wanted))).all())


# --- a planner's blockers ---------------------------------------------------------------


def blocker_problems(
    session: Session, job_id: str, blockers: Sequence[PlannedBlocker]
) -> list[Problem]:
    """What a planner's blockers name must exist in another job, and waiting on it must not
    close a circle back to this job (refused with its path, as a submit refuses one)."""
    problems = []
    edges = _WaitGraph(session)
    for index, blocker in enumerate(blockers):
        field = f"blockers[{index}].on"
        owner, _, task_id = blocker.on.partition("/")
        if owner == job_id:
            problems.append(Problem(field, f"{blocker.on!r} is this job: use dependencies"))
            continue
        exists = session.get(Task, blocker.on) if task_id else session.get(Job, owner)
        if exists is None:
            what = f"job {owner!r} has no task {task_id!r}" if task_id else f"no job {owner!r}"
            problems.append(Problem(field, what))
            continue
        path = wait_path(edges, blocker.on, job_id)
        if path is not None:
            names = [f"{job_id}/{blocker.task}", *path]
            cycle = " -> ".join(node_name(node) for node in names)
            problems.append(Problem(field, f"cycle across jobs: {cycle}"))
    return problems


class _WaitGraph:
    """What each job or task waits on, read as the search reaches it: a job on its
    unfinished tasks, a task on its dependencies, its other jobs' work and its job's
    ``after``. Finished work waits on nothing."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def __call__(self, node: str) -> list[str]:
        if "/" not in node:
            job = self.session.get(Job, node)
            if job is None or job.state in DONE_JOB_STATES:
                return []
            query = select(Task.key).where(
                Task.job_id == node, col(Task.state).not_in(list(DONE_TASK_STATES))
            )
            return list(self.session.exec(query))
        task = self.session.get(Task, node)
        if task is None or task.state in DONE_TASK_STATES:
            return []
        job = self.session.get(Job, task.job_id)
        local = [task_key(task.job_id, dep) for dep in task.dependencies or []]
        return [*local, *(task.external_deps or []), *((job.after or []) if job else [])]

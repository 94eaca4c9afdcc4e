"""Work that waits on other jobs: ``after = ["job-a"]`` and ``depends_on = ["job-a/task-x"]``.

A job with ``after`` stays DRAFT until every job it names is done (SUCCEEDED, or MERGED
for a job with a pull request); a task that names another job's task stays DRAFT until
that task SUCCEEDED. An upstream that FAILED, was CANCELLED or CLOSED blocks the waiter
with that reason, and an operator retry upstream unblocks it again. The decisions are
pure; the shell below applies them on full ticks and checks references at submit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from sqlmodel import Session, col, select

from relay_engine.contracts.job_file import JobFileError, JobSpec
from relay_engine.contracts.task_definitions import (
    Problem,
    external_deps,
    find_cycles,
    item_label,
    local_deps,
)
from relay_engine.core.states import JobState, TaskState
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, Task
from relay_engine.store.task_rows import mark_blocked

DONE_JOBS = frozenset({JobState.SUCCEEDED, JobState.MERGED})
DEAD_JOBS = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.CLOSED})
DEAD_TASKS = frozenset({TaskState.FAILED, TaskState.CANCELLED})


@dataclass(frozen=True)
class Ready:
    pass


@dataclass(frozen=True)
class Waiting:
    on: tuple[str, ...]


@dataclass(frozen=True)
class Blocked:
    reason: str


Wait = Ready | Waiting | Blocked


def job_wait(after: Sequence[str], states: Mapping[str, str]) -> Wait:
    """Whether a job waiting on ``after`` may start, given those jobs' states."""
    dead = [job for job in after if states.get(job) in DEAD_JOBS]
    if dead:
        return Blocked(", ".join(f"job {job} {states[job].lower()}" for job in dead))
    pending = tuple(job for job in after if states.get(job) not in DONE_JOBS)
    return Waiting(pending) if pending else Ready()


def task_wait(upstream: Sequence[str], states: Mapping[str, str]) -> Wait:
    """Whether a task's dependencies in other jobs let it queue, given their states.
    Blocked names the first dead upstream task, as a task's ``blocked_by`` does."""
    dead = [key for key in upstream if states.get(key) in DEAD_TASKS]
    if dead:
        return Blocked(dead[0])
    pending = tuple(key for key in upstream if states.get(key) != TaskState.SUCCEEDED)
    return Waiting(pending) if pending else Ready()


# --- submit: references and cycles ------------------------------------------------------


def reference_problems(
    spec: JobSpec, known_jobs: Collection[str], known_tasks: Collection[str]
) -> list[Problem]:
    """Every ``after`` job and ``job/task`` dependency must exist (stored, or in the batch)."""
    job = spec.job
    problems = [
        Problem(
            f"job.after[{i}]",
            f"unknown job {name!r}" if name != job.id else "a job cannot wait on itself",
        )
        for i, name in enumerate(job.after)
        if name == job.id or name not in known_jobs
    ]
    for index, task in enumerate(spec.tasks):
        for dep in external_deps(task.depends_on):
            owner = dep.partition("/")[0]
            if owner == job.id:
                message = f"{dep!r} is in this job: write it as {dep.partition('/')[2]!r}"
            elif dep in known_tasks:
                continue
            elif owner not in known_jobs:
                message = f"depends on task {dep!r} of unknown job {owner!r}"
            else:
                message = f"job {owner!r} has no task {dep.partition('/')[2]!r}"
            problems.append(Problem(f"{item_label('tasks', index, task)}.depends_on", message))
    return problems


def batch_graph(specs: Sequence[JobSpec]) -> dict[str, list[str]]:
    """What waits on what across a batch: a task on its dependencies and on the jobs its
    job comes after; a job (as a node) on its own tasks, since it is done when they are."""
    graph: dict[str, list[str]] = {}
    for spec in specs:
        job_id = spec.job.id
        graph[job_id] = [f"{job_id}/{t.id}" for t in spec.tasks]
        for task in spec.tasks:
            deps = [f"{job_id}/{d}" for d in local_deps(task.depends_on)]
            graph[f"{job_id}/{task.id}"] = [*deps, *external_deps(task.depends_on), *spec.job.after]
    return graph


def batch_cycles(specs: Sequence[JobSpec]) -> list[list[str]]:
    """Cycles that cross jobs. Stored jobs never wait on new ones, so any cycle a batch
    could close runs through the batch alone."""
    return [cycle for cycle in find_cycles(batch_graph(specs)) if _crosses_jobs(cycle)]


def _crosses_jobs(cycle: Sequence[str]) -> bool:
    return len({node.partition("/")[0] for node in cycle}) > 1


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
    known_tasks = stored_tasks | {f"{s.job.id}/{t.id}" for s in specs for t in s.tasks}
    for spec in specs:
        problems = reference_problems(spec, known_jobs, known_tasks)
        if problems:
            raise JobFileError(spec.source, problems)
    for cycle in batch_cycles(specs):
        spec, field = _closing_field(specs, cycle)
        path = " -> ".join(_node_name(node) for node in cycle)
        raise JobFileError(spec.source, [Problem(field, f"cycle across jobs: {path}")])


def _closing_field(specs: Sequence[JobSpec], cycle: Sequence[str]) -> tuple[JobSpec, str]:
    """The file and field of the first step of ``cycle`` that leaves a task's own job:
    a ``JOB/TASK`` dependency, or the job's ``after``."""
    for node, following in pairwise(cycle):
        job_id, _, task_id = node.partition("/")
        if task_id and following.partition("/")[0] != job_id:
            spec = next(s for s in specs if s.job.id == job_id)
            if "/" not in following:
                return spec, "job.after"
            index = next(i for i, t in enumerate(spec.tasks) if t.id == task_id)
            return spec, f"{item_label('tasks', index, spec.tasks[index])}.depends_on"
    raise AssertionError("a cross-job cycle leaves some job")


def _node_name(node: str) -> str:
    return node if "/" in node else f"job {node}"


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
    states = _task_states(session, {key for task in drafts for key in task.external_deps})
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
    """Tasks blocked by another job's task that an operator retried wait again."""
    with store.read() as session:
        query = select(Task.blocked_by).where(
            Task.state == TaskState.DRAFT, col(Task.blocked_by).contains("/")
        )
        blockers = sorted(set(session.exec(query.distinct())))
        states = _task_states(session, blockers)
    revived = [key for key in blockers if states.get(key) not in DEAD_TASKS]
    if not revived:
        return False
    with store.write() as session:
        for blocker in revived:
            query = select(Task).where(Task.state == TaskState.DRAFT, Task.blocked_by == blocker)
            for task in session.exec(query):
                mark_blocked(session, task, None, f"{task.key} waits on {blocker} again", now)
    return True


def _task_states(session: Session, keys: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    return dict(session.exec(select(Task.key, Task.state).where(col(Task.key).in_(wanted))).all())

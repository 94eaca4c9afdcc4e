"""Task rows: new tasks, reads by job and key, and every state change, checked,
timestamped and logged together.

Every path that changes a task's state (completion, recovery, operator commands,
readiness) goes through :func:`move_task` -- or, for a claim (which starts its task in the
same write), :func:`start_values` and :func:`started_event`, and for the drafts readiness
queues together, :func:`queue_drafts` -- so the transition table is enforced in one place
and the change feed never misses a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Text, bindparam, cast, or_
from sqlalchemy import event as sa_event
from sqlmodel import Session, col, select, update
from sqlmodel.sql.expression import SelectOfScalar

from relay_engine.contracts.keys import split_key, task_key
from relay_engine.contracts.task_definitions import (
    TaskDef,
    definition_hash,
    external_deps,
    local_deps,
)
from relay_engine.core.scheduler import waves
from relay_engine.core.states import ACTIVE_TASK_STATES, TaskState, check_task
from relay_engine.store.db import chunks, column_rows, note_queue_grew, select_columns
from relay_engine.store.events import EventKind, NewEvent, append_events, record_event
from relay_engine.store.plain_rows import insert_rows
from relay_engine.store.schema import Task

EXECUTION_HISTORY_KEPT = 8


def move_task(
    session: Session,
    task: Task,
    target: TaskState,
    *,
    now: float,
    kind: EventKind,
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
    if target is TaskState.QUEUED:
        note_queue_grew(session)
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


UNCLAIMED = {"execution_id": None, "lease_owner": None, "lease_expires_at": None}
"""A task's claim, released: every state but RUNNING holds none."""


def queue_drafts(session: Session, keys: Sequence[str], *, now: float) -> list[str]:
    """DRAFT tasks whose dependencies succeeded join the queue, as :func:`move_task` would
    move each, in one conditional UPDATE per :func:`~relay_engine.store.db.chunks` of keys
    and one INSERT of their ``task.queued`` events: a job of a thousand independent tasks
    otherwise loaded, changed and flushed a thousand ORM rows and events. Only tasks still
    DRAFT move (another engine may have queued or cancelled one since they were read); the
    ones that did are returned, and the session's copies of them are brought up to date."""
    check_task(TaskState.DRAFT, TaskState.QUEUED)
    values = {"state": TaskState.QUEUED, "updated_at": now, **UNCLAIMED}
    moved: list[Any] = []
    for chunk in chunks(keys):
        statement = (
            update(Task)
            .where(col(Task.key).in_(chunk))
            .where(col(Task.state) == TaskState.DRAFT)
            .values(**values)
            .returning(col(Task.key), col(Task.job_id))
            .execution_options(synchronize_session="evaluate")
        )
        moved += session.execute(statement).all()
    if moved:
        note_queue_grew(session)
    queued = EventKind.TASK_QUEUED
    append_events(session, [NewEvent(queued, f"{key} queued", now, job, key) for key, job in moved])
    return [key for key, _ in moved]


def start_values(now: float) -> dict[str, Any]:
    """What a claim writes on its task besides the claim itself: QUEUED to RUNNING. A claim
    starts its task in the same write (the agent is spawned right after it commits), so a
    start costs no transaction of its own; a launch that then fails moves the task on from
    RUNNING as any failed run does."""
    check_task(TaskState.QUEUED, TaskState.RUNNING)  # the only state a claim starts from
    return {"state": TaskState.RUNNING, "started_at": now}


def started_event(task: Task, execution_id: str, *, now: float) -> NewEvent:
    """The ``task.started`` event of a task its claim just started (see :func:`start_values`),
    appended in the claim's transaction with the batch's others."""
    return NewEvent(
        EventKind.TASK_STARTED,
        f"{task.key} started on {task.agent} (attempt {task.attempt}/{task.max_attempts})",
        now,
        job_id=task.job_id,
        task_key=task.key,
        data={"agent": task.agent, "provider": task.provider, "execution": execution_id},
    )


def _release_claim(task: Task) -> None:
    for name, value in UNCLAIMED.items():
        setattr(task, name, value)


def mark_blocked(
    session: Session, task: Task, blocker: str | None, message: str, now: float
) -> None:
    """Set (or clear, with None) what blocks a DRAFT task, and say so in the change feed,
    which is how consoles (reading only the rows events name) see the change at once."""
    task.blocked_by = blocker
    task.updated_at = now
    session.add(task)
    record_event(
        session,
        EventKind.TASK_BLOCKED if blocker else EventKind.TASK_UNBLOCKED,
        message,
        now=now,
        job_id=task.job_id,
        task_key=task.key,
        level="warning" if blocker else "info",
    )


_DEPENDENTS = "relay.dependents"  # session.info: task key -> the DRAFT tasks naming it
_LIKE_ESCAPE = "!"


@cache
def dependents_query(count: int) -> SelectOfScalar[Task]:
    """The DRAFT tasks that name any of ``count`` tasks as a dependency (``job_0``,
    ``named_0`` … bound by :func:`dependents_params`): the database finds them among
    their job's drafts, so a completion's cost does not grow with the drafts a big job
    holds (each exit read every one of them, and a DAG of 1,200 tasks cost three times
    the CPU per task of 1,200 independent ones).

    A dependency list is JSON text in which a task id, quoted, can only be an element
    (ids are ``[A-Za-z0-9._-]``: no quote, no escape); ``_``, a LIKE wildcard, is
    escaped. Built once per count, as every exit the engine writes runs it."""
    listed = cast(col(Task.dependencies), Text)
    naming = [
        (col(Task.job_id) == bindparam(f"job_{i}"))
        & listed.like(bindparam(f"named_{i}"), escape=_LIKE_ESCAPE)
        for i in range(count)
    ]
    return select(Task).where(Task.state == TaskState.DRAFT, or_(*naming))


def dependents_params(keys: Sequence[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for i, key in enumerate(keys):
        job_id, task_id = split_key(key)
        escaped = task_id.replace(_LIKE_ESCAPE, _LIKE_ESCAPE * 2).replace("_", f"{_LIKE_ESCAPE}_")
        params |= {f"job_{i}": job_id, f"named_{i}": f'%"{escaped}"%'}
    return params


def dependents_to_read(session: Session, keys: Iterable[str]) -> list[str]:
    """Of these tasks, the ones whose dependents this transaction has not read yet."""
    return sorted(set(keys) - set(session.info.get(_DEPENDENTS, {})))


def hold_dependents(session: Session, keys: Iterable[str], tasks: Iterable[Task]) -> None:
    """Keep what one read of these tasks' dependents found (``tasks`` may hold other rows:
    only DRAFT tasks naming one of them are kept), for :func:`draft_dependents` to answer
    from, for a transaction that completes many tasks: not one read per completion. Kept
    until the transaction adds a task (see :func:`_note_new_tasks`)."""
    held: dict[str, list[Task]] = session.info.setdefault(_DEPENDENTS, {})
    drafts = {task.key: task for task in tasks if task.state == TaskState.DRAFT}
    for key in set(keys) - set(held):
        job_id, task_id = split_key(key)
        held[key] = [t for t in drafts.values() if t.job_id == job_id and task_id in t.dependencies]


def draft_dependents(session: Session, task: Task) -> list[Task]:
    """The DRAFT tasks of ``task``'s job that name it: from the preloaded ones when this
    transaction has them."""
    held = session.info.get(_DEPENDENTS, {}).get(task.key)
    if held is None or any(isinstance(obj, Task) for obj in session.new):
        query = dependents_query(1)
        held = list(session.exec(query, params=dependents_params([task.key])))
    return [t for t in held if t.state == TaskState.DRAFT and task.task_id in t.dependencies]


@sa_event.listens_for(Session, "before_flush")
def _note_new_tasks(session: Session, *_: Any) -> None:
    """A new task (a plan's children, a troubleshooter) may be a dependent the preload has
    not seen: the next look reads the database again. A new task born QUEUED (a
    troubleshooter) grows the queue, as :func:`move_task` does."""
    new = [obj for obj in session.new if isinstance(obj, Task)]
    if new and _DEPENDENTS in session.info:
        del session.info[_DEPENDENTS]
    if any(task.state == TaskState.QUEUED for task in new):
        note_queue_grew(session)


def job_tasks(session: Session, job_id: str, states: Iterable[TaskState]) -> list[Task]:
    query = select(Task).where(Task.job_id == job_id, col(Task.state).in_(list(states)))
    return list(session.exec(query))


def active_tasks(session: Session, job_id: str) -> list[Task]:
    return job_tasks(session, job_id, ACTIVE_TASK_STATES)


def tasks_by_key(session: Session, keys: Iterable[str]) -> dict[str, Task]:
    found: dict[str, Task] = {}
    for chunk in chunks(list(set(keys))):
        for task in session.exec(select(Task).where(col(Task.key).in_(chunk))):
            found[task.key] = task
    return found


def rows_by_key(session: Session, keys: Sequence[str], columns: Sequence[Any]) -> dict[str, Any]:
    """:func:`tasks_by_key` as plain rows of ``columns`` (``Task.key`` among them), for a
    read that decides on a few columns of many tasks: a whole row decodes every JSON
    column of it."""
    found: dict[str, Any] = {}
    for chunk in chunks(sorted(set(keys))):
        query = select_columns(*columns).where(col(Task.key).in_(chunk))
        found.update((row.key, row) for row in column_rows(session, query))
    return found


def resume_parked_task(session: Session, task: Task, now: float, message: str) -> None:
    """A parked task goes back to the queue; dispatch decides again where it runs."""
    move_task(
        session,
        task,
        TaskState.QUEUED,
        now=now,
        kind=EventKind.TASK_RESUMED,
        message=message,
        resumed_at=now,
        waiting_on_provider=None,
        not_before=None,
    )


# -- new tasks ------------------------------------------------------------------------------
STORY_TIMEOUTS_S = {"S": 15 * 60, "M": 30 * 60, "L": 60 * 60, "XL": 120 * 60}


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
    rows = [
        Task(**values) for values in _new_tasks(session, job_id, job_priority, tasks, now, plan_id)
    ]
    session.add_all(rows)
    return rows


def insert_tasks(
    session: Session,
    job_id: str,
    job_priority: str,
    tasks: tuple[TaskDef, ...] | list[TaskDef],
    *,
    now: float,
) -> None:
    """:func:`add_tasks` for a new job, whose transaction needs its tasks as rows, not as
    objects: one INSERT of plain rows (a later read in the transaction sees them). A submit
    built an ORM object per task, and setting a task's 51 attributes through SQLModel and
    SQLAlchemy cost more than everything else a submit does (0.4 ms a task: a fifth of a
    second for a job of 500)."""
    session.flush()  # the job's row first: its tasks refer to it
    insert_rows(session, Task, _new_tasks(session, job_id, job_priority, tasks, now, None))


def _new_tasks(
    session: Session,
    job_id: str,
    job_priority: str,
    tasks: Sequence[TaskDef],
    now: float,
    plan_id: int | None,
) -> list[dict[str, Any]]:
    """The new tasks' columns: DRAFT, in waves after the job's existing ones (a plan's)."""
    existing_waves = _existing_waves(session, job_id) if plan_id is not None else {}
    depth = waves({t.id: local_deps(t.depends_on) for t in tasks})
    offset = max(existing_waves.values(), default=0)
    return [
        {
            "key": task_key(job_id, definition.id),
            "job_id": job_id,
            "task_id": definition.id,
            "kind": definition.kind,
            "title": definition.title or definition.id,
            "input": definition.input,
            "role": definition.role,
            "model_class": definition.model_class,
            "workstream": definition.workstream,
            "priority": definition.priority or job_priority,
            "story_size": definition.size,
            "dependencies": local_deps(definition.depends_on),
            "external_deps": external_deps(definition.depends_on),
            "state": TaskState.DRAFT.value,
            "max_attempts": definition.max_attempts,
            "timeout_s": definition.timeout,
            "pinned_agent": definition.agent,
            "plan_id": plan_id,
            "wave": offset + depth.get(definition.id, 1),
            "spec_hash": definition_hash(definition, job_priority),
            "sim": definition.sim,
            # created_at orders tasks of equal priority; the index keeps file order stable.
            "created_at": now + index * 1e-6,
            "updated_at": now,
        }
        for index, definition in enumerate(tasks)
    ]


def _existing_waves(session: Session, job_id: str) -> dict[str, int]:
    rows = session.exec(select(Task.task_id, Task.wave).where(Task.job_id == job_id))
    return dict(rows.all())


def timeout_for(task: Task) -> float:
    return task.timeout_s or STORY_TIMEOUTS_S.get(task.story_size, STORY_TIMEOUTS_S["M"])

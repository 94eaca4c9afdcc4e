"""Dispatch: order the queue, respect capacity and scope locks, pick agents, claim.

The decisions come from the pure scheduler and selection modules; this module gathers
their inputs in one read and performs each claim as one conditional UPDATE inside a
short write transaction that re-checks capacity and scope locks, so engines sharing a
database never over-commit even when they plan at the same moment.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, or_, text, tuple_
from sqlmodel import Session, col, select, update

from relay_engine import budgets
from relay_engine.availability import Availability, is_probing
from relay_engine.config import AgentConfig, RelayConfig
from relay_engine.crashpoints import crash_point
from relay_engine.model import Assignment, Execution, Job, Task
from relay_engine.scheduler import TaskFacts, plan_dispatch
from relay_engine.selection import (
    AgentFacts,
    PinFacts,
    ProviderFacts,
    Selected,
    Selection,
    select_agent,
)
from relay_engine.states import TaskState
from relay_engine.store import Store
from relay_engine.taskops import remember_execution

CLAIM_LOCK_KEY = 0x72656C6179  # "relay": serialises claims across engines on PostgreSQL


@dataclass(frozen=True)
class QueueView:
    """One read of what dispatch decides on."""

    queued: list[Any]  # rows of QUEUE_COLUMNS: unclaimed QUEUED tasks
    running: list[Task]
    jobs: dict[str, Job]
    limits: dict[str, float]
    pins: dict[tuple[str, str, str], str]
    availability: dict[str, Availability] = field(default_factory=dict)


def task_facts(task: Task, gated: bool = False) -> TaskFacts:
    return TaskFacts(
        key=task.key,
        job_id=task.job_id,
        task_id=task.task_id,
        state=TaskState(task.state),
        priority=task.priority,
        created_at=task.created_at,
        dependencies=tuple(task.dependencies),
        workstream=task.workstream,
        resumed_at=task.resumed_at,
        parked_provider=task.provider if task.resumed_at else None,
        parked_at=task.parked_at if task.resumed_at else None,
        execution_id=task.execution_id,
        wave_gate_blocked=gated,
    )


_BUSY_STATES = frozenset({TaskState.RUNNING, TaskState.QUEUED})


def _claimed() -> ColumnElement[bool]:
    """Claimed tasks, found through the execution id's index: ``> ''`` rather than ``IS NOT
    NULL`` because SQLite only walks an index for a range, and the state is checked in
    Python because a condition on it would lead the planner to scan every QUEUED row."""
    return col(Task.execution_id) > ""


def busy_tasks(session: Session) -> list[Task]:
    return [t for t in session.exec(select(Task).where(_claimed())) if t.state in _BUSY_STATES]


def _busy_scopes(session: Session) -> list[tuple[str, str | None]]:
    """(job, workstream) of every claimed task: all a claim needs, without loading rows."""
    query = select(Task.job_id, Task.workstream, Task.state).where(_claimed())
    return [
        (job, workstream) for job, workstream, state in session.exec(query) if state in _BUSY_STATES
    ]


QUEUE_COLUMNS = (
    Task.key, Task.job_id, Task.task_id, Task.state, Task.priority, Task.created_at,
    Task.dependencies, Task.workstream, Task.resumed_at, Task.provider, Task.parked_at,
    Task.execution_id, Task.role, Task.model_class, Task.pinned_agent,
)  # fmt: skip
"""What ordering and agent selection read: plain rows, not ORM objects, since a queue of
thousands is read on every dispatch."""


QUEUE_PAGE_MIN = 32


def read_queue(session: Session, limits: dict[str, float], capacity: int) -> QueueView:
    """What dispatch decides on: the claimed tasks and the *top* of the ready queue.

    Only as many queued tasks are read as it takes to fill the free slots (a few pages,
    in dispatch order, over ``ix_relay_task_queue``), so the cost of a dispatch does not
    grow with the length of the queue.
    """
    running = busy_tasks(session)
    free = capacity - len(running)
    queued = _top_of_queue(session, running, free) if free > 0 else []
    job_ids = sorted({t.job_id for t in queued})
    jobs = {j.id: j for j in session.exec(select(Job).where(col(Job.id).in_(job_ids)))}
    pins = {
        (a.job_id, a.workstream, a.role): a.agent_id
        for a in session.exec(
            select(Assignment).where(
                col(Assignment.job_id).in_(job_ids), Assignment.status == "active"
            )
        )
    }
    return QueueView(queued, running, jobs, limits, pins)


def _ready(busy: set[tuple[str, str]]) -> Any:
    """Unclaimed QUEUED tasks whose workstream is not busy (the database skips the rest)."""
    query = select(*QUEUE_COLUMNS).where(
        Task.state == TaskState.QUEUED, col(Task.execution_id).is_(None)
    )
    if busy:
        free_scope = tuple_(Task.job_id, Task.workstream).not_in(sorted(busy))
        query = query.where(or_(col(Task.workstream).is_(None), free_scope))
    return query


def _resumed(session: Session, busy: set[tuple[str, str]]) -> list[Any]:
    """Work back from a provider limit, which dispatches first: few rows, found through
    their own index and checked here (see :func:`_claimed` for why not in SQL)."""
    rows = session.exec(select(*QUEUE_COLUMNS).where(col(Task.resumed_at) > 0))
    return [
        r
        for r in rows
        if r.state == TaskState.QUEUED
        and r.execution_id is None
        and (r.job_id, r.workstream) not in busy
    ]


def _top_of_queue(session: Session, running: list[Task], free: int) -> list[Any]:
    """Resumed work first, then pages of the rest in dispatch order, until the free slots
    are spoken for or the queue ends."""
    busy = {(t.job_id, t.workstream) for t in running if t.workstream}
    page = max(4 * free, QUEUE_PAGE_MIN)
    rows = _resumed(session, busy)
    order = (Task.priority, Task.created_at, Task.key)
    after: tuple[Any, ...] | None = None
    while True:
        query = _ready(busy).where(col(Task.resumed_at).is_(None))
        if after is not None:
            query = query.where(tuple_(*order) > tuple_(*after))
        batch = list(session.exec(query.order_by(*order).limit(page)))
        rows += batch
        if len(batch) < page or _fills(rows, running, free):
            return rows
        after = (batch[-1].priority, batch[-1].created_at, batch[-1].key)


def _fills(rows: list[Any], running: list[Task], free: int) -> bool:
    """Whether these rows already give the scheduler a task for every free slot."""
    busy = [task_facts(t) for t in running]
    plan = plan_dispatch([task_facts(r) for r in rows], busy, len(running) + free)
    return len(plan.chosen) >= free


def choose(view: QueueView, capacity: int) -> list[Task]:
    """Queued tasks to dispatch now, in dispatch order."""
    by_key = {t.key: t for t in view.queued}
    plan = plan_dispatch(
        [task_facts(t) for t in view.queued], [task_facts(t) for t in view.running], capacity
    )
    return [by_key[key] for key in plan.chosen]


def agent_facts(agents: Sequence[AgentConfig], running: Counter[str]) -> list[AgentFacts]:
    return [
        AgentFacts(
            id=a.id,
            provider=a.provider,
            roles=frozenset(a.roles),
            model_class=a.model_class,
            enabled=a.enabled,
            max_concurrent=a.max_concurrent,
            running=running[a.id],
        )
        for a in agents
    ]


def provider_facts(limits: dict[str, float]) -> dict[str, ProviderFacts]:
    return {p: ProviderFacts(provider=p, limited_until=until) for p, until in limits.items()}


def pick_agent(
    task: Task,
    view: QueueView,
    config: RelayConfig,
    running: Counter[str],
    now: float,
    exclude: frozenset[str] = frozenset(),
) -> Selection:
    pin = view.pins.get((task.job_id, task.workstream or "", task.role))
    agents = [
        replace(a, max_concurrent=1) if is_probing(view.availability.get(a.id), now) else a
        for a in agent_facts(config.agents, running)
    ]  # an agent being probed for its network gets one launch at a time
    return select_agent(
        role=task.role,
        model_class=task.model_class,
        pinned_agent=task.pinned_agent,
        pin=PinFacts(agent_id=pin) if pin else None,
        agents=agents,
        providers=provider_facts(view.limits),
        now=now,
        exclude_providers=exclude,
        availability=view.availability,
    )


@dataclass(frozen=True)
class Claim:
    task: Task
    selected: Selected
    execution_id: str


def claim_batch(
    store: Store,
    wanted: Sequence[tuple[Task, Selected]],
    *,
    engine_id: str,
    capacity: int,
    lease_s: float,
    now: float,
    artifacts: Path | None = None,
) -> list[Claim]:
    """Claim tasks in one transaction: each one conditional UPDATE, re-checked under lock.

    Capacity and scope locks are read again inside the transaction, which is serialised
    across engines (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so
    two engines that planned the same dispatch never both win. The lock wait is bounded
    (the store's ``lock_timeout``); a timeout just means nothing is claimed this tick.
    ``artifacts`` is where each execution's directory (and its supervisor's record) will
    be, written with the claim so recovery can find it whatever happens next.
    """
    claims: list[Claim] = []
    with store.write() as session:
        if not store.is_sqlite:
            session.exec(text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=CLAIM_LOCK_KEY))
        busy = _busy_scopes(session)
        crash_point("claim-locked")  # after the first statement: SQLite's lock is taken then
        spent = _spent_jobs(session, {task.job_id for task, _ in wanted})
        for task, selected in wanted:
            if task.job_id in spent:
                continue  # its budget ran out since dispatch read it: the next pass parks it
            if len(busy) >= capacity:
                break
            if _lock_held(task, busy):
                continue
            claimed = _claim_one(session, task, selected, engine_id, lease_s, now, artifacts)
            if claimed is not None:
                claims.append(claimed)
                busy.append((task.job_id, task.workstream))
    return claims


def _spent_jobs(session: Session, job_ids: set[str]) -> set[str]:
    """Jobs whose budget is spent, read inside the claim transaction: two engines cannot
    both start work on the last dollar."""
    jobs = session.exec(select(Job).where(col(Job.id).in_(sorted(job_ids)))).all()
    return set(budgets.job_holds(session, jobs))


def _claim_one(
    session: Session,
    task: Task,
    selected: Selected,
    engine_id: str,
    lease_s: float,
    now: float,
    artifacts: Path | None = None,
) -> Claim | None:
    execution_id = uuid.uuid4().hex
    result = session.exec(
        update(Task)
        .where(
            col(Task.key) == task.key,
            col(Task.state) == TaskState.QUEUED,
            col(Task.execution_id).is_(None),
        )
        .values(
            attempt=Task.attempt + 1,
            execution_id=execution_id,
            lease_owner=engine_id,
            lease_expires_at=now + lease_s,
            agent=selected.agent_id,
            provider=selected.provider,
            resumed_at=None,
            waiting_on_provider=None,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return None
    claimed = session.get(Task, task.key, populate_existing=True)
    assert claimed is not None
    remember_execution(claimed, execution_id)
    session.add(claimed)
    session.add(
        Execution(
            id=execution_id,
            job_id=claimed.job_id,
            task_key=claimed.key,
            engine_id=engine_id,
            attempt=claimed.attempt,
            agent=selected.agent_id,
            provider=selected.provider,
            artifact_dir=str(artifacts / execution_id) if artifacts else None,
        )
    )
    _count_assignment(session, claimed, selected, execution_id, now)
    return Claim(claimed, selected, execution_id)


def _lock_held(task: Task, busy: list[tuple[str, str | None]]) -> bool:
    if not task.workstream:
        return False
    return (task.job_id, task.workstream) in busy


def _count_assignment(
    session: Session, task: Task, selected: Selected, execution_id: str, now: float
) -> None:
    if selected.via != "pin":
        return
    session.exec(
        update(Assignment)
        .where(
            col(Assignment.job_id) == task.job_id,
            col(Assignment.workstream) == (task.workstream or ""),
            col(Assignment.role) == task.role,
            col(Assignment.status) == "active",
        )
        .values(
            executions=Assignment.executions + 1, last_execution_id=execution_id, updated_at=now
        )
    )


def running_by_agent(session: Session) -> Counter[str]:
    rows = session.exec(select(Task.agent, Task.state).where(_claimed()))
    return Counter(agent for agent, state in rows if agent and state in _BUSY_STATES)

"""Waits: everything that waits for time or for someone (a gated wave, a held task, a
limit's reset, an agent no live engine defines, a blocked job), each saying what releases it.

``relay status`` notes them, ``relay run --until-idle`` lists them when nothing else is
left, and the console reads them every second, so they are read from a few columns only.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from relay_engine.core.states import JobState, TaskState
from relay_engine.core.waits import GateState, Wait, job_wait, pinned_wait, task_wait
from relay_engine.core.waits import TaskFacts as WaitFacts
from relay_engine.store.db import DEFAULT_LEASE_S, column_rows, select_columns
from relay_engine.store.plan_rows import allowed_wave, gated_keys
from relay_engine.store.read_model.agents import agent_homes
from relay_engine.store.schema import Assignment, Job, Task

WAITING_TASK_STATES = (TaskState.PARKED, TaskState.HELD, TaskState.DRAFT)


def read_waits(
    session: Session,
    *,
    job_id: str | None = None,
    now: float | None = None,
    lease_seconds: float = DEFAULT_LEASE_S,
) -> list[Wait]:
    """Everything that waits for time or for someone, jobs first: what ``relay status``
    notes and ``relay run --until-idle`` lists when nothing else is left to do. Engines
    silent for ``lease_seconds`` at ``now`` count as not running."""
    job_query = select(Job.id, Job.state, Job.blocked_by, Job.after)
    if job_id is not None:
        job_query = job_query.where(col(Job.id) == job_id)
    waits = [
        wait
        for jid, state, blocked_by, after in session.exec(job_query.order_by(col(Job.created_at)))
        if (wait := job_wait(jid, state, blocked_by, after or ())) is not None
    ]
    at = time.time() if now is None else now
    return waits + _task_waits(session, job_id) + _pinned_waits(session, job_id, at, lease_seconds)


def _pinned_waits(
    session: Session, job_id: str | None, now: float, lease_seconds: float
) -> list[Wait]:
    """Queued tasks pinned (themselves or through their workstream) to an agent no live
    engine defines: only an engine that defines it claims them."""
    pins = {
        (a.job_id, a.workstream, a.role): a.agent_id
        for a in session.exec(select(Assignment).where(Assignment.status == "active"))
        if job_id is None or a.job_id == job_id
    }
    query = select_columns(
        Task.key, Task.job_id, Task.workstream, Task.role, Task.pinned_agent
    ).where(Task.state == TaskState.QUEUED, col(Task.execution_id).is_(None))
    pinned_jobs = sorted({job for job, _, _ in pins})
    query = query.where(or_(col(Task.pinned_agent).is_not(None), col(Task.job_id).in_(pinned_jobs)))
    if job_id is not None:
        query = query.where(col(Task.job_id) == job_id)
    rows = list(session.exec(query.order_by(col(Task.job_id), col(Task.created_at))))
    if not rows:
        return []
    homes = agent_homes(session, now, lease_seconds)
    found = []
    for key, job, workstream, role, pinned in rows:
        via_pin = pins.get((job, workstream or "", role))
        agent = pinned or via_pin
        if agent is None:
            continue
        through = None if pinned else workstream
        wait = pinned_wait(key, agent, homes.get(agent, []), workstream=through)
        if wait is not None:
            found.append(wait)
    return found


WAIT_COLUMNS = (
    Task.key, Task.job_id, Task.state, Task.wave, Task.waiting_on_provider, Task.not_before,
    Task.error, Task.held_by,
)  # fmt: skip
"""What a task's wait is made of: a console reads waits every second, and 50,000 draft
tasks as whole rows (their inputs too) cost it half a second and tens of megabytes."""


def _task_waits(session: Session, job_id: str | None) -> list[Wait]:
    gated, gates = gated_keys(session), _gates(session)
    # DRAFT tasks wait only behind a gate: read those of gated jobs, not every draft.
    drafts = and_(col(Task.state) == TaskState.DRAFT, col(Task.job_id).in_(sorted(gates)))
    held_or_parked = col(Task.state).in_([s for s in WAITING_TASK_STATES if s != TaskState.DRAFT])
    query = select_columns(*WAIT_COLUMNS).where(or_(held_or_parked, drafts))
    if job_id is not None:
        query = query.where(col(Task.job_id) == job_id)
    found = []
    for task in column_rows(session, query.order_by(col(Task.job_id), col(Task.created_at))):
        if task.state == TaskState.DRAFT and task.key not in gated:
            continue
        gate = gates.get(task.job_id) if task.key in gated else None
        wait = task_wait(_wait_facts(task), gate=gate)
        if wait is not None:
            found.append(wait)
    return found


def _gates(session: Session) -> dict[str, GateState]:
    """How each gated job's next wave opens: by the operator, by its assessor, or -- its
    assessment having failed -- by the operator after all."""
    jobs = session.exec(select(Job).where(Job.state == JobState.ACTIVE, Job.wave_gate != "auto"))
    gates: dict[str, GateState] = {}
    for job in jobs:
        if job.wave_gate != "assess":
            gates[job.id] = "operator"
            continue
        failed = select(Task.key).where(
            Task.job_id == job.id, Task.kind == "assess", Task.state == TaskState.FAILED,
            Task.wave == allowed_wave(session, job),
        )  # fmt: skip
        gates[job.id] = "held" if session.exec(failed).first() else "assess"
    return gates


def _wait_facts(task: Any) -> WaitFacts:
    """From a Task or a row of :data:`WAIT_COLUMNS`."""
    return WaitFacts(
        key=task.key, job_id=task.job_id, state=str(task.state), wave=task.wave,
        waiting_on_provider=task.waiting_on_provider, not_before=task.not_before,
        error=task.error, held_by=task.held_by,
    )  # fmt: skip

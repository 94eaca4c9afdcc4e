"""Pins, provider sessions and workstream memory: what carries over between tasks.

A pin keeps a workstream on one agent; a provider session lets that agent resume its
own conversation (native resume) instead of starting cold; memory notes tell the next
task of the workstream what the previous ones did.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, delete, select, update

from relay_engine.ops import agents as agent_status
from relay_engine.ops.refusals import Refused
from relay_engine.store.db import ensure_row
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import (
    AgentRecord,
    Assignment,
    EngineRecord,
    Memory,
    ProviderSession,
    Task,
)

MEMORY_NOTE_CHARS = 400


def pin_task(session: Session, task: Task, agent_id: str, now: float) -> str:
    """Operator pin: this task runs on ``agent_id`` (while its provider is not limited)."""
    _check_agent(session, agent_id)
    task.pinned_agent = agent_id
    session.add(task)
    record_event(
        session,
        EventKind.TASK_PINNED,
        f"{task.key} pinned to {agent_id}",
        now=now,
        job_id=task.job_id,
        task_key=task.key,
    )
    return f"pinned {task.key} to {agent_id}"


def pin_workstream(
    session: Session, job_id: str, workstream: str, role: str, agent_id: str, now: float
) -> str:
    """Operator pin: the (job, workstream, role)'s tasks run on ``agent_id`` from now on."""
    _check_agent(session, agent_id)
    replace_pin(session, job_id, workstream, role, agent_id, reason="pinned by operator", now=now)
    return f"pinned {job_id}/{workstream or '*'} ({role}) to {agent_id}"


def _check_agent(session: Session, agent_id: str) -> None:
    known = set(session.exec(select(AgentRecord.id)))
    if not agent_id or (known and agent_id not in known):
        raise Refused(f"unknown agent {agent_id!r}; known: {', '.join(sorted(known))}")


def replace_pin(
    session: Session,
    job_id: str,
    workstream: str,
    role: str,
    agent_id: str,
    *,
    reason: str,
    now: float,
) -> Assignment:
    session.exec(
        update(Assignment)
        .where(
            col(Assignment.job_id) == job_id,
            col(Assignment.workstream) == workstream,
            col(Assignment.role) == role,
            col(Assignment.status) == "active",
        )
        .values(status="replaced", updated_at=now)
    )
    assignment = Assignment(
        job_id=job_id,
        workstream=workstream,
        role=role,
        agent_id=agent_id,
        mode="pinned",
        status="active",
        reason=reason,
        created_at=now,
        updated_at=now,
    )
    session.add(assignment)
    record_event(
        session,
        EventKind.ASSIGNMENT_PINNED,
        f"job {job_id} workstream {workstream or '*'} ({role}) -> {agent_id}: {reason}",
        now=now,
        job_id=job_id,
        data={"agent": agent_id, "workstream": workstream},
    )
    return assignment


def active_pin(session: Session, task: Task) -> Assignment | None:
    query = select(Assignment).where(
        Assignment.job_id == task.job_id,
        Assignment.workstream == (task.workstream or ""),
        Assignment.role == task.role,
        Assignment.status == "active",
    )
    return session.exec(query).first()


NEVER_RESUMED_KINDS = frozenset({"merge_prep"})
"""Work that must see the branch as it is now, not as a conversation remembers it: merge
preparation starts fresh every time (the seed never resumes ``prepare_pr_for_merge``)."""


def resumable_session(session: Session, task: Task, agent_id: str) -> str | None:
    """The provider session of the workstream's previous task on this agent, if still good."""
    if not task.workstream or task.kind in NEVER_RESUMED_KINDS:
        return None
    query = (
        select(ProviderSession)
        .where(
            ProviderSession.job_id == task.job_id,
            ProviderSession.workstream == task.workstream,
            ProviderSession.role == task.role,
            ProviderSession.agent_id == agent_id,
            ProviderSession.status == "active",
        )
        .order_by(col(ProviderSession.id).desc())
    )
    row = session.exec(query).first()
    return row.session_id if row else None


def remember_session(
    session: Session,
    task: Task,
    agent_id: str,
    provider: str,
    session_id: str | None,
    *,
    resumed: bool,
    stale: bool,
    now: float,
) -> None:
    """Keep the session for the next task (or attempt) of the workstream; ``stale`` (see
    :func:`relay_engine.core.outcomes.ends_session`) keeps it from being resumed."""
    if not task.workstream:
        return
    query = select(ProviderSession).where(
        ProviderSession.job_id == task.job_id,
        ProviderSession.workstream == task.workstream,
        ProviderSession.role == task.role,
        ProviderSession.agent_id == agent_id,
    )
    row = session.exec(query).first()
    if row is None and not session_id:
        return
    row = row or ProviderSession(
        job_id=task.job_id,
        workstream=task.workstream,
        role=task.role,
        agent_id=agent_id,
        provider=provider,
    )
    if session_id:
        row.session_id = session_id
    row.status = "stale" if stale else "active"
    row.last_started_at = now
    if resumed:
        row.last_resumed_at = now
    if stale:
        row.last_failed_at = now
    session.add(row)


def add_memory(session: Session, task: Task, summary: str | None, now: float) -> None:
    """Note what a workstream's task did, for the prompts of the workstream's next tasks."""
    if not summary or not task.workstream:
        return
    note = f"{task.task_id}: {summary}"[:MEMORY_NOTE_CHARS]
    session.add(
        Memory(
            job_id=task.job_id,
            workstream=task.workstream or "",
            note=note,
            task_key=task.key,
            created_at=now,
        )
    )


def sync_agents(
    session: Session,
    agents: Any,
    now: float,
    *,
    engine_id: str = "",
    slots: int = 0,
    lease_s: float | None = None,
) -> None:
    """Mirror this engine's agents (and its slots) so consoles and peers can list them.

    Each engine keeps its own rows: hosts with different configs do not overwrite each
    other, and a host that does not define an agent never advertises it. With ``lease_s``
    the rows of engines gone for longer than a lease are dropped: an agent no running
    engine defines any more stops being listed."""
    configured = {agent.id: agent for agent in agents}
    if lease_s is not None:
        _drop_agents_of_gone_engines(session, engine_id, now - lease_s)
    mine = select(AgentRecord).where(AgentRecord.engine_id == engine_id)
    for record in session.exec(mine):
        if record.id not in configured:
            session.delete(record)
    for agent in configured.values():
        ensure_row(session, AgentRecord, engine_id=engine_id, id=agent.id)
        row = session.get(AgentRecord, (engine_id, agent.id))
        assert row is not None
        row.provider = agent.provider
        row.roles = list(agent.roles)
        row.model_class = agent.model_class
        row.enabled = agent.enabled
        row.max_concurrent = agent.max_concurrent
        row.account = agent.account
        row.updated_at = now
        session.add(row)
    engine = session.get(EngineRecord, engine_id) if engine_id else None
    if engine is not None:
        engine.slots = slots
        engine.agents = sorted(configured)
        session.add(engine)
    agent_status.sync(session, configured.values(), now)


def _drop_agents_of_gone_engines(session: Session, engine_id: str, silent_since: float) -> None:
    live = select(EngineRecord.id).where(
        col(EngineRecord.stopped_at).is_(None), EngineRecord.heartbeat_at >= silent_since
    )
    session.exec(
        delete(AgentRecord)
        .where(col(AgentRecord.engine_id) != engine_id, col(AgentRecord.engine_id).not_in(live))
        .execution_options(synchronize_session=False)
    )

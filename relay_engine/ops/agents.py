"""Agent availability rows: mark an agent unavailable, clear it, list it.

The decisions are :mod:`relay_engine.core.availability`'s; this module reads and writes
``relay_agent_status`` and releases the tasks that waited on an agent once it is cleared.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import or_
from sqlmodel import Session, col, select

from relay_engine.contracts.config import AgentConfig, RelayConfig, agent_warnings
from relay_engine.contracts.time_format import format_time
from relay_engine.core.availability import (
    READY,
    Availability,
    after_failure,
    config_hash,
)
from relay_engine.core.failures import AgentFailure, FailureClass
from relay_engine.core.selection import NoAgent, Park, Selected, pick_agent
from relay_engine.core.states import TaskState
from relay_engine.ops.completion import AgentWait
from relay_engine.ops.refusals import Refused
from relay_engine.store.db import ensure_row
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.read_model.agents import availability_of
from relay_engine.store.read_model.fleet import read_fleet
from relay_engine.store.schema import AgentStatus, Task
from relay_engine.store.task_rows import resume_parked_task


def fix_text(failure: AgentFailure, until: float | None) -> str:
    """The fix line, with the probe time for an unreachable agent."""
    if failure.kind == FailureClass.UNREACHABLE and until is not None:
        return f"no network: will probe again at {format_time(until)}"
    return failure.fix


def record_failure(
    session: Session, agent: AgentConfig, failure: AgentFailure, now: float
) -> Availability:
    """Mark ``agent`` unavailable for ``failure`` (a row lock keeps concurrent exits in order)."""
    ensure_row(session, AgentStatus, agent_id=agent.id)
    row = session.exec(
        select(AgentStatus).where(AgentStatus.agent_id == agent.id).with_for_update()
    ).one()
    current = availability_of(row) if row.status != READY else None
    state = after_failure(current, failure, now)
    row.provider = agent.provider
    row.status, row.reason, row.until, row.failures = (
        state.status,
        state.reason,
        state.until,
        state.failures,
    )
    row.fix = fix_text(failure, state.until)
    row.config_hash = config_hash(agent)
    row.since = row.since if current and current.status == state.status else now
    row.updated_at = now
    session.add(row)
    record_event(
        session,
        EventKind.AGENT_UNAVAILABLE,
        f"agent {agent.id} {failure.kind.value}: {failure.reason} (fix: {row.fix})"[:500],
        now=now,
        level="warning",
        data={"agent": agent.id, "status": state.status, "until": state.until},
    )
    return availability_of(row)


def decide_agent_wait(
    session: Session, task: Task, failure: AgentFailure, config: RelayConfig, now: float
) -> AgentWait:
    """Mark the task's agent unavailable, then pick where the task goes: another capable
    agent, or parked until the first probe (or until an operator clears the agent)."""
    agent_id = task.agent or ""
    agent = config.agent(agent_id)
    state = record_failure(session, agent, failure, now) if agent is not None else None
    fleet = read_fleet(session, config, now)
    choice = pick_agent(task, config.agents, fleet, now)
    if isinstance(choice, Selected) and choice.agent_id != agent_id:
        return AgentWait(agent_id, choice.agent_id, None, failure.reason, "")
    if isinstance(choice, Park):
        return AgentWait(agent_id, None, choice.until, failure.reason, choice.reason)
    until = state.until if state is not None else None
    why = (
        choice.reason if isinstance(choice, NoAgent) else f"{failure.kind.value}: {failure.reason}"
    )
    return AgentWait(agent_id, None, until, failure.reason, f"waiting on agent {agent_id}: {why}")


def mark_ready(session: Session, agent_id: str, now: float, *, why: str) -> bool:
    """Clear ``agent_id`` and re-queue the tasks that waited for an operator or a config
    change; False when it was not unavailable."""
    row = session.get(AgentStatus, agent_id)
    if row is None or row.status == READY:
        return False
    previous = row.status
    row.status, row.reason, row.fix, row.until, row.failures = READY, None, None, None, 0
    row.since, row.updated_at = now, now
    session.add(row)
    record_event(
        session,
        EventKind.AGENT_READY,
        f"agent {agent_id} is available again ({previous} cleared: {why})",
        now=now,
        data={"agent": agent_id},
    )
    requeue_agent_waits(session, now, agent_id)
    return True


def note_worked(session: Session, agent_id: str, now: float) -> None:
    """The agent's CLI ran a task to an ordinary end: whatever kept it out is over."""
    row = session.get(AgentStatus, agent_id)
    if row is not None and row.status != READY:
        mark_ready(session, agent_id, now, why="it ran a task")


def requeue_agent_waits(session: Session, now: float, agent_id: str) -> int:
    """Tasks waiting on ``agent_id``, or parked with no time to wake (waiting on some held
    agent), go back to the queue; dispatch parks them again if still no agent can take them."""
    waiting = or_(col(Task.not_before).is_(None), col(Task.waiting_on_provider) == agent_id)
    query = select(Task).where(Task.state == TaskState.PARKED, waiting)
    tasks = list(session.exec(query))
    for task in tasks:
        message = f"{task.key} resumed: agent {task.waiting_on_provider} may be available"
        resume_parked_task(session, task, now, message)
    return len(tasks)


def sync(session: Session, agents: Iterable[AgentConfig], now: float) -> None:
    """After (re)reading relay.toml: an agent whose config changed starts ready again, a
    removed agent's row goes, and valid-but-ignored settings are said out loud."""
    configured = {agent.id: agent for agent in agents}
    for warning in agent_warnings(configured.values()):
        record_event(session, EventKind.CONFIG_WARNING, warning, now=now, level="warning")
    for row in list(session.exec(select(AgentStatus))):
        agent = configured.get(row.agent_id)
        if agent is None:
            session.delete(row)
        elif row.status != READY and row.config_hash != config_hash(agent):
            mark_ready(session, row.agent_id, now, why="its config changed")


def reset_agent(session: Session, agent_id: str, now: float) -> str:
    """The operator says an agent can work again (logged in, network back): available now."""
    if not agent_id:
        raise Refused("agent.reset needs an agent id")
    if mark_ready(session, agent_id, now, why="reset by operator"):
        return f"agent {agent_id} reset: available again"
    return f"agent {agent_id} is not marked unavailable: nothing to reset"

"""The job's memory as agents use it: ``memory_search`` and ``memory_add``, answered from
the ``relay_memory`` rows of the task's job and workstream.

The MCP server an agent's CLI starts (:mod:`relay_engine.agents.memory_mcp`) holds no
database connection; it asks the engine that runs the agent over a socket, and the engine
calls these functions, so what an agent adds goes through the store like any other write,
attributed to its task and execution, and only while that execution still owns its task.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.core.memory import NoteFacts, clean_note, rank
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Memory, Task

SEARCHED_NOTES = 500  # the newest notes of a scope a search looks through


@dataclass(frozen=True)
class MemoryScope:
    """What one execution's memory tools may reach: its job's notes of its workstream."""

    job_id: str
    workstream: str  # "" for a task without one: the job's shared notes
    task_key: str
    execution_id: str

    def describe(self) -> str:
        where = f"workstream {self.workstream}" if self.workstream else "no workstream"
        return f"job {self.job_id}, {where}"


def scope_of(task: Task, execution_id: str) -> MemoryScope:
    return MemoryScope(task.job_id, task.workstream or "", task.key, execution_id)


def search_notes(
    session: Session, scope: MemoryScope, query: str, limit: int
) -> list[NoteFacts]:
    rows = session.exec(
        select(Memory)
        .where(Memory.job_id == scope.job_id, Memory.workstream == scope.workstream)
        .order_by(col(Memory.id).desc())
        .limit(SEARCHED_NOTES)
    )
    notes = [
        NoteFacts(row.id or 0, row.note, row.task_key, row.source, row.created_at) for row in rows
    ]
    return rank(notes, query, limit)


def add_agent_note(session: Session, scope: MemoryScope, text: str, now: float) -> Memory:
    """Store what an agent asked to remember; refused once its execution lost the task (a
    stale run's words must not reach the tasks after it)."""
    try:
        note = clean_note(text)
    except ValueError as error:
        raise Refused(str(error)) from None
    task = session.get(Task, scope.task_key)
    if task is None or task.execution_id != scope.execution_id:
        raise Refused(f"{scope.task_key} is no longer this run's: the note was not kept")
    row = Memory(
        job_id=scope.job_id,
        workstream=scope.workstream,
        note=note,
        task_key=scope.task_key,
        source="agent",
        execution_id=scope.execution_id,
        created_at=now,
    )
    session.add(row)
    session.flush()
    record_event(
        session,
        EventKind.MEMORY_ADDED,
        f"{scope.task_key} noted for {scope.describe()}: {note}"[:500],
        now=now,
        job_id=scope.job_id,
        task_key=scope.task_key,
        data={"memory": row.id, "workstream": scope.workstream},
    )
    return row

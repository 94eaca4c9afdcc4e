"""The job's memory as agents use it: the notes an execution's ``memory_search`` looks
through, and the ``memory_add`` notes it leaves, stored with its exit.

The MCP server an agent's CLI starts (:mod:`relay_engine.agents.memory_server`) holds no
database connection (it runs in the agent's sandbox, which cannot reach the database): relay
hands it a snapshot of the scope's notes at launch and reads what it added when the run's
exit is recorded, so what an agent adds goes through the store like any other write,
attributed to its task and execution, and only while that execution still owns its task
(the reaper calls :func:`add_agent_notes` only for an exit it keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.core.memory import SNAPSHOT_NOTES, NoteFacts
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Memory, Task


@dataclass(frozen=True)
class MemoryScope:
    """What one execution's memory tools reach: its job's notes of its workstream."""

    job_id: str
    workstream: str  # "" for a task without one: the job's shared notes
    task_key: str
    execution_id: str

    def describe(self) -> str:
        where = f"workstream {self.workstream}" if self.workstream else "no workstream"
        return f"job {self.job_id}, {where}"


def scope_of(task: Task, execution_id: str) -> MemoryScope:
    return MemoryScope(task.job_id, task.workstream or "", task.key, execution_id)


def snapshot(session: Session, job_id: str, workstream: str) -> list[NoteFacts]:
    """The scope's newest notes, for an execution's searches (another job's or another
    workstream's are never among them)."""
    rows = session.exec(
        select(Memory)
        .where(Memory.job_id == job_id, Memory.workstream == workstream)
        .order_by(col(Memory.id).desc())
        .limit(SNAPSHOT_NOTES)
    )
    return [
        NoteFacts(row.id or 0, row.note, row.task_key, row.source, row.created_at) for row in rows
    ]


def add_agent_notes(
    session: Session, scope: MemoryScope, notes: Sequence[str], now: float
) -> list[Memory]:
    """Store what the agent asked to remember (already cleaned), one event per note."""
    stored = []
    for note in notes:
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
            data={
                "memory": row.id,
                "workstream": scope.workstream,
                "execution": scope.execution_id,
            },
        )
        stored.append(row)
    return stored

"""Tasks as the tables list them, and one task in full for its detail screen.

A :class:`TaskView` is read from :data:`TASK_COLUMNS` only, with long errors and results
clipped, so a console listing 50,000 tasks holds neither their prompts nor agent-sized
texts; :func:`read_task_detail` is the one read that takes a task whole, with its latest
runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.store.db import chunks, column_rows, select_columns
from relay_engine.store.read_model._rows import _clipped, _whole
from relay_engine.store.read_model.executions import ExecutionView, _execution_view
from relay_engine.store.schema import Execution, Task

TASK_COLUMNS = tuple(
    getattr(Task, name)
    for name in (
        "key", "job_id", "task_id", "title", "kind", "state", "role", "workstream", "agent",
        "pinned_agent", "provider", "attempt", "max_attempts", "wave", "story_size",
        "dependencies", "blocked_by", "waiting_on_provider", "not_before", "execution_id",
        "error", "result_summary", "started_at", "finished_at", "created_at", "updated_at",
        "parent_key", "external_deps", "priority", "plan_id", "guidance", "held_by", "held_at",
        "timeout_s",
    )
)  # fmt: skip
"""The columns a TaskView needs: no input, result data or sim script (prompts are large)."""


@dataclass(frozen=True, slots=True)
class TaskView:
    key: str
    job_id: str
    task_id: str
    title: str
    kind: str
    state: str
    role: str
    workstream: str | None
    agent: str | None
    provider: str | None
    attempt: int
    max_attempts: int
    wave: int
    story_size: str
    dependencies: tuple[str, ...]
    blocked_by: str | None
    waiting_on_provider: str | None
    not_before: float | None
    execution_id: str | None
    error: str | None
    result_summary: str | None
    started_at: float | None
    finished_at: float | None
    created_at: float
    updated_at: float
    parent_key: str | None = None
    """A troubleshooter's failed task: the console shows it as that task's child."""
    external_deps: tuple[str, ...] = ()
    """"JOB/TASK" of other jobs' tasks this one waits for."""
    priority: str = "P2"
    plan_id: int | None = None
    guidance: str | None = None
    held_by: str | None = None  # HELD: the operator who took it over, and since when
    held_at: float | None = None
    timeout_s: float | None = None
    """The task's own timeout; None: its story size's."""

    @classmethod
    def from_row(cls, row: Any, *, clip: bool = True) -> TaskView:
        """From a Task, or a row of :data:`TASK_COLUMNS` (what the readers select); long
        errors and results are clipped unless ``clip`` is False."""
        kept = _clipped if clip else _whole
        return cls(
            key=row.key,
            job_id=row.job_id,
            task_id=row.task_id,
            title=row.title or row.task_id,
            kind=row.kind,
            state=str(row.state),
            role=row.role,
            workstream=row.workstream,
            agent=row.agent or row.pinned_agent,
            provider=row.provider,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            wave=row.wave,
            story_size=row.story_size,
            dependencies=tuple(row.dependencies or ()),
            blocked_by=row.blocked_by,
            waiting_on_provider=row.waiting_on_provider,
            not_before=row.not_before,
            execution_id=row.execution_id,
            error=kept(row.error),
            result_summary=kept(row.result_summary),
            started_at=row.started_at,
            finished_at=row.finished_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            parent_key=row.parent_key,
            external_deps=tuple(row.external_deps or ()),
            priority=row.priority,
            plan_id=row.plan_id,
            guidance=row.guidance,
            held_by=row.held_by,
            held_at=row.held_at,
            timeout_s=row.timeout_s,
        )

    @property
    def shown_state(self) -> str:
        """The state the operator sees: a DRAFT task held by a failed dependency is BLOCKED."""
        return "BLOCKED" if self.state == "DRAFT" and self.blocked_by else self.state


def read_tasks(
    session: Session,
    *,
    job_ids: Iterable[str] | None = None,
    keys: Iterable[str] | None = None,
    clip: bool = True,
) -> list[TaskView]:
    """Tasks in job, wave and creation order; of ``job_ids`` or ``keys`` when given."""
    order = (col(Task.job_id), col(Task.wave), col(Task.created_at))
    query = select_columns(*TASK_COLUMNS).order_by(*order)
    column, values = (Task.job_id, job_ids) if job_ids is not None else (Task.key, keys)
    if values is None:
        return [TaskView.from_row(row, clip=clip) for row in column_rows(session, query)]
    found: list[TaskView] = []
    for chunk in chunks(sorted(set(values))):
        rows = column_rows(session, query.where(col(column).in_(chunk)))
        found += [TaskView.from_row(row, clip=clip) for row in rows]
    return found


@dataclass(frozen=True, slots=True)
class TaskDetailView:
    """One task for a detail screen: its view with errors and results whole, and what
    :class:`TaskView` leaves out so 50,000 of them fit in a console (the prompt, the
    diffstat), with its latest runs."""

    task: TaskView
    input: str
    diffstat: str | None
    executions: tuple[ExecutionView, ...]
    """Newest first."""


def read_task_detail(session: Session, key: str, *, runs: int = 8) -> TaskDetailView | None:
    """The task ``key`` with its ``runs`` latest executions; None when there is no such task."""
    row = session.get(Task, key)
    if row is None:
        return None
    query = (
        select(Execution)
        .where(col(Execution.task_key) == key)
        .order_by(col(Execution.started_at).desc(), col(Execution.id).desc())
        .limit(runs)
    )
    return TaskDetailView(
        task=TaskView.from_row(row, clip=False),
        input=row.input,
        diffstat=row.diffstat,
        executions=tuple(_execution_view(e) for e in session.exec(query)),
    )

"""Executions: each run of a task or planner round, where it ran, how it ended and what it
cost.

What the console's running pane and progress, a task's detail and ``relay status`` show
of runs; a run's spend is read off its own row (:meth:`SpendView.of_execution`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.store.read_model.spend import NO_SPEND, SpendView
from relay_engine.store.schema import Execution


@dataclass(frozen=True, slots=True)
class ExecutionView:
    """One run of a task or planner round: where it ran, how it ended, what it cost."""

    id: str
    job_id: str
    task_key: str | None
    plan_id: int | None
    agent: str | None
    provider: str | None
    attempt: int
    started_at: float | None
    ended_at: float | None
    outcome: str | None
    exit_code: int | None
    error: str | None
    artifact_dir: str | None
    last_output: str | None
    model: str | None = None
    spend: SpendView = NO_SPEND
    """Known when the CLI reports it, usually at the run's end."""
    cwd: str | None = None
    """The worktree (or directory) the agent ran in."""
    engine_id: str = ""
    """The engine that runs (or ran) it: a console tells a run whose engine is gone."""


def read_executions(
    session: Session,
    *,
    job_id: str | None = None,
    task_key: str | None = None,
    running: bool = False,
) -> list[ExecutionView]:
    """Runs oldest first (one not yet started last); only unfinished ones with ``running``."""
    query = select(Execution)
    if running:
        query = query.where(col(Execution.ended_at).is_(None))
    if job_id is not None:
        query = query.where(col(Execution.job_id) == job_id)
    if task_key is not None:
        query = query.where(col(Execution.task_key) == task_key)
    query = query.order_by(col(Execution.started_at).asc().nulls_last(), col(Execution.id))
    return [_execution_view(row) for row in session.exec(query)]


def _execution_view(row: Execution) -> ExecutionView:
    return ExecutionView(
        id=row.id,
        job_id=row.job_id,
        task_key=row.task_key,
        plan_id=row.plan_id,
        agent=row.agent,
        provider=row.provider,
        attempt=row.attempt,
        started_at=row.started_at,
        ended_at=row.ended_at,
        outcome=row.outcome,
        exit_code=row.exit_code,
        error=row.error,
        artifact_dir=row.artifact_dir,
        last_output=row.last_output,
        model=row.model,
        spend=SpendView.of_execution(row),
        cwd=row.cwd,
        engine_id=row.engine_id,
    )

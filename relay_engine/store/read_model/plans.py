"""Planner rounds: each round of a job's planner, what triggered it, its verdict on the
objective and the tasks it generated (the console's planner pane, ``relay status``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.store.schema import Plan


@dataclass(frozen=True, slots=True)
class PlanView:
    id: int
    job_id: str
    round: int
    trigger: str
    guidance: str | None
    status: str
    objective_status: str | None
    assessment: str | None
    error: str | None = None
    rejection: str | None = None
    generated_task_ids: tuple[str, ...] = ()


def read_plans(session: Session, *, job_ids: Iterable[str] | None = None) -> list[PlanView]:
    query = select(Plan).order_by(col(Plan.job_id), col(Plan.round))
    if job_ids is not None:
        query = query.where(col(Plan.job_id).in_(sorted(set(job_ids))))
    return [
        PlanView(
            id=row.id or 0,
            job_id=row.job_id,
            round=row.round,
            trigger=row.trigger,
            guidance=row.guidance,
            status=str(row.status),
            objective_status=row.objective_status,
            assessment=row.assessment,
            error=row.error,
            rejection=row.rejection,
            generated_task_ids=tuple(row.generated_task_ids or ()),
        )
        for row in session.exec(query)
    ]

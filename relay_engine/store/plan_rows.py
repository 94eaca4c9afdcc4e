"""Plan rows and the reads the engine decides on with them: a job's latest round, how many
it had, and the wave its gate lets run."""

from __future__ import annotations

from sqlmodel import Session, col, func, select

from relay_engine.core.states import JobState, PlanState, TaskState
from relay_engine.store.schema import Job, Plan, Task


def latest_plan(session: Session, job_id: str) -> Plan | None:
    query = (
        select(Plan)
        .where(Plan.job_id == job_id, Plan.status != PlanState.SUPERSEDED)
        .order_by(col(Plan.round).desc())
    )
    return session.exec(query).first()


def round_count(session: Session, job_id: str) -> int:
    return session.exec(select(func.max(Plan.round)).where(Plan.job_id == job_id)).one() or 0


def gated_keys(session: Session) -> frozenset[str]:
    """DRAFT tasks held by a wave gate: their wave is beyond the job's allowed wave."""
    jobs = session.exec(select(Job).where(Job.state == JobState.ACTIVE, Job.wave_gate != "auto"))
    keys: set[str] = set()
    for job in jobs:
        held = select(Task.key).where(
            Task.job_id == job.id,
            Task.state == TaskState.DRAFT,
            col(Task.wave) > allowed_wave(session, job),
        )  # keys only: every full tick asks, and a gated job may hold most of its tasks
        keys.update(session.exec(held))
    return frozenset(keys)


def allowed_wave(session: Session, job: Job) -> int:
    """The highest wave that may run: the first wave of the current plan always does."""
    plan = latest_plan(session, job.id)
    query = select(func.min(Task.wave)).where(Task.job_id == job.id)
    if plan is not None and plan.children_stored:
        query = query.where(Task.plan_id == plan.id)
    first = session.exec(query).one() or 0  # the database's min: a release reads one row
    return max(job.approved_wave, first)

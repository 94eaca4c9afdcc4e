"""Plan rows and the reads the engine decides on with them: a job's latest round, how many
it had, and the wave its gate lets run."""

from __future__ import annotations

from sqlmodel import Session, col, func, select

from relay_engine.core.states import JobState, PlanState, TaskState
from relay_engine.store.schema import Job, Plan, Task
from relay_engine.store.task_rows import job_tasks


def latest_plan(session: Session, job_id: str) -> Plan | None:
    query = (
        select(Plan)
        .where(Plan.job_id == job_id, Plan.status != PlanState.SUPERSEDED)
        .order_by(col(Plan.round).desc())
    )
    return session.exec(query).first()


def round_count(session: Session, job_id: str) -> int:
    rounds = session.exec(select(Plan.round).where(Plan.job_id == job_id)).all()
    return max(rounds, default=0)


def gated_keys(session: Session) -> frozenset[str]:
    """DRAFT tasks held by a wave gate: their wave is beyond the job's allowed wave."""
    jobs = session.exec(select(Job).where(Job.state == JobState.ACTIVE, Job.wave_gate != "auto"))
    keys: set[str] = set()
    for job in jobs:
        allowed = allowed_wave(session, job)
        drafts = job_tasks(session, job.id, [TaskState.DRAFT])
        keys.update(t.key for t in drafts if t.wave > allowed)
    return frozenset(keys)


def allowed_wave(session: Session, job: Job) -> int:
    """The highest wave that may run: the first wave of the current plan always does."""
    plan = latest_plan(session, job.id)
    query = select(func.min(Task.wave)).where(Task.job_id == job.id)
    if plan is not None and plan.children_stored:
        query = query.where(Task.plan_id == plan.id)
    first = session.exec(query).one() or 0  # the database's min: a release reads one row
    return max(job.approved_wave, first)

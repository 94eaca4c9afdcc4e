"""Job state changes inside a transaction: checked, timestamped and logged together.

Every path that moves a job (settling its work, planner rounds, pull requests, operator
commands, waits on other jobs) goes through :func:`move_job`, so the transition table is
enforced in one place, ``error`` means the same everywhere (why the job FAILED, cleared
otherwise), and the event's kind and level follow from the target state.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from relay_engine.core.states import TERMINAL_JOB_STATES, JobState, check_job
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Job

_LEVELS = {
    JobState.FAILED: "error",
    JobState.BLOCKED: "error",
    JobState.CANCELLED: "warning",
    JobState.CLOSED: "warning",
}


def move_job(
    session: Session,
    job: Job,
    target: JobState,
    *,
    now: float,
    why: str | None = None,
    kind: EventKind | None = None,
    message: str | None = None,
    **fields: Any,
) -> Job:
    """Change a job's state (and other fields) and append the event that says so.

    The event is ``job.finished`` for a terminal state, else ``job.<state>``, unless
    ``kind`` names another; its message is "job J <state>: <why>" unless given.
    """
    job.state = check_job(job.state, target, key=job.id)
    job.error = why if target == JobState.FAILED else None
    for name, value in fields.items():
        setattr(job, name, value)
    job.updated_at = now
    session.add(job)
    default_kind = EventKind.JOB_FINISHED if target in TERMINAL_JOB_STATES else None
    said = why or (fields.get("blocked_by") if target == JobState.BLOCKED else None)
    record_event(
        session,
        kind or default_kind or EventKind(f"job.{target.lower()}"),
        message or f"job {job.id} {target.lower()}" + (f": {said}" if said else ""),
        now=now,
        job_id=job.id,
        level=_LEVELS.get(target, "info"),
        data={"state": target.value},
    )
    return job

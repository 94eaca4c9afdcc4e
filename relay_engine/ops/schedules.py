"""Scheduled jobs: a job file with ``schedule`` stored as a template, and on full ticks the
runs its due slots start (:mod:`relay_engine.core.schedules` decides which).

Two engines on one database decide the same slot at the same time; only the one whose
compare-and-swap of the template's cursor succeeds makes the run, and the run's id
(``<template>@<slot>``) is the job table's primary key, so even a cursor written by hand
cannot make a second job for one slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from sqlmodel import Session, col, select, update
from sqlmodel.sql.expression import SelectOfScalar

from relay_engine.contracts.config import EngineConfig
from relay_engine.contracts.job_file import (
    JobSpec,
    schedule_rule,
    spec_from_stored,
    stored_spec,
)
from relay_engine.contracts.schedules import CatchUp, ScheduleRule
from relay_engine.contracts.time_format import format_time
from relay_engine.core.schedules import (
    Slot,
    SlotDecision,
    decide_slots,
    next_slot,
    run_job_id,
)
from relay_engine.ops.jobs import JobConflict, SubmitOutcome, add_job
from relay_engine.ops.refusals import Refused
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Job, Schedule


def submit_schedule(store: Store, spec: JobSpec, *, now: float) -> SubmitOutcome:
    """Store a template (idempotent like a job): its first slot is the first after ``now``."""
    rule = schedule_rule(spec.job)
    assert rule is not None
    template = spec.job.id
    with store.write(wakes=True) as session:  # an idle engine then watches for its slots
        existing = session.get(Schedule, template)
        if existing is not None:
            if existing.spec_hash == spec.spec_hash():
                return SubmitOutcome(template, created=False, task_count=len(spec.tasks))
            raise JobConflict(
                f"{spec.source}: scheduled job {template!r} already exists with a different "
                f"definition (submitted from {existing.source_path}); choose another id"
            )
        if session.get(Job, template) is not None:
            raise JobConflict(f"{spec.source}: job {template!r} already exists; choose another id")
        session.add(
            Schedule(
                id=template,
                cron=rule.cron,
                timezone=rule.timezone,
                catch_up=rule.catch_up,
                spec=stored_spec(spec),
                spec_hash=spec.spec_hash(),
                source_path=str(spec.source),
                cursor_at=now,
                created_at=now,
                updated_at=now,
            )
        )
        first = next_slot(rule, now)
        record_event(
            session,
            EventKind.SCHEDULE_SUBMITTED,
            f"scheduled job {template} submitted ({rule.cron}, {rule.timezone}): "
            f"first run {template}@{first.label}",
            now=now,
        )
    return SubmitOutcome(template, created=True, task_count=len(spec.tasks))


def start_due_runs(store: Store, now: float, engine: EngineConfig | None = None) -> bool:
    """Every running template's due slot becomes a run; True when any template moved on."""
    with store.read() as session:
        running = session.exec(_running())
        templates = [(row.id, stored_rule(row), row.cursor_at) for row in running]
    changed = False
    for template, rule, cursor in templates:
        decision = decide_slots(rule, cursor, now)
        if decision.cursor != cursor:
            changed |= _apply(store, template, cursor, decision, now, engine)
    return changed


def next_slots(session: Session) -> list[float]:
    """When each running template's next slot comes: an engine that sleeps while its fleet
    only waits wakes for the first (:mod:`~relay_engine.loop.outlook`)."""
    return [next_slot(stored_rule(row), row.cursor_at).at for row in session.exec(_running())]


def pause_schedule(store: Store, template: str, now: float) -> str:
    """Stop a template from starting runs (the runs it made go on); the outcome line."""
    with store.write() as session:
        row = _template(session, template)
        if row.paused_at is not None:
            return f"scheduled job {template} is already paused"
        row.paused_at, row.updated_at = now, now
        session.add(row)
        said = f"scheduled job {template} paused: no runs start until `relay schedules resume`"
        record_event(session, EventKind.SCHEDULE_PAUSED, said, now=now)
    return said


def resume_schedule(store: Store, template: str, now: float) -> str:
    """Start runs again from the next slot: the slots that passed while it was paused are
    skipped, not made up (a pause is the operator's choice, not a missed slot)."""
    with store.write() as session:
        row = _template(session, template)
        if row.paused_at is None:
            return f"scheduled job {template} is not paused"
        row.paused_at, row.cursor_at, row.updated_at = None, max(now, row.cursor_at), now
        session.add(row)
        upcoming = next_slot(stored_rule(row), row.cursor_at)
        said = f"scheduled job {template} resumed: next run {run_job_id(template, upcoming)}"
        record_event(session, EventKind.SCHEDULE_RESUMED, said, now=now)
    return said


def remove_schedule(store: Store, template: str, now: float) -> str:
    """Forget a template, so its id can be submitted again with a new definition; the
    runs it made stay jobs of their own."""
    with store.write() as session:
        session.delete(_template(session, template))
        said = f"scheduled job {template} removed: the runs it made stay"
        record_event(session, EventKind.SCHEDULE_REMOVED, said, now=now)
    return said


def _template(session: Session, template: str) -> Schedule:
    row = session.exec(select(Schedule).where(col(Schedule.id) == template).with_for_update())
    found = row.first()
    if found is None:
        known = ", ".join(session.exec(select(Schedule.id).order_by(col(Schedule.id)))) or "none"
        raise Refused(f"no scheduled job {template!r} (scheduled jobs: {known})")
    return found


def _running() -> SelectOfScalar[Schedule]:
    """The templates that start runs: every one not paused."""
    return select(Schedule).where(col(Schedule.paused_at).is_(None))


def stored_rule(row: Schedule) -> ScheduleRule:
    catch_up: CatchUp = "none" if row.catch_up == "none" else "last"
    return ScheduleRule(row.cron, row.timezone, catch_up)


def _apply(
    store: Store,
    template: str,
    cursor: float,
    decision: SlotDecision,
    now: float,
    engine: EngineConfig | None,
) -> bool:
    """Move the cursor from where this engine read it; only then report and make the run."""
    with store.write() as session:
        moved = session.exec(
            update(Schedule)
            .where(col(Schedule.id) == template, col(Schedule.cursor_at) == cursor)
            .where(col(Schedule.paused_at).is_(None))  # paused since this engine read it
            .values(cursor_at=decision.cursor, updated_at=now)
        )
        if moved.rowcount != 1:
            return False  # another engine decided these slots first
        row = session.get(Schedule, template)
        assert row is not None
        if decision.missed:
            _report_missed(session, row, decision, now)
        if decision.run is not None:
            _make_run(session, row, decision.run, now, engine)
    return True


def _report_missed(session: Session, row: Schedule, decision: SlotDecision, now: float) -> None:
    assert decision.first_missed is not None and decision.last_missed is not None
    count = f"{decision.missed}{'+' if decision.missed_capped else ''}"
    span = decision.first_missed.label
    if decision.missed > 1:
        span += f" .. {decision.last_missed.label}"
    ran = (
        f"; catch_up = {row.catch_up!r} runs {row.id}@{decision.run.label}"
        if decision.run is not None
        else f"; catch_up = {row.catch_up!r} runs none of them"
    )
    row.missed_count += decision.missed
    row.last_missed_at = decision.last_missed.at
    record_event(
        session,
        EventKind.SCHEDULE_MISSED,
        f"scheduled job {row.id} missed {count} slot(s) while no engine ran ({span}){ran}",
        now=now,
        level="warning",
        data={"schedule": row.id, "missed": decision.missed, "first": span.split(" ")[0]},
    )


def _make_run(
    session: Session, row: Schedule, slot: Slot, now: float, engine: EngineConfig | None
) -> None:
    """The slot's job, from the template as submitted; one that cannot be made is said once
    and kept on the template (``relay schedules``), never retried every tick."""
    job_id = run_job_id(row.id, slot)
    if session.get(Job, job_id) is not None:
        return
    try:
        spec = spec_from_stored(row.spec, _source(row))
    except (ValidationError, KeyError, TypeError) as error:
        row.problem = f"the stored template cannot be read: {error}"
        record_event(
            session,
            EventKind.SCHEDULE_FAILED,
            f"scheduled job {row.id}: no run for {slot.label}: {row.problem}",
            now=now,
            level="error",
        )
        return
    add_job(session, spec, job_id=job_id, now=now, engine=engine, why=f" (schedule {row.id})")
    row.last_run_job, row.last_run_at, row.problem = job_id, slot.at, None
    record_event(
        session,
        EventKind.SCHEDULE_RUN,
        f"scheduled job {row.id}: slot {slot.label} started {job_id}",
        now=now,
        job_id=job_id,
    )


def _source(row: Schedule) -> Path:
    return Path(row.source_path or row.id)


# --- what `relay schedules` shows ---------------------------------------------------------


@dataclass(frozen=True)
class ScheduleView:
    """One template as ``relay schedules`` shows it (and its ``--json``)."""

    id: str
    cron: str
    timezone: str
    catch_up: str
    next_run: str  # the job id the next slot will start
    next_at: float
    last_run: str | None
    last_run_at: float | None
    last_run_state: str | None
    missed: int
    last_missed_at: float | None
    problem: str | None
    source: str | None
    paused_at: float | None = None

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    def next_text(self) -> str:
        if self.paused_at is not None:
            return f"paused since {format_time(self.paused_at)}"
        return f"{self.next_run} ({format_time(self.next_at)})"


def read_schedules(session: Session, now: float) -> list[ScheduleView]:
    """Every template with its next slot after whichever is later, now or its cursor."""
    views = []
    for row in session.exec(select(Schedule).order_by(col(Schedule.id))):
        upcoming = next_slot(stored_rule(row), max(now, row.cursor_at))
        last = session.get(Job, row.last_run_job) if row.last_run_job else None
        views.append(
            ScheduleView(
                id=row.id,
                cron=row.cron,
                timezone=row.timezone,
                catch_up=row.catch_up,
                next_run=run_job_id(row.id, upcoming),
                next_at=upcoming.at,
                last_run=row.last_run_job,
                last_run_at=row.last_run_at,
                last_run_state=last.state if last is not None else None,
                missed=row.missed_count,
                last_missed_at=row.last_missed_at,
                problem=row.problem,
                source=row.source_path,
                paused_at=row.paused_at,
            )
        )
    return views

"""Wave gates that an agent opens: after each wave an assessor decides continue or replan.

The assessment is an ordinary task (kind ``assess``, role ``assessor``) that depends on
every task of the wave, so it is dispatched, leased, retried and recovered like any
other; only its result is read here.
"""

from __future__ import annotations

from sqlmodel import Session, select

from relay_engine.contracts.planner import AssessorResult, assessor_prompt, validate_assessor_output
from relay_engine.contracts.task_definitions import TaskDef
from relay_engine.core.states import TERMINAL_TASK_STATES, TaskState
from relay_engine.core.writeback import assessment_note
from relay_engine.ops.notes import record_note
from relay_engine.ops.plans import replan, task_summaries
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.plan_rows import allowed_wave
from relay_engine.store.schema import Event, Job, Task
from relay_engine.store.task_rows import add_tasks

DEFAULT_ASSESSOR_SCRIPT = {
    "duration": 0.5,
    "result": {"decision": "continue", "summary": "on track"},
}


def assess_task_id(wave: int) -> str:
    return f"assess-wave-{wave}"


def advance_assess_gate(session: Session, job: Job, now: float) -> bool:
    """Create the assessment of a finished wave, or act on its verdict."""
    wave = allowed_wave(session, job)
    tasks = list(session.exec(select(Task).where(Task.job_id == job.id)))
    later = [t for t in tasks if t.wave > wave and t.state == TaskState.DRAFT]
    if not later:
        return False
    assess = next((t for t in tasks if t.task_id == assess_task_id(wave)), None)
    if assess is None:
        return _create_assessment(session, job, wave, tasks, now)
    if assess.state == TaskState.SUCCEEDED:
        return _apply_verdict(session, job, wave, assess, now)
    return False


def _create_assessment(
    session: Session, job: Job, wave: int, tasks: list[Task], now: float
) -> bool:
    members = [t for t in tasks if t.wave == wave and t.kind != "assess"]
    if not members or any(t.state not in TERMINAL_TASK_STATES for t in members):
        return False
    summaries = [s for s in task_summaries(session, job.id) if s.id in {t.task_id for t in members}]
    script = (job.sim or {}).get("assessor", DEFAULT_ASSESSOR_SCRIPT)
    definition = TaskDef(
        id=assess_task_id(wave),
        title=f"Assess wave {wave}",
        role="assessor",
        kind="assess",
        input=assessor_prompt(objective=job.objective, wave=wave, tasks=summaries),
        depends_on=[],
        sim=script,
    )
    (row,) = add_tasks(session, job.id, job.priority, [definition], now=now)
    row.wave = wave
    row.plan_id = members[0].plan_id
    session.add(row)
    record_event(
        session,
        EventKind.WAVE_ASSESSING,
        f"job {job.id}: assessing wave {wave}",
        now=now,
        job_id=job.id,
        data={"wave": wave},
    )
    return True


def hold_gate(session: Session, assess: Task, now: float) -> None:
    """An assessment that failed for good (its answers unusable, or its runs failing) holds
    the next wave: a gate that cannot decide stays closed until the operator does."""
    job = session.get(Job, assess.job_id)
    if job is None:
        return
    record_event(
        session,
        EventKind.GATE_HELD,
        f"job {job.id}: wave {assess.wave + 1} held: the assessment of wave {assess.wave} "
        f"failed ({(assess.error or 'no reason recorded')[:200]}); relay approve {job.id} "
        f"lets it run, relay replan {job.id} revises the plan",
        now=now,
        job_id=job.id,
        task_key=assess.key,
        level="warning",
        data={"wave": assess.wave + 1},
    )


def _apply_verdict(session: Session, job: Job, wave: int, assess: Task, now: float) -> bool:
    verdict = validate_assessor_output(
        assess.result if assess.result is not None else assess.result_summary
    )
    if not isinstance(verdict, AssessorResult):  # vetted at completion: a row from before
        said = select(Event.id).where(
            Event.task_key == assess.key, Event.kind == EventKind.GATE_HELD
        )
        if session.exec(said).first() is not None:
            return False
        assess.error = f"assessor answer rejected: {verdict.reason}"
        hold_gate(session, assess, now)
        return True
    job.approved_wave = wave + 1
    session.add(job)
    note = assessment_note(
        job.id, assess.key, wave, verdict.decision, verdict.summary, verdict.findings
    )
    record_note(session, note, now)
    if verdict.decision == "replan":
        guidance = "; ".join([verdict.summary, *verdict.findings]).strip("; ")
        replan(session, job, guidance, now, trigger="wave-assessment")
        return True
    record_event(
        session,
        EventKind.WAVE_APPROVED,
        f"job {job.id}: assessor approved wave {wave + 1}: {verdict.summary}",
        now=now,
        job_id=job.id,
        data={"wave": wave + 1},
    )
    return True

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
from relay_engine.ops.plans import allowed_wave, replan, task_summaries
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Job, Task
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


def _apply_verdict(session: Session, job: Job, wave: int, assess: Task, now: float) -> bool:
    verdict = validate_assessor_output(
        assess.result if assess.result is not None else assess.result_summary
    )
    job.approved_wave = wave + 1
    session.add(job)
    if not isinstance(verdict, AssessorResult):
        record_event(
            session,
            EventKind.WAVE_APPROVED,
            f"job {job.id}: assessor answer unusable ({verdict.reason}); wave {wave + 1} runs on",
            now=now,
            job_id=job.id,
            level="warning",
        )
        return True
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

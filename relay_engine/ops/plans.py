"""Planner rounds: an objective becomes waves of tasks, round after round.

A round is a Plan row with executions of its own (not a task). The decisions about
what a job needs next are pure (:func:`next_step`); the rest of this module gathers
their inputs and applies them in short transactions, reusing the same claim, lease
and fencing rules as tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select, update

from relay_engine.contracts.planner import (
    FleetAgent,
    PlanAccepted,
    PlannerResult,
    PlanRejected,
    TaskSummary,
    materialise,
    planner_prompt,
    validate_planner_output,
    with_blockers,
)
from relay_engine.core.planning import JobFacts
from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    RETRYABLE_TASK_STATES,
    SUPERSEDABLE_TASK_STATES,
    JobState,
    PlanState,
    TaskState,
    check_plan,
)
from relay_engine.core.writeback import plan_note
from relay_engine.ops.notes import record_note
from relay_engine.ops.refusals import Refused
from relay_engine.ops.tasks import cancel_task, drop_task, retry_task
from relay_engine.ops.upstream import blocker_problems
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.plan_rows import allowed_wave, latest_plan, round_count
from relay_engine.store.read_model.agents import agent_rows, known_agents
from relay_engine.store.schema import Execution, Job, Plan, Task
from relay_engine.store.task_rows import add_tasks, job_tasks

PLAN_MAX_ATTEMPTS = 3


def job_facts(session: Session, job: Job) -> JobFacts:
    plan = latest_plan(session, job.id)
    active = [
        t
        for t in job_tasks(session, job.id, ACTIVE_TASK_STATES)
        if not (t.state == TaskState.DRAFT and t.blocked_by)
    ]
    return JobFacts(
        state=job.state,
        rounds=round_count(session, job.id),
        max_rounds=job.max_plan_rounds,
        latest_status=plan.status if plan else None,
        latest_objective=plan.objective_status if plan else None,
        children_stored=plan.children_stored if plan else False,
        active_tasks=len(active),
    )


def open_round(
    session: Session,
    job: Job,
    *,
    trigger: str,
    now: float,
    guidance: str | None = None,
    previous: Plan | None = None,
) -> Plan:
    plan = Plan(
        job_id=job.id,
        round=round_count(session, job.id) + 1,
        trigger=trigger,
        guidance=guidance,
        previous_plan_id=previous.id if previous else None,
        status=PlanState.PLANNING,
        max_attempts=PLAN_MAX_ATTEMPTS,
        assessment=previous.assessment if previous else None,
        created_at=now,
        updated_at=now,
    )
    session.add(plan)
    session.flush()
    detail = f" with guidance: {guidance}" if guidance else ""
    record_event(
        session,
        EventKind.PLAN_CREATED,
        f"job {job.id}: planner round {plan.round} ({trigger}){detail}",
        now=now,
        job_id=job.id,
        plan_id=plan.id,
        data={"round": plan.round, "trigger": trigger},
    )
    return plan


def _hold_on_blockers(rows: Sequence[Task], result: PlannerResult) -> None:
    """A child a blocker names waits on that job or task like any cross-job dependency:
    ``external_deps`` holds ``JOB/TASK`` keys, and (from planners only) bare job ids."""
    waits: dict[str, list[str]] = {}
    for blocker in result.blockers:
        waits.setdefault(blocker.task, []).append(blocker.on)
    for row in rows:
        if row.task_id in waits:
            row.external_deps = sorted({*(row.external_deps or []), *waits[row.task_id]})


def store_children(session: Session, job: Job, plan: Plan, now: float) -> None:
    """Materialise a successful plan's tasks; idempotent, and a clash fails the plan.

    Only into an ACTIVE job: a cancelled or finished job never grows new work."""
    if job.state != JobState.ACTIVE:
        return
    result = PlannerResult.model_validate(plan.result or {"objective_status": "in_progress"})
    existing = {
        t.task_id: t.spec_hash for t in session.exec(select(Task).where(Task.job_id == job.id))
    }
    outcome = materialise(result.next_tasks, existing, job.priority)
    if not outcome.ok:
        _fail_round(session, plan, outcome.reason, now, level="error")
        return
    rows = add_tasks(session, job.id, job.priority, list(outcome.create), now=now, plan_id=plan.id)
    _hold_on_blockers(rows, result)
    run_again(session, job, plan, result.unblocks, now)
    plan.children_stored = True
    plan.generated_task_ids = [t.id for t in result.next_tasks]
    plan.updated_at = now
    session.add(plan)
    record_event(
        session,
        EventKind.PLAN_MATERIALISED,
        f"job {job.id} round {plan.round}: {len(outcome.create)} new tasks"
        + (f", {len(outcome.unchanged)} unchanged" if outcome.unchanged else ""),
        now=now,
        job_id=job.id,
        plan_id=plan.id,
    )


def accept_result(session: Session, plan: Plan, result: PlannerResult, now: float) -> None:
    plan.status = check_plan(plan.status, PlanState.SUCCEEDED, key=f"plan {plan.id}")
    plan.objective_status = result.objective_status
    plan.assessment = result.assessment
    plan.result = result.model_dump(mode="json", by_alias=False)
    plan.rejection = None
    plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
    plan.updated_at = now
    session.add(plan)
    record_event(
        session,
        EventKind.PLAN_SUCCEEDED,
        f"job {plan.job_id} round {plan.round}: {len(result.next_tasks)} tasks, "
        f"objective {result.objective_status}",
        now=now,
        job_id=plan.job_id,
        plan_id=plan.id,
    )
    tasks = [(task.id, task.title or task.id) for task in result.next_tasks]
    note = plan_note(
        plan.job_id, plan.round, plan.trigger, result.objective_status, result.assessment, tasks
    )
    record_note(session, note, now)


def reject_attempt(session: Session, plan: Plan, reason: str, now: float) -> None:
    """An unusable planner answer: retry with the reason, or fail the round and its job."""
    plan.rejection = reason
    plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
    plan.updated_at = now
    if plan.attempt < plan.max_attempts:
        record_event(
            session,
            EventKind.PLAN_REJECTED,
            f"job {plan.job_id} round {plan.round} attempt {plan.attempt}: {reason}",
            now=now,
            job_id=plan.job_id,
            plan_id=plan.id,
            level="warning",
        )
        session.add(plan)
        return
    error = f"planner output rejected {plan.attempt} times: {reason}"
    _fail_round(session, plan, error, now, level="error")


def fail_plan(session: Session, plan: Plan, reason: str, now: float) -> None:
    """End a planner round for good. Its execution loses the claim, so the engine running
    the planner kills it (fencing) and nothing it answers is ever materialised."""
    _fail_round(session, plan, reason, now, level="warning")
    plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
    plan.updated_at = now


def _fail_round(session: Session, plan: Plan, error: str, now: float, *, level: str) -> None:
    """However a round fails (a clash of its tasks, answers rejected too often, or ended
    from outside), its row and its ``plan.failed`` event say the same error. The level
    is the caller's: ``error`` where the planner's work was at fault."""
    plan.status = check_plan(plan.status, PlanState.FAILED, key=f"plan {plan.id}")
    plan.error = error
    session.add(plan)
    record_event(
        session,
        EventKind.PLAN_FAILED,
        f"job {plan.job_id} round {plan.round}: {error}",
        now=now,
        job_id=plan.job_id,
        plan_id=plan.id,
        level=level,
    )


def supersede(session: Session, job: Job, new_round: int, now: float) -> int:
    """Retire the job's current plan; cancel its tasks that have not started yet."""
    cancelled = 0
    for plan in session.exec(
        select(Plan).where(
            Plan.job_id == job.id, col(Plan.status).in_([PlanState.PLANNING, PlanState.SUCCEEDED])
        )
    ):
        plan.status = check_plan(plan.status, PlanState.SUPERSEDED, key=f"plan {plan.id}")
        plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
        plan.updated_at = now
        session.add(plan)
    for task in job_tasks(session, job.id, SUPERSEDABLE_TASK_STATES):
        if task.state == TaskState.QUEUED and task.execution_id:
            continue  # claimed and starting: it runs on like a running task
        cancel_task(session, task, f"superseded by plan {new_round}", now, with_dependents=False)
        cancelled += 1
    return cancelled


def replan(
    session: Session, job: Job, guidance: str | None, now: float, *, trigger: str = "manual"
) -> str:
    """A new planner round with guidance; the old plan's unstarted tasks are cancelled."""
    _reopen(session, job, now)
    previous = latest_plan(session, job.id)
    new_round = round_count(session, job.id) + 1
    cancelled = supersede(session, job, new_round, now)
    guidance = (guidance or "").strip() or None
    open_round(session, job, trigger=trigger, now=now, guidance=guidance, previous=previous)
    return f"job {job.id}: replanning as round {new_round} ({cancelled} unstarted tasks cancelled)"


def _reopen(session: Session, job: Job, now: float) -> None:
    """A job that gets a new plan is planned (autonomous) and active from now on."""
    job.mode = "autonomous"
    if job.state != JobState.ACTIVE:
        message = f"job {job.id} active again: replanned"
        move_job(
            session, job, JobState.ACTIVE, now=now, kind=EventKind.JOB_REACTIVATED,
            message=message, blocked_by=None,
        )  # fmt: skip
    session.add(job)


def approve_wave(session: Session, job: Job, now: float) -> str:
    if job.wave_gate == "auto":
        raise Refused(f"job {job.id} has no wave gate (wave_gate = auto)")
    wave = allowed_wave(session, job)
    held = session.exec(
        select(Task).where(
            Task.job_id == job.id, Task.kind == "assess", Task.wave == wave,
            Task.state == TaskState.FAILED,
        )
    ).first()  # fmt: skip
    if held is not None:  # the operator decides in the assessor's place
        drop_task(session, held, now, by="the wave's approval")
    job.approved_wave = wave + 1
    job.updated_at = now
    session.add(job)
    record_event(
        session,
        EventKind.WAVE_APPROVED,
        f"job {job.id}: wave {job.approved_wave} approved",
        now=now,
        job_id=job.id,
        data={"wave": job.approved_wave},
    )
    return f"approved wave {job.approved_wave} of job {job.id}"


def install_plan(
    session: Session,
    job: Job,
    answer: object,
    now: float,
    *,
    guidance: str | None = None,
) -> str:
    """A plan written by hand: validated like a planner's, stored, materialised next tick."""
    verdict = vet_plan(session, job.id, answer, now)
    if not isinstance(verdict, PlanAccepted):
        raise Refused(verdict.reason)
    previous = latest_plan(session, job.id)
    supersede(session, job, round_count(session, job.id) + 1, now)
    _reopen(session, job, now)
    plan = open_round(session, job, trigger="manual", now=now, previous=previous, guidance=guidance)
    plan.source = "manual"
    accept_result(session, plan, verdict.result, now)
    return f"job {job.id}: manual plan installed as round {plan.round}"


def task_summaries(session: Session, job_id: str) -> list[TaskSummary]:
    tasks = session.exec(select(Task).where(Task.job_id == job_id).order_by(col(Task.created_at)))
    return [
        TaskSummary(
            id=t.task_id,
            title=t.title,
            state=t.state,
            result_summary=t.result_summary,
            error=t.error,
            role=t.role,
            dependencies=tuple(t.dependencies),
        )
        for t in tasks
    ]


def fleet_roster(session: Session, now: float) -> list[FleetAgent]:
    """The enabled agents every engine defines (as each mirrored its roster), and whether
    each could work now: what a planner may give work to."""
    model_classes = {r.id: r.model_class for r in known_agents(session)}
    return [
        FleetAgent(row.id, row.provider, row.roles, model_classes.get(row.id), row.summary)
        for row in agent_rows(session, now)
        if row.enabled
    ]


def vet_plan(
    session: Session, job_id: str, answer: object, now: float, *, max_input_bytes: int | None = None
) -> PlanAccepted | PlanRejected:
    """A planner's (or the operator's) plan, checked against the job's tasks and the fleet:
    a role no agent takes, or an agent no engine defines, would leave its task waiting for
    ever. Before any engine has mirrored its roster there is nothing to check against."""
    existing = session.exec(select(Task.task_id).where(Task.job_id == job_id)).all()
    roster = fleet_roster(session, now)
    limit = {"max_input_bytes": max_input_bytes} if max_input_bytes else {}
    vetted = validate_planner_output(
        answer,
        existing_task_ids=existing,
        known_roles={role for agent in roster for role in agent.roles} if roster else None,
        known_agents={agent.id for agent in roster} if roster else None,
        **limit,
    )
    if isinstance(vetted, PlanAccepted) and vetted.result.blockers:
        problems = blocker_problems(session, job_id, vetted.result.blockers)
        return with_blockers(vetted, problems)
    return vetted


def build_planner_prompt(session: Session, job: Job, plan: Plan, now: float) -> str:
    tasks = task_summaries(session, job.id)
    roster = fleet_roster(session, now)
    workstreams = session.exec(
        select(Task.workstream).where(Task.job_id == job.id, col(Task.workstream).is_not(None))
    ).all()
    judged = session.exec(
        select(Plan.id).where(Plan.job_id == job.id, col(Plan.objective_status).is_not(None))
    ).first()
    return planner_prompt(
        objective=job.objective.strip()
        or f"Finish the job “{job.title or job.id}”: the tasks listed below.",
        round=plan.round,
        trigger=plan.trigger,
        guidance=plan.guidance,
        tasks=tasks,
        previous_assessment=plan.assessment,
        rejection=plan.rejection,
        roles=sorted({role for agent in roster for role in agent.roles}),
        handed_over=judged is None and bool(tasks),
        agents=roster,
        workstreams=sorted({w for w in workstreams if w}),
    )


def run_again(session: Session, job: Job, plan: Plan, task_ids: Sequence[str], now: float) -> int:
    """The plan's ``unblocks``: its FAILED or CANCELLED tasks are queued again as they are."""
    again = 0
    for task in job_tasks(session, job.id, RETRYABLE_TASK_STATES):
        if task.task_id in task_ids:
            retry_task(session, task, now, why=f"by planner round {plan.round}")
            again += 1
    return again


def claim_plan(
    session: Session,
    plan: Plan,
    *,
    engine_id: str,
    execution_id: str,
    agent_id: str,
    provider: str,
    lease_s: float,
    now: float,
) -> bool:
    result = session.exec(
        update(Plan)
        .where(
            col(Plan.id) == plan.id,
            col(Plan.status) == PlanState.PLANNING,
            col(Plan.execution_id).is_(None),
        )
        .values(
            attempt=Plan.attempt + 1,
            execution_id=execution_id,
            lease_owner=engine_id,
            lease_expires_at=now + lease_s,
            agent=agent_id,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return False
    session.refresh(plan)  # the attempt the UPDATE just counted
    session.add(
        Execution(
            id=execution_id,
            job_id=plan.job_id,
            plan_id=plan.id,
            engine_id=engine_id,
            attempt=plan.attempt,
            agent=agent_id,
            provider=provider,
        )
    )
    return True

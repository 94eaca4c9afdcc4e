"""The imperative side of planning: start planner executions and apply what they return."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import or_
from sqlmodel import Session, col, select

from relay_engine.agents.launch import LaunchRequest
from relay_engine.agents.runner import LaunchError, LaunchSpec
from relay_engine.contracts.planner import PlanAccepted
from relay_engine.core.outcomes import GONE, Outcome, OutcomeKind
from relay_engine.core.planning import next_step
from relay_engine.core.recovery import ClaimFacts
from relay_engine.core.selection import FleetView, Selected, Work, pick_agent
from relay_engine.core.states import JobState, PlanState
from relay_engine.git.worktrees import WorkspaceError
from relay_engine.loop.live import FinishedExecution, LiveExecution, record_spawn
from relay_engine.loop.reclaim import kill_orphan, take_back_plan
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops import agents as agent_status
from relay_engine.ops.completion import finish_execution_row, record_limit
from relay_engine.ops.gates import advance_assess_gate
from relay_engine.ops.plans import (
    accept_result,
    build_planner_prompt,
    claim_plan,
    job_facts,
    open_round,
    reject_attempt,
    store_children,
    vet_plan,
)
from relay_engine.ops.pulls import to_review
from relay_engine.store import spend
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.plan_rows import latest_plan
from relay_engine.store.schema import Job, Plan

PLANNER_TIMEOUT_S = 30 * 60
_PLANNED = col(Job.mode) == "autonomous"  # a planner plans its tasks, round by round
_ASSESSED = col(Job.wave_gate) == "assess"  # an assessor gates each of its waves


class PlannerRounds:
    """Drives every autonomous job: open rounds, run planners, store their children."""

    def __init__(
        self, runtime: EngineRuntime, *, spawn: Callable[..., tuple[LiveExecution, LaunchSpec]]
    ) -> None:
        self.runtime = runtime
        self.spawn = spawn

    def tick(self, now: float) -> bool:
        """The fleet's chore: take back lost planner rounds, advance planned jobs and
        assessed waves (any engine may; see :mod:`relay_engine.core.turns`)."""
        store = self.runtime.store
        changed = self._recover(now)
        if not self._any_to_advance():
            return changed
        with store.write() as session:
            planned = session.exec(select(Job).where(Job.state == JobState.ACTIVE, _PLANNED))
            for job in planned.all():
                changed |= self._advance(session, job, now)
            assessed = session.exec(select(Job).where(Job.state == JobState.ACTIVE, _ASSESSED))
            for job in assessed.all():
                changed |= advance_assess_gate(session, job, now)
        return changed

    def _any_to_advance(self) -> bool:
        """Whether an active job is planned or gated by assessment: looked at in a read, so
        a fleet without such jobs does not take the write lock every tick to find none
        (SQLite's one writer would wait on it, PostgreSQL would open a write for nothing)."""
        query = select(Job.id).where(Job.state == JobState.ACTIVE, or_(_PLANNED, _ASSESSED))
        query = query.limit(1)
        with self.runtime.store.read() as session:
            return session.exec(query).first() is not None

    def _advance(self, session: Session, job: Job, now: float) -> bool:
        step = next_step(job_facts(session, job))
        latest = latest_plan(session, job.id)
        if step == "start-initial":
            open_round(session, job, trigger="initial", now=now)
        elif step == "continue":
            open_round(session, job, trigger="continuation", now=now, previous=latest)
        elif step == "materialise" and latest is not None:
            store_children(session, job, latest, now)
        elif step == "succeed":
            if not to_review(session, job, now):
                move_job(session, job, JobState.SUCCEEDED, now=now)
        elif step == "fail":
            why = latest.error if latest else "planning failed"
            self._block(session, job, f"planner round failed: {why}", now)
        elif step == "exhausted":
            why = f"objective not satisfied after {job.max_plan_rounds} planner rounds"
            self._block(session, job, why, now)
        else:
            return False
        return True

    def _block(self, session: Session, job: Job, why: str, now: float) -> None:
        """Planning cannot go on by itself: BLOCKED until the operator replans (with
        guidance), merges what is done, or closes the job."""
        ways = f"relay replan {job.id} --guidance …, relay merge {job.id} --force, or relay close {job.id}"
        move_job(session, job, JobState.BLOCKED, now=now, blocked_by=f"{why}; {ways}"[:2000])

    # -- planner executions ---------------------------------------------------------------
    def start_planners(self, now: float) -> bool:
        """Rounds waiting for a planner start on this engine's agents: every engine looks
        (each has its own agents and slots), where :meth:`tick` is the fleet's chore."""
        with self.runtime.store.read() as session:
            waiting = session.exec(
                select(Plan).where(
                    Plan.status == PlanState.PLANNING, col(Plan.execution_id).is_(None)
                )
            ).all()
            if not waiting:  # the usual case: no fleet, job or spend read for nobody
                return False
            fleet = self.runtime.fleet_view(session, now, {})  # the tick's, shared with dispatch
            jobs = session.exec(select(Job).where(col(Job.id).in_({p.job_id for p in waiting})))
            spent = spend.job_holds(session, jobs.all())
        started = False
        for plan in waiting:
            if plan.job_id in spent:
                continue  # a planner round costs like any run: it waits for a raised budget
            started |= self._start(plan, fleet, now)
        return started

    def _start(self, plan: Plan, fleet: FleetView, now: float) -> bool:
        runtime = self.runtime
        choice = pick_agent(Work(plan.job_id, "planner"), runtime.config.agents, fleet, now)
        if not isinstance(choice, Selected):
            return False
        agent = runtime.config.agent(choice.agent_id)
        assert agent is not None
        execution_id = uuid.uuid4().hex
        with runtime.store.write() as session:
            fresh = session.get(Plan, plan.id)
            job = session.get(Job, plan.job_id)
            if (
                fresh is None
                or job is None
                or not claim_plan(
                    session,
                    fresh,
                    engine_id=runtime.engine_id,
                    execution_id=execution_id,
                    agent_id=agent.id,
                    provider=agent.provider,
                    lease_s=runtime.config.engine.lease_seconds,
                    now=now,
                )
            ):
                return False
            prompt = build_planner_prompt(session, job, fresh, now)
            request = LaunchRequest(
                execution_id=execution_id,
                task_key=f"{job.id}/plan-{fresh.round}",
                job_id=job.id,
                attempt=fresh.attempt,
                prompt=prompt,
                cwd=runtime.workspace,  # set below, out of the transaction: git takes time
                timeout_s=PLANNER_TIMEOUT_S,
                agent=agent.for_kind("plan"),
                sim_script=job.sim,
                plan_round=fresh.round,
            )
            repo_path, base_branch = job.repo_path, job.base_branch
            record_event(
                session,
                EventKind.PLAN_STARTED,
                f"job {job.id} round {fresh.round}: planner {agent.id} started",
                now=now,
                job_id=job.id,
                plan_id=fresh.id,
            )
        try:
            cwd = runtime.worktrees.planning_tree(repo_path, request.job_id, base_branch)
            leased = now + runtime.config.engine.lease_seconds  # what the claim wrote
            live, spec = self.spawn(
                replace(request, cwd=cwd), task_key=None, plan_id=plan.id, lease_until=leased
            )
        except (LaunchError, WorkspaceError, OSError, ValueError) as error:
            self._fail_attempt(plan.id, execution_id, f"could not start planner: {error}", now)
            return True
        with runtime.store.write() as session:
            record_spawn(session, request, live, spec, now, runtime.redactor)
        return True

    def owns(self, session: Session, plan_id: int, execution_id: str) -> bool:
        """Whether the round still belongs to this execution (its row locked until commit)."""
        return _fenced_plan(session, plan_id, execution_id) is not None

    def complete(self, session: Session, exit_: FinishedExecution, now: float) -> None:
        """Apply a planner's exit: retry, reject with feedback, or accept and materialise."""
        live, outcome = exit_.live, exit_.outcome
        plan = _fenced_plan(session, live.plan_id, live.execution_id)
        if plan is None or outcome.kind in GONE:
            return
        if outcome.kind in (OutcomeKind.LIMITED, OutcomeKind.RELEASED, OutcomeKind.UNAVAILABLE):
            if outcome.limit is not None:
                limit = outcome.limit
                record_limit(session, live.provider, limit.reset_at, limit.source_text, now)
            agent = self.runtime.config.agent(live.agent_id)
            if outcome.failure is not None and agent is not None:
                agent_status.record_failure(session, agent, outcome.failure, now)
            plan.attempt = max(plan.attempt - 1, 0)  # not the planner's fault: refund it
            plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
            session.add(plan)
            return
        if outcome.kind is not OutcomeKind.SUCCEEDED:
            reject_attempt(session, plan, outcome.error or "planner failed", now)
            return
        raw = exit_.result_file if exit_.result_file is not None else exit_.report.result_text
        max_bytes = self.runtime.config.inputs.max_task_input_bytes
        verdict = vet_plan(session, plan.job_id, raw, now, max_input_bytes=max_bytes)
        if not isinstance(verdict, PlanAccepted):
            reject_attempt(session, plan, verdict.reason, now)
            return
        accept_result(session, plan, verdict.result, now)
        job = session.get(Job, plan.job_id)
        if job is not None:
            store_children(session, job, plan, now)

    def _fail_attempt(
        self, plan_id: int | None, execution_id: str, reason: str, now: float
    ) -> None:
        with self.runtime.store.write() as session:
            plan = _fenced_plan(session, plan_id, execution_id)
            finish_execution_row(
                session,
                execution_id,
                Outcome(OutcomeKind.FAILED, error=reason),
                exit_code=None,
                now=now,
            )
            if plan is not None:
                reject_attempt(session, plan, reason, now)

    def _recover(self, now: float) -> bool:
        with self.runtime.store.read() as session:
            claimed = session.exec(
                select(Plan).where(
                    Plan.status == PlanState.PLANNING, col(Plan.execution_id).is_not(None)
                )
            ).all()
        decisions = self.runtime.lost_claims(
            [
                ClaimFacts(
                    str(p.id),
                    p.execution_id or "",
                    p.lease_owner,
                    p.lease_expires_at,
                    p.attempt,
                    p.max_attempts,
                    p.recoveries,
                )
                for p in claimed
            ],
            now,
        )
        for decision in decisions:
            if decision.kill_local_group:
                kill_orphan(self.runtime, decision.execution_id)
            with self.runtime.store.write() as session:
                plan = _fenced_plan(session, int(decision.key), decision.execution_id)
                if plan is not None:
                    take_back_plan(session, plan, decision, now)
        return bool(decisions)

    def owned_executions(self, session: Session, execution_ids: list[str]) -> set[str]:
        rows = session.exec(
            select(Plan.execution_id).where(col(Plan.execution_id).in_(execution_ids))
        )
        return {r for r in rows if r}

    def planning_active(self, session: Session) -> bool:
        """A planner runs or will start; one held by a spent budget waits on the operator."""
        rounds = session.exec(select(Plan).where(Plan.status == PlanState.PLANNING)).all()
        if any(plan.execution_id for plan in rounds):
            return True
        jobs = session.exec(select(Job).where(col(Job.id).in_({p.job_id for p in rounds}))).all()
        return len(spend.job_holds(session, jobs)) < len({p.job_id for p in rounds})


def _fenced_plan(session: Session, plan_id: int | None, execution_id: str) -> Plan | None:
    query = select(Plan).where(Plan.id == plan_id, Plan.execution_id == execution_id)
    return session.exec(query.with_for_update()).first()

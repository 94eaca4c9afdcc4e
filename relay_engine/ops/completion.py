"""Applying an execution's outcome to its task, fenced by the execution id.

Completing a task and releasing its dependents happen in one transaction, so no
observer ever sees a SUCCEEDED task whose ready dependents are still DRAFT.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import BindParameter, Executable, bindparam, union_all
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from relay_engine.contracts import troubleshooter
from relay_engine.contracts.keys import task_key
from relay_engine.contracts.time_format import format_time
from relay_engine.core.limits import effective_reset
from relay_engine.core.outcomes import Outcome, OutcomeKind
from relay_engine.core.states import DONE_TASK_STATES, TaskState
from relay_engine.ops import troubleshoot
from relay_engine.ops.gates import hold_gate
from relay_engine.ops.notes import note_recovery
from relay_engine.store.db import ensure_row
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.plan_rows import allowed_wave
from relay_engine.store.schema import Execution, Job, ProviderLimit, Task
from relay_engine.store.task_rows import (
    dependents_params,
    dependents_query,
    dependents_to_read,
    draft_dependents,
    hold_dependents,
    job_tasks,
    mark_blocked,
    move_task,
    tasks_by_key,
)

# Which agent takes a swapped task is dispatch's choice, made when a slot is free, so the
# event that moves it names none (the next task.started does).
ANOTHER_AGENT = "the next agent free for it takes it"


@dataclass(frozen=True)
class LimitDecision:
    """Where a task goes after its provider hit a limit: another agent, or parked."""

    swap_to: str | None  # agent id that will take it, or None to park
    park_until: float | None
    provider: str
    reason: str


@dataclass(frozen=True)
class AgentWait:
    """Where a task goes after its agent could not work at all: another agent, or parked."""

    agent_id: str
    swap_to: str | None
    park_until: float | None  # None: until the agent is cleared (operator or config change)
    reason: str  # "not logged in · Please run /login"
    waiting: str  # "waiting on agent claude-main: ..." when no other agent can take it


def fenced_task(session: Session, key: str, execution_id: str) -> Task | None:
    """The task, only while this execution still owns it (the fencing check)."""
    query = select(Task).where(Task.key == key, Task.execution_id == execution_id)
    return session.exec(query.with_for_update()).first()


def fenced_tasks(
    session: Session, claims: Mapping[str, str], *, with_dependents: bool = False
) -> dict[str, Task]:
    """:func:`fenced_task` for many executions in one statement: key -> task still owned.

    ``with_dependents``: the DRAFT tasks the completions may release are read by the same
    statement (see :func:`~relay_engine.store.task_rows.hold_dependents`), not one of their
    own: only the claimed rows are locked, the dependents are read as a plain read
    would."""
    if not claims:
        return {}
    keys = dependents_to_read(session, claims) if with_dependents else []
    if not keys:
        locked = session.exec(_locked_tasks(), params={"keys": list(claims)})
        return {t.key: t for t in locked if t.execution_id == claims[t.key]}
    params = {"keys": list(claims), **dependents_params(keys)}
    rows = list(session.execute(_locked_tasks_and_dependents(len(keys)), params).scalars())
    hold_dependents(session, keys, rows)
    return {t.key: t for t in rows if t.key in claims and t.execution_id == claims[t.key]}


@cache
def _locked_tasks() -> SelectOfScalar[Task]:
    """Built once (``keys`` bound at each run): every exit the engine writes runs it."""
    keys: BindParameter[list[str]] = bindparam("keys", expanding=True)
    return select(Task).where(col(Task.key).in_(keys)).with_for_update()


@cache
def _locked_tasks_and_dependents(count: int) -> Executable:
    """:func:`_locked_tasks` and the dependents of ``count`` of them, in one statement
    built once per count: building it per exit (the locked rows' CTE names every column of
    the table again) cost more than running it. Tasks are read from the union as an
    aliased entity, not with ``from_statement``, whose loader the ORM sets up again (a row
    processor per column) at every run: 0.2-0.25 ms of an exit's CPU."""
    held = _locked_tasks().cte("held")
    both = union_all(select(*held.c), dependents_query(count)).subquery("exiting")
    return select(aliased(Task, both))


def finish_execution_row(
    session: Session,
    execution_id: str,
    outcome: Outcome,
    *,
    exit_code: int | None,
    now: float,
    never_ran: bool = False,
) -> None:
    """End an execution row; ``never_ran``: a start that failed, timed at this moment."""
    execution = session.get(Execution, execution_id)
    if execution is None:
        return
    if never_ran and execution.started_at is None:
        execution.started_at = now  # so it sorts among the task's runs on every database
    execution.ended_at = now
    execution.exit_code = exit_code
    execution.outcome = outcome.kind.value
    execution.error = outcome.error
    session.add(execution)


def apply_outcome(
    session: Session,
    task: Task,
    outcome: Outcome,
    *,
    now: float,
    limit_decision: LimitDecision | None = None,
    agent_wait: AgentWait | None = None,
) -> None:
    """Move ``task`` (already fenced) to where ``outcome`` sends it."""
    if outcome.kind is OutcomeKind.SUCCEEDED:
        _succeed(session, task, outcome, now)
    elif outcome.kind is OutcomeKind.RELEASED:
        release_task(session, task, outcome.error or "engine stopped", now=now)
    elif outcome.kind is OutcomeKind.SESSION_GONE:
        reason = "its resumed provider session is gone, so it runs again in a fresh one"
        release_task(session, task, reason, now=now)
    elif outcome.kind is OutcomeKind.LIMITED:
        assert limit_decision is not None
        _limited(session, task, limit_decision, now)
    elif outcome.kind is OutcomeKind.UNAVAILABLE and agent_wait is not None:
        move_to_other_agent(session, task, agent_wait, now)
    else:
        fail_or_retry(session, task, outcome.error or outcome.kind.value, now=now)


def _succeed(session: Session, task: Task, outcome: Outcome, now: float) -> None:
    move_task(
        session,
        task,
        TaskState.SUCCEEDED,
        now=now,
        kind=EventKind.TASK_SUCCEEDED,
        message=f"{task.key} succeeded: {outcome.summary or 'done'}"[:500],
        result_summary=outcome.summary,
        result=outcome.data,
        error=None,
        finished_at=now,
        diffstat=outcome.diffstat,
        commit_sha=outcome.commit,
    )
    if outcome.commit:
        job = session.get(Job, task.job_id)
        if job is not None:
            job.head_sha = outcome.commit
            job.job_branch = f"relay/{job.id}"
            session.add(job)
    release_dependents(session, task, now=now)
    if task.attempt > 1:  # it may have failed for good before an operator ran it again
        note_recovery(session, task, now)
    if task.kind == troubleshooter.KIND:
        troubleshoot.conclude(session, task, now)


def fail_or_retry(session: Session, task: Task, error: str, *, now: float) -> None:
    if task.attempt < task.max_attempts:
        move_task(
            session,
            task,
            TaskState.QUEUED,
            now=now,
            kind=EventKind.TASK_RETRYING,
            level="warning",
            message=f"{task.key} attempt {task.attempt}/{task.max_attempts} failed: {error}"[:500],
            error=error,
        )
        return
    fail_task(session, task, error, f"failed after {task.attempt} attempts: {error}", now=now)


def fail_task(session: Session, task: Task, error: str, why: str, *, now: float) -> None:
    """FAILED for good, its dependents blocked; a troubleshooter may still bring it back."""
    move_task(
        session,
        task,
        TaskState.FAILED,
        now=now,
        kind=EventKind.TASK_FAILED,
        level="error",
        message=f"{task.key} {why}"[:500],
        error=error,
        finished_at=now,
    )
    block_dependents(session, task, blocker=task.task_id, now=now)
    if task.kind == troubleshooter.KIND:
        troubleshoot.conclude(session, task, now)
    elif task.kind == "assess":
        hold_gate(session, task, now)
    elif troubleshoot.request(session, task, now) is None:
        had = "its troubleshooter had its turn already" if task.troubleshoots else None
        troubleshoot.record_failure(session, task, had, now)


def release_task(session: Session, task: Task, reason: str, *, now: float) -> None:
    """Back to the queue with the attempt refunded: the run ended for reasons not its own."""
    move_task(
        session,
        task,
        TaskState.QUEUED,
        now=now,
        kind=EventKind.TASK_RELEASED,
        message=f"{task.key} returned to the queue: {reason} (attempt refunded)"[:500],
        attempt=max(task.attempt - 1, 0),
    )


def _limited(session: Session, task: Task, decision: LimitDecision, now: float) -> None:
    _swap_or_park(
        session,
        task,
        now,
        swap_to=decision.swap_to,
        swap_message=f"{task.key} moved off {task.agent or decision.provider}, "
        f"{decision.provider} limited: {decision.reason}; {ANOTHER_AGENT}",
        park_message=f"{task.key} parked until {decision.provider} resets at "
        f"{format_time(decision.park_until)}: {decision.reason}",
        park_until=decision.park_until,
        waiting_on=decision.provider,
        data={"provider": decision.provider, "from": task.agent}
        if decision.swap_to
        else {"provider": decision.provider, "until": decision.park_until},
        provider=decision.provider,
    )


def move_to_other_agent(session: Session, task: Task, wait: AgentWait, now: float) -> None:
    """The agent, not the task, failed: refund the attempt; swap, or park waiting on it."""
    _swap_or_park(
        session,
        task,
        now,
        swap_to=wait.swap_to,
        swap_message=f"{task.key} moved off agent {wait.agent_id}: {wait.reason}; {ANOTHER_AGENT}",
        park_message=f"{task.key} parked: {wait.waiting}",
        park_until=wait.park_until,
        waiting_on=wait.agent_id,
        data={"agent": wait.agent_id, "until": wait.park_until},
        error=wait.waiting,
    )


def _swap_or_park(
    session: Session,
    task: Task,
    now: float,
    *,
    swap_to: str | None,
    swap_message: str,
    park_message: str,
    park_until: float | None,
    waiting_on: str,
    data: dict[str, Any],
    **park_fields: Any,
) -> None:
    """Not the task's fault: refund its attempt and hand it to ``swap_to``, else park it."""
    refunded = max(task.attempt - 1, 0)
    if swap_to is not None:
        move_task(
            session,
            task,
            TaskState.QUEUED,
            now=now,
            kind=EventKind.TASK_SWAPPED,
            level="warning",
            message=swap_message[:500],
            attempt=refunded,
            # A task pinned to the agent that failed follows the swap, so the event tells the truth.
            pinned_agent=swap_to if task.pinned_agent else None,
            data=data,
        )
        return
    move_task(
        session,
        task,
        TaskState.PARKED,
        now=now,
        kind=EventKind.TASK_PARKED,
        level="warning",
        message=park_message[:500],
        attempt=refunded,
        not_before=park_until,
        waiting_on_provider=waiting_on,
        parked_at=now,
        data=data,
        **park_fields,
    )


def release_dependents(session: Session, task: Task, *, now: float) -> list[Task]:
    """Queue every DRAFT dependent of ``task`` whose dependencies are now all done
    (succeeded, or dropped)."""
    # A draft that also waits on another job's task is left to the readiness pass.
    drafts = [
        t for t in draft_dependents(session, task) if t.blocked_by is None and not t.external_deps
    ]
    if not drafts:
        return []
    dep_keys = {task_key(task.job_id, d) for t in drafts for d in t.dependencies}
    states = {t.task_id: t.state for t in tasks_by_key(session, dep_keys).values()}
    states[task.task_id] = TaskState(task.state)  # succeeded, or dropped: both let them go
    released = []
    job = session.get(Job, task.job_id)
    gate = allowed_wave(session, job) if job is not None and job.wave_gate != "auto" else None
    for draft in drafts:
        if gate is not None and draft.wave > gate:
            continue  # a wave gate holds it; readiness queues it once the wave is approved
        if all(states.get(dep) in DONE_TASK_STATES for dep in draft.dependencies):
            move_task(
                session,
                draft,
                TaskState.QUEUED,
                now=now,
                kind=EventKind.TASK_QUEUED,
                message=f"{draft.key} queued: dependencies succeeded",
            )
            released.append(draft)
    return released


def block_dependents(session: Session, task: Task, *, blocker: str, now: float) -> None:
    """Mark every transitive DRAFT dependent as blocked by ``blocker``."""
    drafts = job_tasks(session, task.job_id, [TaskState.DRAFT])
    frontier = {task.task_id}
    changed = True
    while changed:
        changed = False
        for draft in drafts:
            if draft.task_id in frontier or not frontier.intersection(draft.dependencies):
                continue
            frontier.add(draft.task_id)
            changed = True
            if draft.blocked_by != blocker:
                mark_blocked(session, draft, blocker, f"{draft.key} blocked by {blocker}", now)


def record_limit(
    session: Session, provider: str, reset_at: float | None, source: str, now: float
) -> ProviderLimit:
    """Mark a provider limited until ``reset_at`` (or the back-off when none was given)."""
    ensure_row(session, ProviderLimit, provider=provider)
    limit = session.exec(
        select(ProviderLimit).where(ProviderLimit.provider == provider).with_for_update()
    ).one()
    was_limited = limit.status == "limited"
    limit.consecutive_hits = limit.consecutive_hits + 1 if was_limited else 1
    limit.status = "limited"
    limit.reset_at = effective_reset(reset_at, now, limit.consecutive_hits)
    limit.source_text = source[:300]
    limit.detected_at = now
    limit.updated_at = now
    session.add(limit)
    record_event(
        session,
        EventKind.PROVIDER_LIMITED,
        f"provider {provider} limited until {format_time(limit.reset_at)}: {source[:200]}",
        now=now,
        level="warning",
        data={"provider": provider, "reset_at": limit.reset_at},
    )
    return limit

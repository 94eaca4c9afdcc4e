"""Tick steps that move work forward without running anything.

Each reads only active rows (DRAFT, PARKED, limited providers, dirty jobs), so a
tick costs the same whether the database holds a hundred or a million finished tasks.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import or_
from sqlmodel import Session, col, select

from relay_engine.contracts.keys import task_key
from relay_engine.core.scheduler import readiness
from relay_engine.core.states import ACTIVE_TASK_STATES, JobState, TaskState
from relay_engine.loop.dispatch import task_facts
from relay_engine.ops.completion import block_dependents
from relay_engine.ops.pulls import to_review
from relay_engine.ops.upstream import hold_for_other_jobs
from relay_engine.store.db import Store, column_rows, select_columns
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.schema import Job, ProviderLimit, Review, Task
from relay_engine.store.task_rows import (
    mark_blocked,
    queue_drafts,
    resume_parked_task,
    rows_by_key,
    tasks_by_key,
)

DRAFT_COLUMNS = (
    Task.key, Task.job_id, Task.task_id, Task.state, Task.priority, Task.created_at,
    Task.dependencies, Task.external_deps, Task.workstream, Task.resumed_at, Task.parked_at,
    Task.execution_id,
)  # fmt: skip
"""What readiness reads of a draft: plain rows, not ORM objects (a job of a thousand tasks
is a thousand drafts, and a whole row decodes every JSON column of it)."""

DEPENDENCY_COLUMNS = (Task.key, Task.job_id, Task.task_id, Task.state, Task.blocked_by)


def promote_ready(store: Store, now: float, gated: frozenset[str] = frozenset()) -> bool:
    """DRAFT tasks whose dependencies all succeeded become QUEUED; failed ones block."""
    with store.read() as session:
        query = select_columns(*DRAFT_COLUMNS).where(
            Task.state == TaskState.DRAFT, col(Task.blocked_by).is_(None)
        )
        drafts = [t for t in column_rows(session, query) if t.key not in gated]
        if not drafts:
            return False
        waiting, blocked_upstream = hold_for_other_jobs(session, drafts)
        drafts = [t for t in drafts if t.key not in waiting]
        dep_keys = [task_key(t.job_id, d) for t in drafts for d in t.dependencies]
        deps = rows_by_key(session, dep_keys, DEPENDENCY_COLUMNS)
    states = {(t.job_id, t.task_id): TaskState(t.state) for t in deps.values()}
    decision = readiness([task_facts(t) for t in drafts if t.key not in blocked_upstream], states)
    transitive = blocked_upstream | {
        t.key: blocker
        for t in drafts
        for d in t.dependencies
        if (dep := deps.get(task_key(t.job_id, d))) is not None and (blocker := dep.blocked_by)
    }
    if not decision.to_queue and not decision.blocked and not transitive:
        return False
    _apply_readiness(store, decision.to_queue, {**transitive, **decision.blocked}, now)
    return True


def _apply_readiness(
    store: Store, to_queue: Iterable[str], blocked: dict[str, str], now: float
) -> None:
    """Block first (a blocked key is never queued), then queue the rest in bulk."""
    with store.write() as session:
        for key, task in tasks_by_key(session, blocked).items():
            if task.state != TaskState.DRAFT:
                continue
            block_dependents(session, task, blocker=blocked[key], now=now)
            mark_blocked(session, task, blocked[key], f"{key} blocked by {blocked[key]}", now)
        queue_drafts(session, sorted(set(to_queue) - set(blocked)), now=now)


def resume_parked(store: Store, now: float) -> bool:
    """Providers whose reset passed are ok again; their parked tasks go back to the queue."""
    with store.read() as session:
        expired = list(
            session.exec(
                select(ProviderLimit).where(
                    ProviderLimit.status == "limited", col(ProviderLimit.reset_at) <= now
                )
            )
        )
        due = list(
            session.exec(
                select(Task.key).where(Task.state == TaskState.PARKED, col(Task.not_before) <= now)
            )
        )
    if not expired and not due:
        return False
    with store.write() as session:
        for limit in expired:
            limit.status = "ok"
            limit.updated_at = now
            session.add(limit)
            record_event(
                session,
                EventKind.PROVIDER_RECOVERED,
                f"provider {limit.provider} usable again",
                now=now,
                data={"provider": limit.provider},
            )
        for task in tasks_by_key(session, due).values():
            if task.state == TaskState.PARKED:
                message = f"{task.key} resumed: {task.waiting_on_provider} reset passed"
                resume_parked_task(session, task, now, message)
    return True


def finish_jobs(store: Store, job_ids: Iterable[str], now: float) -> bool:
    """Manual jobs whose tasks are all settled end SUCCEEDED or FAILED."""
    with store.read() as session:
        done = [job_id for job_id in sorted(job_ids) if _settled_manual_job(session, job_id)]
    if not done:
        return False
    changed = False
    with store.write() as session:
        for job_id in done:
            job = session.get(Job, job_id)
            if job is not None and _settled_manual_job(session, job_id):
                changed |= settle_job(session, job, now)
    return changed


def _settled_manual_job(session: Session, job_id: str) -> bool:
    """An active manual job none of whose tasks can still run (blocked drafts cannot)."""
    job = session.get(Job, job_id)
    if job is None or job.state != JobState.ACTIVE or job.mode != "manual":
        return False
    unsettled = (
        select(Task.key)
        .where(Task.job_id == job_id, col(Task.state).in_(list(ACTIVE_TASK_STATES)))
        .where(or_(col(Task.state) != TaskState.DRAFT, col(Task.blocked_by).is_(None)))
        .limit(1)
    )
    return session.exec(unsettled).first() is None


def settle_job(session: Session, job: Job, now: float) -> bool:
    """A manual job none of whose tasks can run any more. A task failed for good: BLOCKED,
    naming it and what the operator can do (it never fails by itself while that could save
    it). Otherwise on to its pull request with what is done -- a cancelled task was dropped,
    with its dependents -- or FAILED when nothing at all was done."""
    # A final review's outcome is the pull request step's business (a stale one is cancelled).
    reviews = select(Review.task_key).where(Review.job_id == job.id)
    query = (
        select(Task.task_id, Task.state, Task.error, Task.kind)
        .where(Task.job_id == job.id, col(Task.key).not_in(reviews))
        .order_by(col(Task.key))  # the same task named first on every database
    )
    rows = list(session.exec(query))
    failed = [(task_id, error) for task_id, state, error, _ in rows if state == TaskState.FAILED]
    preparing = [
        t for t, state, _, kind in rows if state == TaskState.FAILED and kind == "merge_prep"
    ]
    if preparing and len(failed) == 1:
        why = prep_blocked_reason(job.id, preparing[0], failed[0][1])
        move_job(session, job, JobState.BLOCKED, now=now, blocked_by=why)
    elif failed:
        move_job(session, job, JobState.BLOCKED, now=now, blocked_by=blocked_reason(job.id, failed))
    elif not any(state == TaskState.SUCCEEDED for _, state, _, _ in rows):
        move_job(
            session, job, JobState.FAILED, now=now, why="nothing was done: every task was cancelled"
        )
    elif not to_review(session, job, now):
        move_job(session, job, JobState.SUCCEEDED, now=now)
    return True


def blocked_reason(job_id: str, failed: list[tuple[str, str | None]]) -> str:
    """What stops the job and every way out of it, as commands."""
    first, error = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    cause = f"{first} failed{more}: {(error or 'no reason recorded')[:200]}"
    key = f"{job_id}/{first}"
    return (
        f"{cause}; relay retry {key}, relay drop {key}, relay replan {job_id}, "
        f"relay merge {job_id} --force (what is done), or relay close {job_id}"
    )


def prep_blocked_reason(job_id: str, task_id: str, error: str | None) -> str:
    """A merge preparation that failed for good: the check that failed, and the ways out (a
    retry once the branch or the checks are fixed, a merge without preparation, closing)."""
    key = f"{job_id}/{task_id}"
    head, _, said = (error or "no reason recorded").partition("\n")
    said = f" ... {said.strip()[-400:]}" if said.strip() else ""
    cause = f"merge preparation {task_id} failed: {head[:300]}{said}"
    return (
        f"{cause}; fix the branch (relay takeover {key}) or the checks, then relay retry "
        f"{key}; or relay merge {job_id} --force (merge it unprepared), or relay close {job_id}"
    )

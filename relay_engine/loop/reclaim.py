"""Taking work back from a runner that is gone: stop what is left of it, refund, count.

Which claims are lost is decided purely (:mod:`recovery`); this module applies it. A run
lost with its engine (killed, stalled past its lease) was the infrastructure's failure, not
the task's, so its attempt is refunded; the task's ``recoveries`` grow instead and, past
``[engine] max_recoveries``, fail the task with that reason -- a task that kills its engine
every time it runs still stops.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from relay_engine.agents.launch import artifact_dir
from relay_engine.agents.runner import kill_execution, read_record, recorded_group
from relay_engine.core.outcomes import Outcome, OutcomeKind
from relay_engine.core.recovery import ClaimFacts, Recovery, budget_spent_reason
from relay_engine.core.states import PlanState, TaskState, check_plan
from relay_engine.loop import dispatch
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops.completion import fail_task, fenced_task, finish_execution_row
from relay_engine.store.db import column_rows, select_columns
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Execution, Plan, Task
from relay_engine.store.task_rows import move_task


def kill_orphan(runtime: EngineRuntime, execution_id: str) -> None:
    """Kill whatever is left of an execution whose engine ran on this host.

    The supervisor's on-disk record names its process group even when the engine died
    before writing anything about the spawn to the database; the execution's environment
    tag finds whatever escaped that group.
    """
    with runtime.store.read() as session:
        execution = session.get(Execution, execution_id)
    if execution is not None and execution.ended_at is not None:
        return
    recorded = execution.artifact_dir if execution is not None else None
    directory = Path(recorded) if recorded else artifact_dir(runtime.workspace, execution_id)
    kill_execution(execution_id, recorded_group(read_record(directory)))


_CLAIM_COLUMNS = (
    Task.key, Task.state, Task.execution_id, Task.lease_owner, Task.lease_expires_at,
    Task.attempt, Task.max_attempts, Task.recoveries,
)  # fmt: skip
"""What recovery judges a claim by (this engine's own live claims are never taken back)."""


def recover_tasks(runtime: EngineRuntime, now: float) -> bool:
    """Take back every task whose runner is gone; True when any was."""
    mine = runtime.held()
    with runtime.store.read() as session:
        claims = [
            ClaimFacts(
                t.key,
                t.execution_id or "",
                t.lease_owner,
                t.lease_expires_at,
                t.attempt,
                t.max_attempts,
                t.recoveries,
            )
            for t in column_rows(session, select_columns(*_CLAIM_COLUMNS).where(dispatch.claimed()))
            if t.state in dispatch.BUSY_STATES and t.execution_id not in mine
        ]
    decisions = runtime.lost_claims(claims, now)
    for decision in decisions:
        if decision.kill_local_group:
            kill_orphan(runtime, decision.execution_id)
        with runtime.store.write() as session:
            task = fenced_task(session, decision.key, decision.execution_id)
            if task is not None:
                take_back_task(session, task, decision, runtime.config.engine.max_recoveries, now)
                runtime.settle_later(task.job_id)
    return bool(decisions)


def _close_execution(session: Session, decision: Recovery, now: float) -> None:
    lost = Outcome(OutcomeKind.LOST, error=decision.reason)
    finish_execution_row(session, decision.execution_id, lost, exit_code=None, now=now)


def take_back_task(
    session: Session, task: Task, decision: Recovery, max_recoveries: int, now: float
) -> None:
    """Back to the queue with the attempt refunded, or FAILED once the budget is spent."""
    _close_execution(session, decision, now)
    recoveries = task.recoveries + 1
    if decision.retry:
        move_task(
            session,
            task,
            TaskState.QUEUED,
            now=now,
            kind=EventKind.TASK_RECOVERED,
            level="warning",
            message=f"{task.key}: {decision.reason}; queued again, attempt refunded "
            f"(recovery {recoveries}/{max_recoveries})",
            attempt=max(task.attempt - 1, 0),
            recoveries=recoveries,
        )
        return
    reason = budget_spent_reason(recoveries, decision.reason)
    task.recoveries = recoveries
    fail_task(session, task, reason, f"failed: {reason}", now=now)


def take_back_plan(session: Session, plan: Plan, decision: Recovery, now: float) -> None:
    """A planner round's run, likewise: retried with its attempt refunded, or FAILED."""
    _close_execution(session, decision, now)
    plan.recoveries += 1
    plan.execution_id = plan.lease_owner = plan.lease_expires_at = None
    plan.updated_at = now
    if decision.retry:
        plan.attempt = max(plan.attempt - 1, 0)
        kind, level, message = (
            EventKind.PLAN_RECOVERED,
            "warning",
            f"{decision.reason}; will run again",
        )
    else:
        plan.status = check_plan(plan.status, PlanState.FAILED, key=f"plan {plan.id}")
        plan.error = budget_spent_reason(plan.recoveries, decision.reason)
        kind, level, message = EventKind.PLAN_FAILED, "error", plan.error
    session.add(plan)
    record_event(
        session,
        kind,
        f"job {plan.job_id} round {plan.round}: {message}"[:500],
        now=now,
        job_id=plan.job_id,
        plan_id=plan.id,
        level=level,
    )

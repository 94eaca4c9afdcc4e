"""Acting on budgets: park work on a spent one, say once when a job's spend reaches a
level, and raise a budget at the operator's word.

The judgement is :mod:`relay_engine.core.budgets`'s; the check that matters runs in the
claim transaction (:func:`relay_engine.store.spend.job_holds`), so engines sharing a
database cannot both spend the last dollar (each can overshoot by at most the executions
it already had running).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, col, select

from relay_engine.contracts.numbers import as_amount, as_count
from relay_engine.core.budgets import BUDGET, Cap, Hold, Spend, judge
from relay_engine.core.states import TaskState
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Job, Task
from relay_engine.store.spend import job_spend
from relay_engine.store.task_rows import move_task


def park_on_budget(session: Session, task: Task, hold: Hold, now: float) -> None:
    move_task(
        session,
        task,
        TaskState.PARKED,
        now=now,
        kind=EventKind.TASK_PARKED,
        level="warning",
        message=f"{task.key} parked: {hold.reason}"[:500],
        not_before=hold.until,
        waiting_on_provider=BUDGET,
        parked_at=now,
        error=hold.reason,
        data={"budget": hold.reason, "until": hold.until},
    )


# --- after spending: warn once, say when it is spent --------------------------------------


def announce(session: Session, job_ids: Iterable[str], warn_at: float, now: float) -> None:
    """Record ``budget.warning`` / ``budget.exhausted`` once per level a job's spend reaches,
    in the transaction that recorded the spend."""
    capped = [
        job
        for job in session.exec(select(Job).where(col(Job.id).in_(sorted(set(job_ids)))))
        if job.budget_usd is not None or job.budget_tokens is not None
    ]
    spend = job_spend(session, [job.id for job in capped])
    for job in capped:
        state = judge(spend.get(job.id, Spend()), Cap(job.budget_usd, job.budget_tokens), warn_at)
        if state.level not in ("warning", "exhausted") or job.budget_said == state.level:
            continue
        job.budget_said = state.level
        session.add(job)
        raise_it = " (relay budget JOB --add to raise it)" if state.level == "exhausted" else ""
        record_event(
            session,
            EventKind(f"budget.{state.level}"),
            f"job {job.id}: {state.text}{raise_it}",
            now=now,
            job_id=job.id,
            level="warning" if state.level == "warning" else "error",
            data={"fraction": round(state.fraction, 4)},
        )


# --- the operator raises a budget ---------------------------------------------------------


def raise_budget(
    session: Session, job: Job, now: float, *, add_usd: float | None, add_tokens: int | None
) -> str:
    """Add dollars and/or tokens to a job's budget; work parked on the budget resumes."""
    if add_usd is None and add_tokens is None:
        raise Refused("say how much to add: --add DOLLARS and/or --tokens N")
    if add_usd is not None and not (as_amount(add_usd) or 0) > 0:
        raise Refused(f"a budget is raised by a positive number of dollars, not {add_usd:g}")
    if add_tokens is not None and not (as_count(add_tokens) or 0) > 0:
        raise Refused(f"a budget is raised by a positive number of tokens, not {add_tokens}")
    if add_usd is not None:
        job.budget_usd = (job.budget_usd or 0.0) + add_usd
    if add_tokens is not None:
        job.budget_tokens = (job.budget_tokens or 0) + add_tokens
    job.budget_said = None
    job.updated_at = now
    session.add(job)
    parked = session.exec(
        select(Task).where(
            Task.job_id == job.id,
            Task.state == TaskState.PARKED,
            Task.waiting_on_provider == BUDGET,
        )
    ).all()
    for task in parked:
        move_task(
            session,
            task,
            TaskState.QUEUED,
            now=now,
            kind=EventKind.TASK_RESUMED,
            message=f"{task.key} resumed: budget raised",
            waiting_on_provider=None,
            not_before=None,
            error=None,
        )
    text = judge(
        job_spend(session, [job.id]).get(job.id, Spend()),
        Cap(job.budget_usd, job.budget_tokens),
        1.0,
    ).text
    record_event(
        session,
        EventKind.BUDGET_RAISED,
        f"job {job.id} budget raised: {text}",
        now=now,
        job_id=job.id,
    )
    return f"job {job.id}: {text}; {len(parked)} parked tasks resumed"

"""Budgets: a job's spend cap, and an agent's or provider's spend per day.

An unattended build → review → fix loop that does not converge keeps paying; a budget
is the operator's stop. At ``budget_warn_at`` (80 % by default) relay says so once; at
100 % nothing new of that job (or on that agent or provider) starts: running executions
finish, the rest PARKS with "budget exhausted: $5.02 of $5.00" until the operator raises
the budget (``relay budget JOB --add 5``) or, for daily budgets, the local day rolls over.
The check runs in the claim transaction, so engines sharing a database cannot both spend
the last dollar (each can overshoot by at most the executions it already had running).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, func, select

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.availability import Availability
from relay_engine.core.states import TaskState
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Execution, Job, Task
from relay_engine.store.task_rows import move_task

BUDGET = "budget"  # what a task parked on a budget waits on


@dataclass(frozen=True)
class Spend:
    cost_usd: float = 0.0
    tokens: int = 0


@dataclass(frozen=True)
class Cap:
    usd: float | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class BudgetState:
    level: str  # "none" | "ok" | "warning" | "exhausted"
    text: str  # "$4.10 of $5.00", or "budget exhausted: $5.02 of $5.00"
    fraction: float  # spent / budget, the highest of dollars and tokens


def judge(spend: Spend, cap: Cap, warn_at: float) -> BudgetState:
    """Where a spend stands against its cap; dollars and tokens each count."""
    parts = []
    if cap.usd is not None:
        parts.append(
            (
                spend.cost_usd / cap.usd if cap.usd else 1.0,
                f"${spend.cost_usd:,.2f} of ${cap.usd:,.2f}",
            )
        )
    if cap.tokens is not None:
        used = spend.tokens / cap.tokens if cap.tokens else 1.0
        parts.append((used, f"{spend.tokens:,} of {cap.tokens:,} tokens"))
    if not parts:
        return BudgetState("none", "", 0.0)
    fraction, text = max(parts, key=lambda part: part[0])
    if fraction >= 1.0:
        return BudgetState("exhausted", f"budget exhausted: {text}", fraction)
    return BudgetState("warning" if fraction >= warn_at else "ok", text, fraction)


def next_local_midnight(now: float) -> float:
    local = datetime.fromtimestamp(now).astimezone()
    return (
        (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    )


def local_midnight(now: float) -> float:
    local = datetime.fromtimestamp(now).astimezone()
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


# --- reading spend ------------------------------------------------------------------------


def _tokens() -> object:
    return func.coalesce(Execution.input_tokens, 0) + func.coalesce(Execution.output_tokens, 0)


def job_spend(session: Session, job_ids: Iterable[str]) -> dict[str, Spend]:
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    query = (
        select(
            Execution.job_id, func.sum(func.coalesce(Execution.cost_usd, 0.0)), func.sum(_tokens())
        )
        .where(col(Execution.job_id).in_(ids))
        .group_by(Execution.job_id)
    )
    return {
        job: Spend(float(cost or 0), int(tokens or 0)) for job, cost, tokens in session.exec(query)
    }


def daily_spend(session: Session, column: object, now: float) -> dict[str, float]:
    """Dollars spent today (local day) per agent or per provider."""
    query = (
        select(column, func.sum(func.coalesce(Execution.cost_usd, 0.0)))
        .where(col(Execution.started_at) >= local_midnight(now))
        .group_by(column)
    )
    return {key: float(cost or 0) for key, cost in session.exec(query) if key}


# --- decisions for dispatch ---------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """Why new work may not start now, and until when (None: until the operator acts)."""

    reason: str
    until: float | None


def job_holds(session: Session, jobs: Iterable[Job]) -> dict[str, Hold]:
    """Jobs of ``jobs`` whose budget is spent."""
    capped = {j.id: j for j in jobs if j.budget_usd is not None or j.budget_tokens is not None}
    spend = job_spend(session, capped)
    holds = {}
    for job_id, job in capped.items():
        state = judge(spend.get(job_id, Spend()), Cap(job.budget_usd, job.budget_tokens), 1.0)
        if state.level == "exhausted":
            holds[job_id] = Hold(state.text, None)
    return holds


def agent_holds(session: Session, config: RelayConfig, now: float) -> dict[str, Availability]:
    """Agents that may not start anything today: their own daily budget, or their
    provider's, is spent. Shaped like unavailable agents, so selection swaps or parks."""
    agent_caps = {a.id: a.daily_budget_usd for a in config.agents if a.daily_budget_usd is not None}
    provider_caps = {
        p: c.daily_budget_usd for p, c in config.providers.items() if c.daily_budget_usd is not None
    }
    held = daily_holds(session, agent_caps, Execution.agent, "agent", now)
    by_provider = daily_holds(session, provider_caps, Execution.provider, "provider", now)
    for agent in config.agents:
        if agent.provider in by_provider and agent.id not in held:
            held[agent.id] = by_provider[agent.provider]
    return {
        agent_id: Availability(agent_id, BUDGET, reason=hold.reason, until=hold.until)
        for agent_id, hold in held.items()
    }


def daily_holds(
    session: Session, caps: Mapping[str, float], column: object, what: str, now: float
) -> dict[str, Hold]:
    """Agents (or providers) whose spend today reached their ``daily_budget_usd``."""
    if not caps:
        return {}
    spent = daily_spend(session, column, now)
    until = next_local_midnight(now)
    return {
        name: Hold(
            f"daily budget of {what} {name} exhausted: ${spent.get(name, 0.0):,.2f} of ${cap:,.2f}",
            until,
        )
        for name, cap in caps.items()
        if spent.get(name, 0.0) >= cap
    }


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

"""What executions spent, summed in SQL: per job, per agent or provider today, and the
budget holds dispatch and the console read from those sums.

Every reader of spend goes through here (dispatch, the claim transaction, ``relay status``,
``relay usage``, the console), so a dollar is counted the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import ColumnElement
from sqlmodel import Session, col, func, select

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.availability import Availability
from relay_engine.core.budgets import BUDGET, Cap, Hold, Spend, judge, local_midnight, spent_caps
from relay_engine.core.usage import UsageRecord
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution, Job


def _tokens() -> ColumnElement[int]:
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


def daily_spend(session: Session, column: Any, now: float) -> dict[str, float]:
    """Dollars spent today (local day) per agent or per provider."""
    query = (
        select(column, func.sum(func.coalesce(Execution.cost_usd, 0.0)))
        .where(col(Execution.started_at) >= local_midnight(now))
        .group_by(column)
    )
    return {key: float(cost or 0) for key, cost in session.exec(query) if key}


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
    """Agents that may not start anything today: their own daily budget, their account's
    or their provider's (every account together) is spent. Shaped like unavailable agents,
    so selection swaps or parks."""
    agent_caps = {a.id: a.daily_budget_usd for a in config.agents if a.daily_budget_usd is not None}
    provider_caps: dict[str, float] = {
        p: c.daily_budget_usd for p, c in config.providers.items() if c.daily_budget_usd is not None
    }
    held = daily_holds(session, agent_caps, Execution.agent, "agent", now)
    by_provider = daily_holds(session, provider_caps, Execution.provider, "provider", now)
    by_account = account_holds(session, config, now)
    for agent in config.agents:
        if agent.id in held:
            continue
        hold = by_account.get(f"{agent.provider}/{agent.account}") or by_provider.get(
            agent.provider
        )
        if hold is not None:
            held[agent.id] = hold
    return {
        agent_id: Availability(agent_id, BUDGET, reason=hold.reason, until=hold.until)
        for agent_id, hold in held.items()
    }


def account_holds(session: Session, config: RelayConfig, now: float) -> dict[str, Hold]:
    """``provider/account`` -> its hold, for the accounts whose ``daily_budget_usd`` (in
    ``[providers.X.accounts.NAME]``) today's spend reached."""
    caps = {
        f"{provider}/{name}": account.daily_budget_usd
        for provider, settings in config.providers.items()
        for name, account in settings.accounts.items()
        if account.daily_budget_usd is not None
    }
    if not caps:
        return {}
    query = (
        select(
            Execution.provider, Execution.account, func.sum(func.coalesce(Execution.cost_usd, 0.0))
        )
        .where(
            col(Execution.started_at) >= local_midnight(now), col(Execution.account).is_not(None)
        )
        .group_by(col(Execution.provider), col(Execution.account))
    )
    spent = {f"{p}/{a}": float(cost or 0) for p, a, cost in session.exec(query)}
    return spent_caps(spent, caps, "account", now)


def daily_holds(
    session: Session, caps: Mapping[str, float], column: Any, what: str, now: float
) -> dict[str, Hold]:
    """Agents (or providers) whose spend today reached their ``daily_budget_usd``."""
    if not caps:
        return {}
    return spent_caps(daily_spend(session, column, now), caps, what, now)


def read_usage(
    store: Store, *, since: float | None = None, job_id: str | None = None
) -> list[UsageRecord]:
    """Every finished or running execution that has started, planner rounds included."""
    query = select(Execution).where(col(Execution.started_at).is_not(None))
    if since is not None:
        query = query.where(col(Execution.started_at) >= since)
    if job_id is not None:
        query = query.where(col(Execution.job_id) == job_id)
    with store.read() as session:
        return [usage_record(e) for e in session.exec(query)]


def usage_record(execution: Execution) -> UsageRecord:
    planner = f"{execution.job_id}/planner-{execution.plan_id}" if execution.plan_id else None
    return UsageRecord(
        job_id=execution.job_id,
        task_key=execution.task_key or planner,
        agent=execution.agent,
        provider=execution.provider,
        model=execution.model,
        at=execution.started_at or 0.0,
        input_tokens=execution.input_tokens or 0,
        output_tokens=execution.output_tokens or 0,
        cached_tokens=execution.cached_tokens or 0,
        cost_usd=execution.cost_usd,
        estimated=execution.cost_estimated,
    )

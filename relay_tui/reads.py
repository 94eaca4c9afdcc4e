"""The projection's reads beyond tasks: spend, pull requests and reviews, agent availability.

Each runs inside the projection's read transaction, off the UI thread. Spend is summed in
SQL per job or per task (never by loading executions), and only for the keys that changed
since the last snapshot, so 50,000 tasks cost nothing while one of them spends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from relay_engine.contracts.config import RelayConfig
from relay_engine.ops import budgets
from relay_engine.ops.agents import agent_rows
from relay_engine.ops.pulls import pull_summaries
from relay_engine.store.schema import Execution, Job
from relay_tui.views import (
    NO_SPEND,
    AgentStatusView,
    BudgetView,
    JobView,
    PullView,
    ReviewView,
    SpendView,
)
from relay_tui.widgets.style import clock_time

CHUNK = 500


def spend_by(
    session: Session, column: Any, keys: Iterable[str] | None = None
) -> dict[str, SpendView]:
    """Spend of every execution grouped by ``column`` (job id or task key); ``keys`` limits
    the groups read (None: all)."""
    query = select(
        column,
        func.sum(func.coalesce(Execution.cost_usd, 0.0)),
        func.max(Execution.cost_estimated),
        func.sum(func.coalesce(Execution.input_tokens, 0)),
        func.sum(func.coalesce(Execution.output_tokens, 0)),
        func.sum(func.coalesce(Execution.cached_tokens, 0)),
        func.count(),
    ).where(col(Execution.started_at).is_not(None), col(column).is_not(None))
    if keys is None:
        return _spend_rows(session, query.group_by(column))
    wanted = sorted(set(keys))
    found: dict[str, SpendView] = {}
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        found |= _spend_rows(session, query.where(col(column).in_(chunk)).group_by(column))
    return found


def _spend_rows(session: Session, query: Any) -> dict[str, SpendView]:
    return {
        key: SpendView(
            float(cost or 0),
            bool(estimated),
            int(inp or 0),
            int(out or 0),
            int(cached or 0),
            int(runs),
        )
        for key, cost, estimated, inp, out, cached, runs in session.exec(query)
    }


def job_views(
    session: Session,
    rows: Sequence[Job],
    spend: Mapping[str, SpendView],
    warn_at: float,
) -> list[JobView]:
    """Jobs with their pull request, latest review, spend and budget."""
    pulls = pull_summaries(session, [row.id for row in rows])
    return [
        _job_view(row, pulls.get(row.id, {}), spend.get(row.id, NO_SPEND), warn_at) for row in rows
    ]


def _job_view(row: Job, pull: Mapping[str, Any], spend: SpendView, warn_at: float) -> JobView:
    state = budgets.judge(
        budgets.Spend(spend.cost_usd, spend.tokens),
        budgets.Cap(row.budget_usd, row.budget_tokens),
        warn_at,
    )
    pr, review = pull.get("pr"), pull.get("review")
    return JobView(
        id=row.id,
        title=row.title or row.id,
        state=str(row.state),
        mode=row.mode,
        wave_gate=row.wave_gate,
        approved_wave=row.approved_wave,
        priority=row.priority,
        created_at=row.created_at,
        objective=row.objective,
        repo_path=row.repo_path,
        base_branch=row.base_branch,
        job_branch=row.job_branch,
        error=row.error,
        after=tuple(row.after or ()),
        blocked_by=row.blocked_by,
        auto_merge=row.auto_merge,
        budget_usd=row.budget_usd,
        budget_tokens=row.budget_tokens,
        pr=PullView.from_summary(pr) if pr else None,
        review=ReviewView.from_summary(review) if review else None,
        spend=spend,
        budget=BudgetView(state.level, state.text, state.fraction),
    )


def agent_views(
    session: Session, now: float, config: RelayConfig | None, listed: bool
) -> tuple[AgentStatusView, ...]:
    """Agents with their availability; an agent whose daily budget (or its provider's) is
    spent shows status "budget". ``listed``: engines mirrored their agents (else config's)."""
    agents = None if listed or config is None else config.agents
    held = budgets.agent_holds(session, config, now) if config is not None else {}
    views = []
    for row in agent_rows(session, now, agents):
        hold = held.get(row.id)
        if hold is not None and row.status == "ready":
            views.append(
                AgentStatusView(
                    row.id,
                    row.provider,
                    row.enabled,
                    "budget",
                    f"daily budget spent until {clock_time(hold.until)[:5]}",
                    hold.reason,
                    "wait for midnight, or raise daily_budget_usd in relay.toml",
                    hold.until,
                )
            )
        else:
            views.append(
                AgentStatusView(
                    row.id,
                    row.provider,
                    row.enabled,
                    row.status,
                    row.summary,
                    row.reason,
                    row.fix,
                    row.until,
                )
            )
    return tuple(views)

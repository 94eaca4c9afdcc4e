"""Jobs as the tables and the console list them: each with its pull request, latest final
review, spend and where that spend stands against its budget.

:func:`read_jobs` joins :mod:`.pulls` and :mod:`.spend` so every reader of a job sees the
same facts of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.core.budgets import Cap, Spend, judge
from relay_engine.store.read_model.pulls import PullView, ReviewView, read_pulls
from relay_engine.store.read_model.spend import NO_SPEND, SpendView, spend_by
from relay_engine.store.schema import Execution, Job


@dataclass(frozen=True, slots=True)
class BudgetView:
    """Where a job's spend stands against its budget (:func:`relay_engine.core.budgets.judge`)."""

    level: str = "none"  # none | ok | warning | exhausted
    text: str = ""
    fraction: float = 0.0


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    title: str
    state: str
    mode: str
    wave_gate: str
    approved_wave: int
    priority: str
    created_at: float
    objective: str = ""
    repo_path: str | None = None
    base_branch: str = "main"
    job_branch: str | None = None
    error: str | None = None
    after: tuple[str, ...] = ()
    blocked_by: str | None = None
    """Why a DRAFT job cannot start: an upstream job died ("job a failed")."""
    auto_merge: bool = False
    review_enabled: bool = True
    head_sha: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    pr: PullView | None = None
    review: ReviewView | None = None
    spend: SpendView = NO_SPEND
    budget: BudgetView = BudgetView()

    @property
    def gated(self) -> bool:
        return self.wave_gate != "auto"

    @property
    def shown_state(self) -> str:
        """A DRAFT job whose upstream died is BLOCKED, as a task is."""
        return "BLOCKED" if self.state == "DRAFT" and self.blocked_by else self.state

    @property
    def budget_exhausted(self) -> bool:
        return self.budget.level == "exhausted"


def read_jobs(
    session: Session,
    *,
    job_ids: Iterable[str] | None = None,
    spend: Mapping[str, SpendView] | None = None,
    warn_at: float = 0.8,
) -> list[JobView]:
    """Jobs in submission order with their pull request, latest review, spend (summed now
    unless ``spend`` is given) and budget; of ``job_ids`` when given."""
    query = select(Job).order_by(col(Job.created_at), col(Job.id))
    if job_ids is not None:
        query = query.where(col(Job.id).in_(sorted(set(job_ids))))
    rows = list(session.exec(query))
    ids = [row.id for row in rows]
    if spend is None:
        spend = spend_by(session, Execution.job_id, ids, with_models=True)
    pulls = read_pulls(session, ids)
    return [_job_view(row, *pulls.get(row.id, (None, None)), spend, warn_at) for row in rows]


def _job_view(
    row: Job,
    pr: PullView | None,
    review: ReviewView | None,
    spend: Mapping[str, SpendView],
    warn_at: float,
) -> JobView:
    spent = spend.get(row.id, NO_SPEND)
    state = judge(
        Spend(spent.cost_usd, spent.tokens), Cap(row.budget_usd, row.budget_tokens), warn_at
    )
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
        review_enabled=row.review_enabled,
        head_sha=row.head_sha,
        budget_usd=row.budget_usd,
        budget_tokens=row.budget_tokens,
        pr=pr,
        review=review,
        spend=spent,
        budget=BudgetView(state.level, state.text, round(state.fraction, 4)),
    )

"""The read model: typed, immutable views of what relay knows, for ``relay status``, its
``--json``, the console, and the engine steps that decide on the same facts.

Every view is built here from filtered SQL (a job's tasks are read with ``WHERE job_id``,
spend is summed by the database), never by loading whole tables and filtering in Python,
so the CLI, a console on another host and 50,000 tasks all read the same way. Renderers
(the CLI's tables and JSON, the console's panes) turn views into text; nothing else reads
these tables for display.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, case, func, or_
from sqlmodel import Session, col, select

from relay_engine.contracts.accounts import split_key
from relay_engine.contracts.config import AgentConfig, ProviderConfig, RelayConfig
from relay_engine.contracts.time_format import format_time
from relay_engine.core.availability import READY, Availability, describe
from relay_engine.core.budgets import Cap, Spend, judge
from relay_engine.core.failures import FailureClass
from relay_engine.core.quota import QuotaReading, Watermark, watermark, window_label
from relay_engine.core.quota import QuotaWindow as Window
from relay_engine.core.selection import FleetView
from relay_engine.core.states import JobState, TaskState
from relay_engine.core.waits import AgentHome, GateState, Wait, job_wait, pinned_wait, task_wait
from relay_engine.core.waits import TaskFacts as WaitFacts
from relay_engine.store.db import DEFAULT_LEASE_S
from relay_engine.store.engines import why_gone
from relay_engine.store.plan_rows import allowed_wave, gated_keys
from relay_engine.store.schema import (
    AgentRecord,
    AgentStatus,
    Ask,
    Assignment,
    EngineRecord,
    Execution,
    Job,
    PermissionRule,
    Plan,
    ProviderLimit,
    PullRequest,
    QuotaWindow,
    Review,
    Task,
)
from relay_engine.store.spend import agent_holds

TEXT_KEPT = 1000
DEFAULT_STOP_AT = ProviderConfig().stop_at  # with no relay.toml at hand
"""Errors and results are clipped in views (the detail screen reads them whole): 50,000
tasks with agent-sized texts must not fill a console's memory."""
CHUNK = 500


def _clipped(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_KEPT else text[: TEXT_KEPT - 1] + "…"


def _whole(text: str | None) -> str | None:
    return text


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# -- tasks ----------------------------------------------------------------------------------
TASK_COLUMNS = tuple(
    getattr(Task, name)
    for name in (
        "key", "job_id", "task_id", "title", "kind", "state", "role", "workstream", "agent",
        "pinned_agent", "provider", "attempt", "max_attempts", "wave", "story_size",
        "dependencies", "blocked_by", "waiting_on_provider", "not_before", "execution_id",
        "error", "result_summary", "started_at", "finished_at", "created_at", "updated_at",
        "parent_key", "external_deps", "priority", "plan_id", "guidance", "held_by", "held_at",
        "timeout_s",
    )
)  # fmt: skip
"""The columns a TaskView needs: no input, result data or sim script (prompts are large)."""


@dataclass(frozen=True, slots=True)
class TaskView:
    key: str
    job_id: str
    task_id: str
    title: str
    kind: str
    state: str
    role: str
    workstream: str | None
    agent: str | None
    provider: str | None
    attempt: int
    max_attempts: int
    wave: int
    story_size: str
    dependencies: tuple[str, ...]
    blocked_by: str | None
    waiting_on_provider: str | None
    not_before: float | None
    execution_id: str | None
    error: str | None
    result_summary: str | None
    started_at: float | None
    finished_at: float | None
    created_at: float
    updated_at: float
    parent_key: str | None = None
    """A troubleshooter's failed task: the console shows it as that task's child."""
    external_deps: tuple[str, ...] = ()
    """"JOB/TASK" of other jobs' tasks this one waits for."""
    priority: str = "P2"
    plan_id: int | None = None
    guidance: str | None = None
    held_by: str | None = None  # HELD: the operator who took it over, and since when
    held_at: float | None = None
    timeout_s: float | None = None
    """The task's own timeout; None: its story size's."""

    @classmethod
    def from_row(cls, row: Any, *, clip: bool = True) -> TaskView:
        """From a Task, or a row of :data:`TASK_COLUMNS` (what the readers select); long
        errors and results are clipped unless ``clip`` is False."""
        kept = _clipped if clip else _whole
        return cls(
            key=row.key,
            job_id=row.job_id,
            task_id=row.task_id,
            title=row.title or row.task_id,
            kind=row.kind,
            state=str(row.state),
            role=row.role,
            workstream=row.workstream,
            agent=row.agent or row.pinned_agent,
            provider=row.provider,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            wave=row.wave,
            story_size=row.story_size,
            dependencies=tuple(row.dependencies or ()),
            blocked_by=row.blocked_by,
            waiting_on_provider=row.waiting_on_provider,
            not_before=row.not_before,
            execution_id=row.execution_id,
            error=kept(row.error),
            result_summary=kept(row.result_summary),
            started_at=row.started_at,
            finished_at=row.finished_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            parent_key=row.parent_key,
            external_deps=tuple(row.external_deps or ()),
            priority=row.priority,
            plan_id=row.plan_id,
            guidance=row.guidance,
            held_by=row.held_by,
            held_at=row.held_at,
            timeout_s=row.timeout_s,
        )

    @property
    def shown_state(self) -> str:
        """The state the operator sees: a DRAFT task held by a failed dependency is BLOCKED."""
        return "BLOCKED" if self.state == "DRAFT" and self.blocked_by else self.state


def read_tasks(
    session: Session,
    *,
    job_ids: Iterable[str] | None = None,
    keys: Iterable[str] | None = None,
    clip: bool = True,
) -> list[TaskView]:
    """Tasks in job, wave and creation order; of ``job_ids`` or ``keys`` when given."""
    order = (col(Task.job_id), col(Task.wave), col(Task.created_at))
    query = select(*TASK_COLUMNS).order_by(*order)  # type: ignore[call-overload]
    column, values = (Task.job_id, job_ids) if job_ids is not None else (Task.key, keys)
    if values is None:
        return [TaskView.from_row(row, clip=clip) for row in session.exec(query)]
    found: list[TaskView] = []
    for chunk in _chunks(sorted(set(values))):
        rows = session.exec(query.where(col(column).in_(chunk)))
        found += [TaskView.from_row(row, clip=clip) for row in rows]
    return found


# -- spend ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SpendView:
    """Tokens and dollars of some executions; ``estimated`` when part of the cost came from
    the price table (shown with a ``~``); ``unpriced`` executions used tokens of a model
    without a price."""

    cost_usd: float = 0.0
    estimated: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    executions: int = 0
    unpriced: int = 0
    models: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def of_execution(cls, row: Execution) -> SpendView:
        if row.cost_usd is None and not row.input_tokens and not row.output_tokens:
            return NO_SPEND
        return cls(
            cost_usd=row.cost_usd or 0.0,
            estimated=row.cost_estimated,
            input_tokens=row.input_tokens or 0,
            output_tokens=row.output_tokens or 0,
            cached_tokens=row.cached_tokens or 0,
            executions=1,
            models=(row.model,) if row.model else (),
        )


NO_SPEND = SpendView()


def spend_by(
    session: Session,
    column: Any,
    keys: Iterable[str] | None = None,
    *,
    with_models: bool = False,
) -> dict[str, SpendView]:
    """Spend of every started execution grouped by ``column`` (``Execution.job_id`` or
    ``Execution.task_key``); ``keys`` limits the groups read (None: all)."""
    tokens = func.coalesce(Execution.input_tokens, 0) + func.coalesce(Execution.output_tokens, 0)
    unpriced = case((col(Execution.cost_usd).is_(None) & (tokens > 0), 1), else_=0)
    priced = col(Execution.cost_usd).is_not(None)
    estimated = case((priced & col(Execution.cost_estimated), 1), else_=0)  # no max(bool) in PG
    query = select(
        column,
        func.sum(func.coalesce(Execution.cost_usd, 0.0)),
        func.max(estimated),
        func.sum(func.coalesce(Execution.input_tokens, 0)),
        func.sum(func.coalesce(Execution.output_tokens, 0)),
        func.sum(func.coalesce(Execution.cached_tokens, 0)),
        func.count(),
        func.sum(unpriced),
    ).where(col(Execution.started_at).is_not(None), col(column).is_not(None))
    groups = [None] if keys is None else list(_chunks(sorted(set(keys))))
    found: dict[str, SpendView] = {}
    for chunk in groups:
        part = query if chunk is None else query.where(col(column).in_(chunk))
        found |= _spend_rows(session, part.group_by(column))
    if with_models and found:
        found = _with_models(session, column, found)
    return found


def spend_since(session: Session, since: float) -> SpendView:
    """Spend of the executions started at or after ``since`` (today's, for a header)."""
    found = _spend_rows(
        session,
        select(
            func.min(1),
            func.sum(func.coalesce(Execution.cost_usd, 0.0)),
            func.max(case((col(Execution.cost_estimated), 1), else_=0)),
            func.sum(func.coalesce(Execution.input_tokens, 0)),
            func.sum(func.coalesce(Execution.output_tokens, 0)),
            func.sum(func.coalesce(Execution.cached_tokens, 0)),
            func.count(),
            func.sum(case((col(Execution.cost_usd).is_(None), 1), else_=0)),
        ).where(col(Execution.started_at) >= since),
    )
    return next(iter(found.values()), NO_SPEND)


def _spend_rows(session: Session, query: Any) -> dict[str, SpendView]:
    return {
        key: SpendView(
            float(cost or 0), bool(estimated), int(inp or 0), int(out or 0), int(cached or 0),
            int(runs), int(unpriced or 0),
        )
        for key, cost, estimated, inp, out, cached, runs, unpriced in session.exec(query)
    }  # fmt: skip


def _with_models(
    session: Session, column: Any, spend: dict[str, SpendView]
) -> dict[str, SpendView]:
    models: dict[str, set[str]] = {}
    for chunk in _chunks(sorted(spend)):
        query = (
            select(column, Execution.model)
            .where(col(column).in_(chunk), col(Execution.model).is_not(None))
            .where(col(Execution.started_at).is_not(None))
            .distinct()
        )
        for key, model in session.exec(query):
            models.setdefault(key, set()).add(model)
    return {
        key: _replace_models(view, tuple(sorted(models.get(key, ()))))
        for key, view in spend.items()
    }


def _replace_models(view: SpendView, models: tuple[str, ...]) -> SpendView:
    return SpendView(
        view.cost_usd, view.estimated, view.input_tokens, view.output_tokens,
        view.cached_tokens, view.executions, view.unpriced, models,
    )  # fmt: skip


# -- jobs, pull requests, reviews -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BudgetView:
    """Where a job's spend stands against its budget (:func:`relay_engine.core.budgets.judge`)."""

    level: str = "none"  # none | ok | warning | exhausted
    text: str = ""
    fraction: float = 0.0


@dataclass(frozen=True, slots=True)
class PullView:
    """A job's pull request: where it lives, its state, and why it waits."""

    forge: str
    state: str
    base_branch: str
    head_branch: str
    head_sha: str | None
    target: str
    number: int | None = None
    url: str | None = None
    remote: str | None = None
    mergeable: str | None = None
    merge_commit: str | None = None
    note: str | None = None
    error: str | None = None
    merge_requested: bool = False
    last_checked_at: float | None = None


@dataclass(frozen=True, slots=True)
class ReviewView:
    """A job's latest final review: the head it read, its verdict and findings; ``stale``
    once the head moved after it."""

    round: int
    verdict: str | None
    stale: bool
    head_sha: str | None = None
    summary: str | None = None
    findings: tuple[Mapping[str, Any], ...] = ()
    task: str | None = None


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


def read_pulls(
    session: Session, job_ids: Sequence[str]
) -> dict[str, tuple[PullView | None, ReviewView | None]]:
    """job id -> its pull request and latest final review (either None when it has none)."""
    if not job_ids:
        return {}
    ids = sorted(set(job_ids))
    prs = {
        p.job_id: p
        for p in session.exec(select(PullRequest).where(col(PullRequest.job_id).in_(ids)))
    }
    latest: dict[str, Review] = {}
    reviews = select(Review).where(col(Review.job_id).in_(ids)).order_by(col(Review.number))
    for review in session.exec(reviews):
        latest[review.job_id] = review
    return {
        job_id: (
            _pull_view(prs[job_id]) if job_id in prs else None,
            _review_view(latest[job_id], prs.get(job_id)) if job_id in latest else None,
        )
        for job_id in ids
    }


def merge_target(pr: PullRequest) -> str:
    """Where a merge of this pull request lands, in words (no I/O: consoles may be remote)."""
    if pr.forge == "github":
        return f"{pr.base_branch} on GitHub" + (f" ({pr.url})" if pr.url else "")
    if pr.remote:
        return f"{pr.base_branch} on {pr.remote}"
    return f"{pr.base_branch} in the job's repository (left to you while it is checked out)"


def _pull_view(pr: PullRequest) -> PullView:
    return PullView(
        forge=pr.forge,
        state=str(pr.state),
        base_branch=pr.base_branch,
        head_branch=pr.head_branch,
        head_sha=pr.head_sha,
        target=merge_target(pr),
        number=pr.number,
        url=pr.url,
        remote=pr.remote,
        mergeable=pr.mergeable,
        merge_commit=pr.merge_commit,
        note=pr.note,
        error=pr.error,
        merge_requested=pr.merge_requested,
        last_checked_at=pr.last_checked_at,
    )


def _review_view(review: Review, pr: PullRequest | None) -> ReviewView:
    current = pr is not None and review.head_sha == pr.head_sha and not review.stale
    return ReviewView(
        round=review.number,
        verdict=review.verdict,
        stale=review.stale or not current,
        head_sha=review.head_sha,
        summary=review.summary,
        findings=tuple(review.findings or ()),
        task=review.task_key,
    )


def read_reviews(session: Session, job_id: str) -> list[ReviewView]:
    """Every final review round of a job, oldest first (``stale`` against its pull
    request's current head, as in :func:`read_pulls`)."""
    pr = session.get(PullRequest, job_id)
    rows = session.exec(select(Review).where(Review.job_id == job_id).order_by(col(Review.number)))
    return [_review_view(review, pr) for review in rows]


# -- planner rounds -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PlanView:
    id: int
    job_id: str
    round: int
    trigger: str
    guidance: str | None
    status: str
    objective_status: str | None
    assessment: str | None
    error: str | None = None
    rejection: str | None = None
    generated_task_ids: tuple[str, ...] = ()


def read_plans(session: Session, *, job_ids: Iterable[str] | None = None) -> list[PlanView]:
    query = select(Plan).order_by(col(Plan.job_id), col(Plan.round))
    if job_ids is not None:
        query = query.where(col(Plan.job_id).in_(sorted(set(job_ids))))
    return [
        PlanView(
            id=row.id or 0,
            job_id=row.job_id,
            round=row.round,
            trigger=row.trigger,
            guidance=row.guidance,
            status=str(row.status),
            objective_status=row.objective_status,
            assessment=row.assessment,
            error=row.error,
            rejection=row.rejection,
            generated_task_ids=tuple(row.generated_task_ids or ()),
        )
        for row in session.exec(query)
    ]


# -- executions -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ExecutionView:
    """One run of a task or planner round: where it ran, how it ended, what it cost."""

    id: str
    job_id: str
    task_key: str | None
    plan_id: int | None
    agent: str | None
    provider: str | None
    attempt: int
    started_at: float | None
    ended_at: float | None
    outcome: str | None
    exit_code: int | None
    error: str | None
    artifact_dir: str | None
    last_output: str | None
    model: str | None = None
    spend: SpendView = NO_SPEND
    """Known when the CLI reports it, usually at the run's end."""
    cwd: str | None = None
    """The worktree (or directory) the agent ran in."""
    engine_id: str = ""
    """The engine that runs (or ran) it: a console tells a run whose engine is gone."""


def read_executions(
    session: Session,
    *,
    job_id: str | None = None,
    task_key: str | None = None,
    running: bool = False,
) -> list[ExecutionView]:
    """Runs oldest first (one not yet started last); only unfinished ones with ``running``."""
    query = select(Execution)
    if running:
        query = query.where(col(Execution.ended_at).is_(None))
    if job_id is not None:
        query = query.where(col(Execution.job_id) == job_id)
    if task_key is not None:
        query = query.where(col(Execution.task_key) == task_key)
    query = query.order_by(col(Execution.started_at).asc().nulls_last(), col(Execution.id))
    return [_execution_view(row) for row in session.exec(query)]


def _execution_view(row: Execution) -> ExecutionView:
    return ExecutionView(
        id=row.id,
        job_id=row.job_id,
        task_key=row.task_key,
        plan_id=row.plan_id,
        agent=row.agent,
        provider=row.provider,
        attempt=row.attempt,
        started_at=row.started_at,
        ended_at=row.ended_at,
        outcome=row.outcome,
        exit_code=row.exit_code,
        error=row.error,
        artifact_dir=row.artifact_dir,
        last_output=row.last_output,
        model=row.model,
        spend=SpendView.of_execution(row),
        cwd=row.cwd,
        engine_id=row.engine_id,
    )


# -- one task in full -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TaskDetailView:
    """One task for a detail screen: its view with errors and results whole, and what
    :class:`TaskView` leaves out so 50,000 of them fit in a console (the prompt, the
    diffstat), with its latest runs."""

    task: TaskView
    input: str
    diffstat: str | None
    executions: tuple[ExecutionView, ...]
    """Newest first."""


def read_task_detail(session: Session, key: str, *, runs: int = 8) -> TaskDetailView | None:
    """The task ``key`` with its ``runs`` latest executions; None when there is no such task."""
    row = session.get(Task, key)
    if row is None:
        return None
    query = (
        select(Execution)
        .where(col(Execution.task_key) == key)
        .order_by(col(Execution.started_at).desc(), col(Execution.id).desc())
        .limit(runs)
    )
    return TaskDetailView(
        task=TaskView.from_row(row, clip=False),
        input=row.input,
        diffstat=row.diffstat,
        executions=tuple(_execution_view(e) for e in session.exec(query)),
    )


# -- providers and agents -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LimitView:
    """A usage limit on one account: ``provider`` and ``account`` ("" for the provider's
    default account), ``key`` what tasks waiting on it name (``claude/work``)."""

    provider: str
    status: str
    reset_at: float | None
    source_text: str | None
    account: str = ""
    key: str = ""


def read_limits(session: Session) -> list[LimitView]:
    rows = session.exec(select(ProviderLimit).order_by(col(ProviderLimit.provider)))
    return [_limit_view(row) for row in rows]


def _limit_view(row: ProviderLimit) -> LimitView:
    provider, account = split_key(row.provider)  # the row's key is the account's
    return LimitView(provider, row.status, row.reset_at, row.source_text, account, row.provider)


# -- quota windows --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaView:
    """One account's quota window, for a gauge: how full (``utilization`` 0..1, None when
    the CLI has not said), which window (``label`` "five-hour"), when it resets, and whether
    it holds new work back right now (``holding``, above ``stop_at``, until ``until``)."""

    key: str
    provider: str
    account: str
    window: str
    label: str
    status: str
    utilization: float | None
    resets_at: float | None
    window_minutes: int | None
    threshold: float | None
    observed_at: float
    stop_at: float
    holding: bool = False
    until: float | None = None
    reason: str | None = None  # "claude/work at 96% of its five-hour window until 17:10"
    agent: str | None = None


def quota_windows(session: Session, keys: Iterable[str] | None = None) -> dict[str, list[Window]]:
    """account key -> its windows as the decisions read them."""
    query = select(QuotaWindow).order_by(col(QuotaWindow.key), col(QuotaWindow.window))
    if keys is not None:
        query = query.where(col(QuotaWindow.key).in_(sorted(set(keys))))
    found: dict[str, list[Window]] = {}
    for row in session.exec(query):
        found.setdefault(row.key, []).append(_window(row))
    return found


def _window(row: QuotaWindow) -> Window:
    reading = QuotaReading(
        window=row.window, status=row.status, utilization=row.utilization,
        resets_at=row.resets_at, window_minutes=row.window_minutes, threshold=row.threshold,
        overage=row.overage,
    )  # fmt: skip
    return Window(row.key, reading, row.observed_at)


def watermarks(session: Session, config: RelayConfig | None, now: float) -> dict[str, Watermark]:
    """Accounts whose quota holds new work back at ``now`` (each at its own stop_at)."""
    held = {}
    for key, windows in quota_windows(session).items():
        stop_at = config.stop_at(key) if config is not None else DEFAULT_STOP_AT
        mark = watermark(windows, stop_at, now)
        if mark is not None:
            held[key] = mark
    return held


def read_quota(
    session: Session, config: RelayConfig | None = None, now: float | None = None
) -> list[QuotaView]:
    """Every account's windows, by account and window (what a Providers-pane gauge reads)."""
    rows = list(
        session.exec(select(QuotaWindow).order_by(col(QuotaWindow.key), col(QuotaWindow.window)))
    )
    views = []
    for row in rows:
        stop_at = config.stop_at(row.key) if config is not None else DEFAULT_STOP_AT
        mark = watermark([_window(row)], stop_at, now) if now is not None else None
        views.append(
            QuotaView(
                key=row.key, provider=row.provider, account=row.account, window=row.window,
                label=window_label(row.window), status=row.status, utilization=row.utilization,
                resets_at=row.resets_at, window_minutes=row.window_minutes,
                threshold=row.threshold, observed_at=row.observed_at, stop_at=stop_at,
                holding=mark is not None, until=mark.until if mark else None,
                reason=mark.reason if mark else None, agent=row.agent,
            )
        )  # fmt: skip
    return views


def limited_providers(session: Session) -> dict[str, float]:
    """Providers marked limited, and until when (selection judges whether that is past)."""
    rows = session.exec(select(ProviderLimit).where(col(ProviderLimit.status) == "limited"))
    return {row.provider: row.reset_at or 0.0 for row in rows}


def known_agents(session: Session) -> list[AgentRecord]:
    """Every agent some engine defines, once each (the most recently mirrored row), by id."""
    latest: dict[str, AgentRecord] = {}
    for record in session.exec(select(AgentRecord).order_by(col(AgentRecord.updated_at))):
        latest[record.id] = record
    return [latest[agent_id] for agent_id in sorted(latest)]


def availability_map(session: Session) -> dict[str, Availability]:
    """Every agent that is not ready, by id (what selection reads)."""
    rows = session.exec(select(AgentStatus).where(col(AgentStatus.status) != READY))
    return {row.agent_id: availability_of(row) for row in rows}


def availability_of(row: AgentStatus) -> Availability:
    return Availability(
        agent_id=row.agent_id, status=row.status, reason=row.reason, fix=row.fix,
        until=row.until, failures=row.failures,
    )  # fmt: skip


def read_fleet(
    session: Session,
    config: RelayConfig | None = None,
    now: float | None = None,
    *,
    pins: Mapping[tuple[str, str, str], str] | None = None,
) -> FleetView:
    """What agent selection decides on: limited accounts, agents that cannot work (with
    those whose daily budget is spent, and those sharing a named account's failed login,
    when ``config`` and ``now`` are given), pins, and accounts over their watermark (when
    ``now`` is given)."""
    availability = availability_map(session)
    if config is not None:
        availability = shared_logins(availability, config.agents)
    if config is not None and now is not None:
        availability |= agent_holds(session, config, now)
    held = watermarks(session, config, now) if now is not None else {}
    return FleetView(limited_providers(session), availability, pins or {}, held)


def shared_logins(
    availability: Mapping[str, Availability], agents: Iterable[AgentConfig]
) -> dict[str, Availability]:
    """A login belongs to its account: when an agent of a named account is not logged in,
    every agent of that account is not either (they share the CLI's config directory)."""
    configured = list(agents)
    by_key = {a.id: a.account_key for a in configured if a.account}
    failed = {
        by_key[agent_id]: state
        for agent_id, state in availability.items()
        if agent_id in by_key and state.status == FailureClass.AUTH
    }
    shared = dict(availability)
    for agent in configured:
        state = failed.get(by_key.get(agent.id, ""))
        if state is not None and agent.id not in shared:
            shared[agent.id] = Availability(
                agent.id, state.status, state.reason, state.fix, state.until, state.failures
            )
    return shared


def active_pins(session: Session, job_ids: Iterable[str]) -> dict[tuple[str, str, str], str]:
    """(job, workstream, role) -> the agent pinned to it."""
    query = select(Assignment).where(
        col(Assignment.job_id).in_(sorted(set(job_ids))), Assignment.status == "active"
    )
    return {(a.job_id, a.workstream, a.role): a.agent_id for a in session.exec(query)}


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One agent and whether it can work: status ready, limited (its provider), budget (its
    daily budget is spent), or why it cannot (auth, unreachable, cli-missing, …)."""

    id: str
    provider: str
    enabled: bool
    status: str
    reason: str | None
    fix: str | None
    until: float | None
    summary: str  # "ready", "not logged in", "unreachable, probing at 14:32"
    roles: tuple[str, ...] = field(default=())
    account: str = ""  # its named account ("" for the provider's default)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "account": self.account or None,
            "enabled": self.enabled,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "until": self.until,
        }


@dataclass(frozen=True, slots=True)
class _Listed:
    id: str
    provider: str
    enabled: bool
    roles: tuple[str, ...]
    account: str
    key: str


def agent_rows(
    session: Session,
    now: float,
    agents: Iterable[AgentConfig] | None = None,
    *,
    config: RelayConfig | None = None,
) -> list[AgentRow]:
    """Every agent with its availability: ``agents`` from config, else as the last engine
    mirrored them (what a console on another host sees). With ``config``, an agent whose
    daily budget (or its provider's or account's) is spent shows status "budget"; an agent
    whose account is over its quota watermark shows status "quota"."""
    states = availability_map(session)
    limits = {
        row.provider: row
        for row in session.exec(select(ProviderLimit).where(ProviderLimit.status == "limited"))
        if (row.reset_at or 0.0) > now
    }
    listed = _listed(session, agents)
    if agents is not None:
        states = shared_logins(states, agents)
    held = agent_holds(session, config, now) if config is not None else {}
    marks = watermarks(session, config, now)
    rows = []
    for agent in listed:
        state = states.get(agent.id)
        row = _agent_row(agent.id, agent.provider, agent.enabled, state, limits.get(agent.key), now)
        hold = held.get(agent.id)
        if hold is not None and row.status == READY:
            row = AgentRow(
                agent.id, agent.provider, agent.enabled, "budget",
                reason=hold.reason,
                fix="wait for midnight, or raise daily_budget_usd in relay.toml",
                until=hold.until,
                summary=f"daily budget spent until {format_time(hold.until)}",
            )  # fmt: skip
        mark = marks.get(agent.key)
        if mark is not None and row.status == READY:
            row = AgentRow(
                agent.id, agent.provider, agent.enabled, "quota", reason=mark.reason,
                fix="nothing to do: new work goes to another account, or waits for the reset",
                until=mark.until, summary=mark.reason,
            )  # fmt: skip
        rows.append(_with_roles(row, agent.roles, agent.account))
    return rows


def _listed(session: Session, agents: Iterable[AgentConfig] | None) -> list[_Listed]:
    if agents is None:
        return [
            _Listed(r.id, r.provider, r.enabled, tuple(r.roles or ()), r.account or "",
                    f"{r.provider}/{r.account}" if r.account else r.provider)
            for r in known_agents(session)
        ]  # fmt: skip
    return [
        _Listed(a.id, a.provider, a.enabled, tuple(a.roles), a.account or "", a.account_key)
        for a in agents
    ]


def _with_roles(row: AgentRow, roles: tuple[str, ...], account: str = "") -> AgentRow:
    return AgentRow(
        row.id, row.provider, row.enabled, row.status, row.reason, row.fix, row.until,
        row.summary, roles, account,
    )  # fmt: skip


def _agent_row(
    agent_id: str,
    provider: str,
    enabled: bool,
    state: Availability | None,
    limit: ProviderLimit | None,
    now: float,
) -> AgentRow:
    if state is None and limit is not None:  # able to work, but its provider is limited
        until = limit.reset_at
        return AgentRow(
            agent_id,
            provider,
            enabled,
            "limited",
            limit.source_text,
            "nothing to do: relay resumes the work at the reset",
            until,
            f"limited until {format_time(until)}",
        )
    return AgentRow(
        id=agent_id,
        provider=provider,
        enabled=enabled,
        status=state.status if state else READY,
        reason=state.reason if state else None,
        fix=state.fix if state else None,
        until=state.until if state else None,
        summary=describe(state, now, format_time),
    )


# -- asks -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AskView:
    """What an agent waits on: the tool and its exact input (or a question), and until when."""

    id: int
    job_id: str
    task_key: str | None
    execution_id: str
    agent: str
    kind: str  # permission | question
    tool: str
    tool_input: Mapping[str, Any]
    summary: str
    context: str | None
    suggested_rule: str | None
    status: str
    asked_at: float
    timeout_at: float | None
    answer: str | None = None
    answer_text: str | None = None
    answered_by: str | None = None
    rule_added: str | None = None

    @property
    def waiting(self) -> str:
        """``waiting on you: Bash npm test``, as status lines and the console put it."""
        return f"waiting on you: {self.summary}"


def read_asks(
    session: Session, *, open_only: bool = True, job_id: str | None = None
) -> list[AskView]:
    """Asks oldest first: the open ones (not yet answered), or every one."""
    query = select(Ask).order_by(col(Ask.asked_at), col(Ask.id))
    if open_only:
        query = query.where(col(Ask.status) == "open")
    if job_id is not None:
        query = query.where(col(Ask.job_id) == job_id)
    return [_ask_view(row) for row in session.exec(query)]


def _ask_view(row: Ask) -> AskView:
    return AskView(
        id=row.id or 0, job_id=row.job_id, task_key=row.task_key,
        execution_id=row.execution_id, agent=row.agent, kind=row.kind, tool=row.tool,
        tool_input=dict(row.tool_input or {}), summary=row.summary, context=row.context,
        suggested_rule=row.suggested_rule, status=row.status, asked_at=row.asked_at,
        timeout_at=row.timeout_at, answer=row.answer, answer_text=row.answer_text,
        answered_by=row.answered_by, rule_added=row.rule_added,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RuleView:
    scope: str
    target: str
    effect: str
    rule: str
    created_by: str | None


def read_added_rules(session: Session, *, job_id: str | None = None) -> list[RuleView]:
    """Rules operators added with "always" answers (for a job: its own, its tasks')."""
    query = select(PermissionRule).order_by(col(PermissionRule.id))
    rows = list(session.exec(query))
    if job_id is not None:
        rows = [r for r in rows if r.target == job_id or r.target.startswith(f"{job_id}/")]
    return [RuleView(r.scope, r.target, r.effect, r.rule, r.created_by) for r in rows]


# -- waits ----------------------------------------------------------------------------------
WAITING_TASK_STATES = (TaskState.PARKED, TaskState.HELD, TaskState.DRAFT)


def read_waits(
    session: Session,
    *,
    job_id: str | None = None,
    now: float | None = None,
    lease_seconds: float = DEFAULT_LEASE_S,
) -> list[Wait]:
    """Everything that waits for time or for someone, jobs first: what ``relay status``
    notes and ``relay run --until-idle`` lists when nothing else is left to do. Engines
    silent for ``lease_seconds`` at ``now`` count as not running."""
    job_query = select(Job.id, Job.state, Job.blocked_by, Job.after)
    if job_id is not None:
        job_query = job_query.where(col(Job.id) == job_id)
    waits = [
        wait
        for jid, state, blocked_by, after in session.exec(job_query.order_by(col(Job.created_at)))
        if (wait := job_wait(jid, state, blocked_by, after or ())) is not None
    ]
    at = time.time() if now is None else now
    return waits + _task_waits(session, job_id) + _pinned_waits(session, job_id, at, lease_seconds)


def agent_homes(session: Session, now: float, lease_seconds: float) -> dict[str, list[AgentHome]]:
    """Agent id -> the engines that define it (live ones first, then the most recently
    seen), from the engines registry's rosters."""
    homes: dict[str, list[AgentHome]] = {}
    records = session.exec(select(EngineRecord).order_by(col(EngineRecord.heartbeat_at).desc()))
    for record in records:
        live = why_gone(record, now=now, lease_seconds=lease_seconds) is None
        for agent in record.agents or ():
            homes.setdefault(agent, []).append(AgentHome(record.id, record.host, live))
    for found in homes.values():
        found.sort(key=lambda home: not home.live)
    return homes


def live_agents(session: Session, now: float, lease_seconds: float) -> set[str]:
    """Agents some live engine defines: what ``relay submit`` accepts besides its own."""
    homes = agent_homes(session, now, lease_seconds)
    return {agent for agent, found in homes.items() if any(h.live for h in found)}


def _pinned_waits(
    session: Session, job_id: str | None, now: float, lease_seconds: float
) -> list[Wait]:
    """Queued tasks pinned (themselves or through their workstream) to an agent no live
    engine defines: only an engine that defines it claims them."""
    pins = {
        (a.job_id, a.workstream, a.role): a.agent_id
        for a in session.exec(select(Assignment).where(Assignment.status == "active"))
        if job_id is None or a.job_id == job_id
    }
    query = select(Task.key, Task.job_id, Task.workstream, Task.role, Task.pinned_agent).where(
        Task.state == TaskState.QUEUED, col(Task.execution_id).is_(None)
    )
    pinned_jobs = sorted({job for job, _, _ in pins})
    query = query.where(or_(col(Task.pinned_agent).is_not(None), col(Task.job_id).in_(pinned_jobs)))
    if job_id is not None:
        query = query.where(col(Task.job_id) == job_id)
    rows = list(session.exec(query.order_by(col(Task.job_id), col(Task.created_at))))
    if not rows:
        return []
    homes = agent_homes(session, now, lease_seconds)
    found = []
    for key, job, workstream, role, pinned in rows:
        via_pin = pins.get((job, workstream or "", role))
        agent = pinned or via_pin
        if agent is None:
            continue
        through = None if pinned else workstream
        wait = pinned_wait(key, agent, homes.get(agent, []), workstream=through)
        if wait is not None:
            found.append(wait)
    return found


WAIT_COLUMNS = (
    Task.key, Task.job_id, Task.state, Task.wave, Task.waiting_on_provider, Task.not_before,
    Task.error, Task.held_by,
)  # fmt: skip
"""What a task's wait is made of: a console reads waits every second, and 50,000 draft
tasks as whole rows (their inputs too) cost it half a second and tens of megabytes."""


def _task_waits(session: Session, job_id: str | None) -> list[Wait]:
    gated, gates = gated_keys(session), _gates(session)
    # DRAFT tasks wait only behind a gate: read those of gated jobs, not every draft.
    drafts = and_(col(Task.state) == TaskState.DRAFT, col(Task.job_id).in_(sorted(gates)))
    held_or_parked = col(Task.state).in_([s for s in WAITING_TASK_STATES if s != TaskState.DRAFT])
    query = select(*WAIT_COLUMNS).where(or_(held_or_parked, drafts))  # type: ignore[call-overload]
    if job_id is not None:
        query = query.where(col(Task.job_id) == job_id)
    found = []
    for task in session.exec(query.order_by(col(Task.job_id), col(Task.created_at))):
        if task.state == TaskState.DRAFT and task.key not in gated:
            continue
        gate = gates.get(task.job_id) if task.key in gated else None
        wait = task_wait(_wait_facts(task), gate=gate)
        if wait is not None:
            found.append(wait)
    return found


def _gates(session: Session) -> dict[str, GateState]:
    """How each gated job's next wave opens: by the operator, by its assessor, or -- its
    assessment having failed -- by the operator after all."""
    jobs = session.exec(select(Job).where(Job.state == JobState.ACTIVE, Job.wave_gate != "auto"))
    gates: dict[str, GateState] = {}
    for job in jobs:
        if job.wave_gate != "assess":
            gates[job.id] = "operator"
            continue
        failed = select(Task.key).where(
            Task.job_id == job.id, Task.kind == "assess", Task.state == TaskState.FAILED,
            Task.wave == allowed_wave(session, job),
        )  # fmt: skip
        gates[job.id] = "held" if session.exec(failed).first() else "assess"
    return gates


def _wait_facts(task: Any) -> WaitFacts:
    """From a Task or a row of :data:`WAIT_COLUMNS`."""
    return WaitFacts(
        key=task.key, job_id=task.job_id, state=str(task.state), wave=task.wave,
        waiting_on_provider=task.waiting_on_provider, not_before=task.not_before,
        error=task.error, held_by=task.held_by,
    )  # fmt: skip

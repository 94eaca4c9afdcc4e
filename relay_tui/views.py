"""Immutable views of the database rows the console shows (built off the UI thread)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from relay_engine.store.schema import Task

TEXT_KEPT = 1000
"""Errors and results are clipped in views (the detail screen reads them whole): 50,000
tasks with agent-sized texts must not fill the console's memory."""
TASK_COLUMNS = tuple(
    getattr(Task, name)
    for name in (
        "key", "job_id", "task_id", "title", "kind", "state", "role", "workstream", "agent",
        "pinned_agent", "provider", "attempt", "max_attempts", "wave", "story_size",
        "dependencies", "blocked_by", "waiting_on_provider", "not_before", "execution_id",
        "error", "result_summary", "started_at", "finished_at", "created_at", "updated_at",
        "parent_key", "external_deps",
    )
)  # fmt: skip
"""The columns a TaskView needs: no input, result data or sim script (prompts are large)."""


def _clipped(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_KEPT else text[: TEXT_KEPT - 1] + "…"


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

    @classmethod
    def from_row(cls, row: Any) -> TaskView:
        """From a Task, or a row of :data:`TASK_COLUMNS` (what the projection selects)."""
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
            error=_clipped(row.error),
            result_summary=_clipped(row.result_summary),
            started_at=row.started_at,
            finished_at=row.finished_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            parent_key=row.parent_key,
            external_deps=tuple(row.external_deps or ()),
        )

    @property
    def shown_state(self) -> str:
        """The state the operator sees: a DRAFT task held by a failed dependency is BLOCKED."""
        return "BLOCKED" if self.state == "DRAFT" and self.blocked_by else self.state


@dataclass(frozen=True, slots=True)
class SpendView:
    """Tokens and dollars of some executions; ``estimated`` when part of the cost came from
    the price table (shown with a ``~``)."""

    cost_usd: float = 0.0
    estimated: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    executions: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


NO_SPEND = SpendView()


@dataclass(frozen=True, slots=True)
class BudgetView:
    """Where a job's spend stands against its budget (``relay_engine.ops.budgets.judge``)."""

    level: str = "none"  # none | ok | warning | exhausted
    text: str = ""
    fraction: float = 0.0


@dataclass(frozen=True, slots=True)
class PullView:
    """A job's pull request as ``relay_engine.ops.pulls.pull_summaries`` reports it."""

    forge: str
    state: str
    base_branch: str
    head_branch: str
    head_sha: str | None
    target: str
    number: int | None = None
    url: str | None = None
    mergeable: str | None = None
    note: str | None = None
    error: str | None = None
    merge_requested: bool = False

    @classmethod
    def from_summary(cls, pr: Mapping[str, Any]) -> PullView:
        return cls(**{f.name: pr.get(f.name) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class ReviewView:
    """A job's latest final review: the head it read, its verdict and findings."""

    round: int
    verdict: str | None
    stale: bool
    head_sha: str | None = None
    summary: str | None = None
    findings: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_summary(cls, review: Mapping[str, Any]) -> ReviewView:
        return cls(
            round=int(review.get("round") or 1),
            verdict=review.get("verdict"),
            stale=bool(review.get("stale")),
            head_sha=review.get("head_sha"),
            summary=review.get("summary"),
            findings=tuple(review.get("findings") or ()),
        )


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


@dataclass(frozen=True, slots=True)
class RunView:
    execution_id: str
    task_key: str | None
    job_id: str
    plan_id: int | None
    agent: str | None
    provider: str | None
    attempt: int
    started_at: float | None
    last_output: str | None
    artifact_dir: str | None
    model: str | None = None
    spend: SpendView = NO_SPEND
    """This run's tokens and cost: known when the CLI reports them, usually at its end."""


@dataclass(frozen=True, slots=True)
class ProviderView:
    provider: str
    status: str
    reset_at: float | None
    source_text: str | None
    parked: int
    running: int


@dataclass(frozen=True, slots=True)
class AgentStatusView:
    """One agent and whether it can work (``relay_engine.ops.agents.AgentRow``), or
    status "budget" when its (or its provider's) daily budget is spent."""

    id: str
    provider: str
    enabled: bool
    status: str  # ready | limited | auth | unreachable | cli-missing | cli-rejected | budget
    summary: str  # "ready", "limited until 14:32", "not logged in", ...
    reason: str | None = None
    fix: str | None = None
    until: float | None = None


@dataclass(frozen=True, slots=True)
class AgentView:
    id: str
    provider: str
    roles: tuple[str, ...]
    enabled: bool


@dataclass(frozen=True, slots=True)
class EventView:
    id: int
    at: float
    kind: str
    level: str
    message: str
    job_id: str | None
    task_key: str | None


@dataclass(frozen=True, slots=True)
class WaveView:
    job_id: str
    wave: int
    total: int
    done: int
    failed: int
    running: int
    awaiting_approval: bool
    cancelled: int = 0


@dataclass(frozen=True, slots=True)
class CommandView:
    """An operator command and, once some engine applied it, what became of it."""

    id: int
    kind: str
    payload: Mapping[str, object]
    applied: bool
    succeeded: bool | None
    outcome: str | None


@dataclass(frozen=True, slots=True)
class FleetView:
    """The header's facts: live engines, their freshest heartbeat, queued commands, and
    engines gone silent (without stopping) within the last day."""

    engines_alive: int = 0
    engines_gone: int = 0
    heartbeat_age: float | None = None
    commands_waiting: int = 0


@dataclass(frozen=True)
class Snapshot:
    """Everything the panes show, at one instant; never mutated after creation."""

    tasks: Mapping[str, TaskView]
    jobs: tuple[JobView, ...]
    plans: tuple[PlanView, ...]
    waves: tuple[WaveView, ...]
    runs: tuple[RunView, ...]
    providers: tuple[ProviderView, ...]
    agents: tuple[AgentView, ...]
    new_events: tuple[EventView, ...]
    changed_tasks: frozenset[str]
    structure_changed: bool
    first: bool
    last_event_id: int
    previous_states: Mapping[str, str] = field(default_factory=dict)
    job_progress: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """job id -> (succeeded, total) tasks, counted here so the UI thread never walks 5,000."""
    state_counts: Mapping[str, int] = field(default_factory=dict)
    fleet: FleetView = FleetView()
    command_outcomes: tuple[CommandView, ...] = ()
    """Commands this console watches that were applied since the previous snapshot."""
    agent_rows: tuple[AgentStatusView, ...] = ()
    task_spend: Mapping[str, SpendView] = field(default_factory=dict)
    """task key -> spend of its executions so far (tasks that spent nothing are absent)."""

    def provider(self, name: str | None) -> ProviderView | None:
        return next((p for p in self.providers if p.provider == name), None)

    def job(self, job_id: str | None) -> JobView | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def run(self, execution_id: str | None) -> RunView | None:
        return next((r for r in self.runs if r.execution_id == execution_id), None)

    def agent_row(self, agent_id: str | None) -> AgentStatusView | None:
        return next((a for a in self.agent_rows if a.id == agent_id), None)

"""The console's snapshot: the engine's read model (:mod:`relay_engine.store.read_model`)
at one instant, plus what only the console derives from it (waves, provider counts, the
header's fleet health, new events, watched commands). Built off the UI thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from relay_engine.core.waits import Wait
from relay_engine.store.read_model.agents import AgentRow
from relay_engine.store.read_model.asks import AskView
from relay_engine.store.read_model.executions import ExecutionView
from relay_engine.store.read_model.jobs import JobView
from relay_engine.store.read_model.plans import PlanView
from relay_engine.store.read_model.providers import QuotaView
from relay_engine.store.read_model.spend import NO_SPEND, SpendView
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.progress import RunProgress


@dataclass(frozen=True, slots=True)
class ProviderView:
    provider: str
    status: str
    reset_at: float | None
    source_text: str | None
    parked: int
    running: int


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
    dropped: int = 0
    held: bool = False
    """Its gate is held shut: the assessment of the wave before failed (``gate.held``), so
    only the operator opens it (``relay approve``)."""


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
class FleetHealth:
    """The header's facts: live engines, their freshest heartbeat, queued commands, and
    engines gone silent (without stopping) within the last day."""

    engines_alive: int = 0
    engines_asleep: int = 0
    """Of the live engines, those sleeping between heartbeats: the fleet had no work."""
    engines_gone: int = 0
    heartbeat_age: float | None = None
    commands_waiting: int = 0
    slots: int | None = None
    """Agent slots of the live engines (None when an engine did not record its own)."""


@dataclass(frozen=True)
class Snapshot:
    """Everything the panes show, at one instant; never mutated after creation."""

    tasks: Mapping[str, TaskView]
    jobs: tuple[JobView, ...]
    plans: tuple[PlanView, ...]
    waves: tuple[WaveView, ...]
    runs: tuple[ExecutionView, ...]
    providers: tuple[ProviderView, ...]
    agents: tuple[AgentRow, ...]
    """Every agent some engine defines (what the Providers pane and the pin dialog list)."""
    new_events: tuple[EventView, ...]
    changed_tasks: frozenset[str]
    structure_changed: bool
    first: bool
    previous_states: Mapping[str, str] = field(default_factory=dict)
    job_progress: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """job id -> (succeeded, total) tasks, counted here so the UI thread never walks 5,000."""
    state_counts: Mapping[str, int] = field(default_factory=dict)
    stuck_reasons: Mapping[str, str] = field(default_factory=dict)
    """BLOCKED, PARKED, HELD -> the reason most of those tasks share (what the header says)."""
    fleet: FleetHealth = FleetHealth()
    command_outcomes: tuple[CommandView, ...] = ()
    """Commands this console watches that were applied since the previous snapshot."""
    agent_rows: tuple[AgentRow, ...] = ()
    """Agents with their availability, daily budgets included (relay.toml's when local)."""
    task_spend: Mapping[str, SpendView] = field(default_factory=dict)
    """task key -> spend of its executions so far (tasks that spent nothing are absent)."""
    progress: Mapping[str, RunProgress] = field(default_factory=dict)
    """execution id -> what that running agent is doing now (see :mod:`.progress`)."""
    asks: tuple[AskView, ...] = ()
    """Open asks, oldest first: what agents wait on the operator for."""
    spend_today: SpendView = NO_SPEND
    """Spend of the executions started since local midnight."""
    waits: Mapping[str, Wait] = field(default_factory=dict)
    """What each waiting task or job waits for, until when, and the command that releases
    it (:func:`relay_engine.store.read_model.waits.read_waits`), by subject: ``task J/T``, ``job J``."""
    quota: tuple[QuotaView, ...] = ()
    """Each account's quota windows: how full, against its ``stop_at``, and when it resets."""

    def task_wait(self, key: str | None) -> Wait | None:
        return self.waits.get(f"task {key}") if key else None

    def job_wait(self, job_id: str | None) -> Wait | None:
        return self.waits.get(f"job {job_id}") if job_id else None

    def waits_of_job(self, job_id: str) -> list[Wait]:
        """The job's own wait, then its tasks' (in the engine's order)."""
        own = self.job_wait(job_id)
        tasks = [w for s, w in self.waits.items() if s.startswith(f"task {job_id}/")]
        return ([own] if own else []) + tasks

    def asks_of(self, task_key: str | None) -> list[AskView]:
        return [a for a in self.asks if a.task_key == task_key] if task_key else []

    def ask(self, ask_id: int | None) -> AskView | None:
        return next((a for a in self.asks if a.id == ask_id), None)

    def run_alive(self, run: ExecutionView) -> bool:
        """Whether the run's engine still answers (a run whose engine is gone is not)."""
        progress = self.progress.get(run.id)
        return progress is None or progress.engine_gone_at is None

    def provider(self, name: str | None) -> ProviderView | None:
        return next((p for p in self.providers if p.provider == name), None)

    def job(self, job_id: str | None) -> JobView | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def run(self, execution_id: str | None) -> ExecutionView | None:
        return next((r for r in self.runs if r.id == execution_id), None)

    def agent_row(self, agent_id: str | None) -> AgentRow | None:
        return next((a for a in self.agent_rows if a.id == agent_id), None)

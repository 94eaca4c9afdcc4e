"""The console's projection of the change feed.

The console never asks the database "what is the state of everything" on the UI thread. A
:class:`Projection` (owned by one worker thread) reads the events after the last id it saw,
reloads only the tasks those events name, plus the small tables (jobs, plans, providers,
agents, running executions), and returns an immutable :class:`Snapshot` whose
``changed_tasks`` tells the widgets which rows to patch in place.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.model import AgentRecord, Event, Execution, Job, Plan, ProviderLimit, Task
from relay_engine.store import Store

FULL_RELOAD_SECONDS = 30.0
EVENT_BATCH = 5000
EVENT_LOG_SIZE = 500


@dataclass(frozen=True)
class TaskView:
    key: str
    job_id: str
    task_id: str
    title: str
    state: str
    role: str
    workstream: str | None
    agent: str | None
    provider: str | None
    attempt: int
    max_attempts: int
    wave: int
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

    @classmethod
    def from_row(cls, row: Task) -> TaskView:
        return cls(
            key=row.key,
            job_id=row.job_id,
            task_id=row.task_id,
            title=row.title or row.task_id,
            state=str(row.state),
            role=row.role,
            workstream=row.workstream,
            agent=row.agent or row.pinned_agent,
            provider=row.provider,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            wave=row.wave,
            dependencies=tuple(row.dependencies or ()),
            blocked_by=row.blocked_by,
            waiting_on_provider=row.waiting_on_provider,
            not_before=row.not_before,
            execution_id=row.execution_id,
            error=row.error,
            result_summary=row.result_summary,
            started_at=row.started_at,
            finished_at=row.finished_at,
            created_at=row.created_at,
        )


@dataclass(frozen=True)
class JobView:
    id: str
    title: str
    state: str
    mode: str
    wave_gate: str
    approved_wave: int
    priority: str
    created_at: float


@dataclass(frozen=True)
class PlanView:
    id: int
    job_id: str
    round: int
    trigger: str
    guidance: str | None
    status: str
    objective_status: str | None
    assessment: str | None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ProviderView:
    provider: str
    status: str
    reset_at: float | None
    source_text: str | None
    parked: int
    running: int


@dataclass(frozen=True)
class AgentView:
    id: str
    provider: str
    roles: tuple[str, ...]
    enabled: bool


@dataclass(frozen=True)
class EventView:
    id: int
    at: float
    kind: str
    level: str
    message: str
    job_id: str | None
    task_key: str | None


@dataclass(frozen=True)
class WaveView:
    job_id: str
    wave: int
    total: int
    done: int
    failed: int
    running: int
    awaiting_approval: bool


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

    def provider(self, name: str | None) -> ProviderView | None:
        return next((p for p in self.providers if p.provider == name), None)


def _event_view(row: Event) -> EventView:
    return EventView(
        id=row.id or 0,
        at=row.at,
        kind=row.kind,
        level=row.level,
        message=row.message,
        job_id=row.job_id,
        task_key=row.task_key,
    )


class Projection:
    """Incrementally mirrors the database; one instance per reader thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.last_event_id = 0
        self._tasks: dict[str, TaskView] = {}
        self._loaded_once = False
        self._last_full = 0.0

    def load(self) -> Snapshot:
        events = self._read_events()
        with self.store.read() as session:
            full = not self._loaded_once or time.monotonic() - self._last_full > FULL_RELOAD_SECONDS
            old_keys = set(self._tasks) if full else None
            before = self._reload_all(session) if full else self._reload_named(session, events)
            changed = frozenset(k for k, v in before.items() if v != self._tasks.get(k))
            if full:
                changed |= frozenset(k for k in self._tasks if k not in before)
            structure = (old_keys is not None and old_keys != set(self._tasks)) or any(
                (k in self._tasks) != (v is not None) for k, v in before.items()
            )
            jobs = tuple(_jobs(session))
            plans = tuple(_plans(session))
            runs = tuple(_runs(session))
            limits = list(session.exec(select(ProviderLimit)))
            agents = tuple(_agents(session))
        first = not self._loaded_once
        self._loaded_once = True
        tasks = MappingProxyType(dict(self._tasks))
        return Snapshot(
            tasks=tasks,
            jobs=jobs,
            plans=plans,
            waves=tuple(wave_views(jobs, tasks.values())),
            runs=runs,
            providers=tuple(provider_views(limits, agents, runs, tasks.values())),
            agents=agents,
            new_events=tuple(_event_view(e) for e in events),
            changed_tasks=changed,
            structure_changed=structure or first,
            first=first,
            last_event_id=self.last_event_id,
            previous_states={
                k: v.state for k, v in before.items() if v is not None and k in changed
            },
            job_progress=job_progress(tasks.values()),
            state_counts=Counter(t.state for t in tasks.values()),
        )

    def _read_events(self) -> list[Event]:
        events: list[Event] = []
        while True:
            batch = self.store.events_after(self.last_event_id, EVENT_BATCH)
            events.extend(batch)
            if batch:
                self.last_event_id = batch[-1].id or self.last_event_id
            if len(batch) < EVENT_BATCH:
                break
        if not self._loaded_once:
            return events[-EVENT_LOG_SIZE:]
        return events

    def _reload_all(self, session: Session) -> dict[str, TaskView | None]:
        """Reload every task; returns the previous views (all of them)."""
        before: dict[str, TaskView | None] = dict(self._tasks)
        self._tasks = {row.key: TaskView.from_row(row) for row in session.exec(select(Task))}
        self._last_full = time.monotonic()
        return before

    def _reload_named(
        self, session: Session, events: Iterable[Event]
    ) -> dict[str, TaskView | None]:
        """Reload the tasks the events name; returns their previous views (None: was absent)."""
        keys: set[str] = set()
        job_ids: set[str] = set()
        for event in events:
            if event.task_key:
                keys.add(event.task_key)
            elif event.job_id:
                job_ids.add(event.job_id)
        before: dict[str, TaskView | None] = {}
        if job_ids:
            for key in [k for k, t in self._tasks.items() if t.job_id in job_ids]:
                before[key] = self._tasks.pop(key)
            rows = session.exec(select(Task).where(col(Task.job_id).in_(job_ids)))
            for row in rows:
                before.setdefault(row.key, None)
                self._tasks[row.key] = TaskView.from_row(row)
        keys -= set(before)
        for chunk in _chunks(sorted(keys), 500):
            found = {r.key: r for r in session.exec(select(Task).where(col(Task.key).in_(chunk)))}
            for key in chunk:
                before[key] = self._tasks.get(key)
                row = found.get(key)
                if row is None:
                    self._tasks.pop(key, None)
                else:
                    self._tasks[key] = TaskView.from_row(row)
        return before


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _jobs(session: Session) -> Iterable[JobView]:
    for row in session.exec(select(Job).order_by(col(Job.created_at), col(Job.id))):
        yield JobView(
            id=row.id,
            title=row.title or row.id,
            state=str(row.state),
            mode=row.mode,
            wave_gate=row.wave_gate,
            approved_wave=row.approved_wave,
            priority=row.priority,
            created_at=row.created_at,
        )


def _plans(session: Session) -> Iterable[PlanView]:
    for row in session.exec(select(Plan).order_by(col(Plan.job_id), col(Plan.round))):
        yield PlanView(
            id=row.id or 0,
            job_id=row.job_id,
            round=row.round,
            trigger=row.trigger,
            guidance=row.guidance,
            status=str(row.status),
            objective_status=row.objective_status,
            assessment=row.assessment,
        )


def _runs(session: Session) -> Iterable[RunView]:
    query = select(Execution).where(col(Execution.ended_at).is_(None))
    for row in session.exec(query.order_by(col(Execution.started_at), col(Execution.id))):
        yield RunView(
            execution_id=row.id,
            task_key=row.task_key,
            job_id=row.job_id,
            plan_id=row.plan_id,
            agent=row.agent,
            provider=row.provider,
            attempt=row.attempt,
            started_at=row.started_at,
            last_output=row.last_output,
            artifact_dir=row.artifact_dir,
        )


def _agents(session: Session) -> Iterable[AgentView]:
    for row in session.exec(select(AgentRecord).order_by(col(AgentRecord.id))):
        yield AgentView(row.id, row.provider, tuple(row.roles or ()), row.enabled)


def job_progress(tasks: Iterable[TaskView]) -> dict[str, tuple[int, int]]:
    done: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for task in tasks:
        total[task.job_id] += 1
        if task.state == "SUCCEEDED":
            done[task.job_id] += 1
    return {job: (done[job], count) for job, count in total.items()}


def provider_views(
    limits: Iterable[ProviderLimit],
    agents: Iterable[AgentView],
    runs: Iterable[RunView],
    tasks: Iterable[TaskView],
) -> Iterable[ProviderView]:
    by_name = {limit.provider: limit for limit in limits}
    running = Counter(run.provider for run in runs if run.provider)
    parked = Counter(t.waiting_on_provider for t in tasks if t.state == "PARKED")
    names = set(by_name) | {a.provider for a in agents} | set(running)
    names |= {name for name in parked if name}
    for name in sorted(n for n in names if n):
        limit = by_name.get(name)
        yield ProviderView(
            provider=name,
            status=limit.status if limit else "ok",
            reset_at=limit.reset_at if limit else None,
            source_text=limit.source_text if limit else None,
            parked=parked.get(name, 0),
            running=running.get(name, 0),
        )


def wave_views(jobs: Iterable[JobView], tasks: Iterable[TaskView]) -> Iterable[WaveView]:
    """Per-wave progress, and whether an operator gate holds the next wave back."""
    stats: dict[tuple[str, int], Counter[str]] = {}
    for task in tasks:
        stats.setdefault((task.job_id, task.wave), Counter())[task.state] += 1
    for job in jobs:
        waves = sorted(w for (j, w) in stats if j == job.id)
        previous_done = True
        for wave in waves:
            counts = stats[(job.id, wave)]
            total = sum(counts.values())
            awaiting = (
                job.wave_gate == "operator"
                and job.state == "ACTIVE"
                and wave > 1
                and wave > job.approved_wave
                and previous_done
                and counts["DRAFT"] == total
            )
            yield WaveView(
                job.id,
                wave,
                total,
                counts["SUCCEEDED"],
                counts["FAILED"],
                counts["RUNNING"],
                awaiting,
            )
            previous_done = previous_done and counts["SUCCEEDED"] == total


def task_detail(store: Store, key: str, event_limit: int = 200) -> dict[str, Any]:
    """Everything the detail screen shows about one task (read in a worker)."""
    with store.read() as session:
        task = session.get(Task, key)
        if task is None:
            return {"task": None, "executions": [], "events": []}
        executions = list(
            session.exec(
                select(Execution)
                .where(col(Execution.task_key) == key)
                .order_by(col(Execution.started_at).desc(), col(Execution.id).desc())
                .limit(8)
            )
        )
        events = list(
            session.exec(
                select(Event)
                .where(col(Event.task_key) == key)
                .order_by(col(Event.id).desc())
                .limit(event_limit)
            )
        )
        return {
            "task": task,
            "executions": executions,
            "events": [_event_view(e) for e in reversed(events)],
        }

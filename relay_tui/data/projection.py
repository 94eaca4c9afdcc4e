"""The console's projection of the change feed.

The console never asks the database "what is the state of everything" on the UI thread. A
:class:`Projection` (owned by one reader thread) reads the events after the last id it saw,
reloads only the tasks those events name, plus the small tables (jobs, plans, providers,
agents, running executions, engines, waiting commands), and returns an immutable
:class:`~relay_tui.data.snapshot.Snapshot` whose ``changed_tasks`` tells the widgets which rows to
patch in place.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from sqlmodel import Session, col, func, select

from relay_engine.contracts.config import RelayConfig
from relay_engine.contracts.pricing import DEFAULT_PRICES
from relay_engine.core.budgets import local_midnight
from relay_engine.core.states import DONE_TASK_STATES, JobState, TaskState
from relay_engine.core.waits import Wait
from relay_engine.store import feed
from relay_engine.store.db import Store, column_rows, select_columns
from relay_engine.store.engines import RECENT_SECONDS, why_gone
from relay_engine.store.read_model.agents import AgentRow, agent_rows
from relay_engine.store.read_model.asks import read_asks
from relay_engine.store.read_model.executions import ExecutionView, read_executions
from relay_engine.store.read_model.jobs import JobView, read_jobs
from relay_engine.store.read_model.plans import read_plans
from relay_engine.store.read_model.providers import read_quota
from relay_engine.store.read_model.spend import NO_SPEND, SpendView, spend_by, spend_since
from relay_engine.store.read_model.tasks import TASK_COLUMNS, TaskView
from relay_engine.store.read_model.waits import read_waits
from relay_engine.store.schema import (
    Command,
    EngineRecord,
    Event,
    Execution,
    ProviderLimit,
    Task,
)
from relay_engine.store.task_rows import STORY_TIMEOUTS_S
from relay_tui.data.progress import ProgressReader, RunProgress
from relay_tui.data.snapshot import (
    CommandView,
    EventView,
    FleetHealth,
    ProviderView,
    Snapshot,
    WaveView,
)

FULL_RELOAD_SECONDS = 30.0
SPEND_SECONDS = 1.0
"""A busy job's spend is summed again at most this often (each sum reads its executions)."""
TODAY_SECONDS = 5.0
WAITS_SECONDS = 1.0
"""Waits are read again at most this often while events come in (and on every full reload)."""
GATE_HELD = "assessment failed"
"""How a wait says that its wave gate is held shut (:func:`relay_engine.core.waits.task_wait`)."""
EVENT_BATCH = 5000
EVENT_LOG_SIZE = 500


def event_view(row: Event) -> EventView:
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

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: float = 90.0,
        clock: Callable[[], float] = time.time,
        config: RelayConfig | None = None,
    ) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.config = config
        """Agents and daily budgets as relay.toml says (the app replaces it on a reload)."""
        self._job_spend: dict[str, SpendView] = {}
        self._task_spend: dict[str, SpendView] = {}
        self._spend_due: set[str] = set()
        self._spend_read = 0.0
        self._feed_mark = feed.START
        self._tasks: dict[str, TaskView] = {}
        self._loaded_once = False
        self._last_full = 0.0
        self._watched: set[int] = set()
        self._watch_lock = threading.Lock()
        self._progress = ProgressReader(config.prices if config else DEFAULT_PRICES)
        self._today = NO_SPEND
        self._today_read = -TODAY_SECONDS
        self._waits: dict[str, Wait] = {}
        self._waits_due = True
        self._waits_read = -WAITS_SECONDS

    def watch_command(self, command_id: int) -> None:
        """Report this command's outcome in the snapshot after some engine applied it."""
        with self._watch_lock:
            self._watched.add(command_id)

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
            self._read_spend(session, events, changed, full)
            jobs = tuple(self._jobs(session))
            plans = tuple(read_plans(session))
            runs = tuple(read_executions(session, running=True))
            progress = self._run_progress(session, runs)
            asks = tuple(read_asks(session))
            today = self._spend_today(session)
            limits = list(session.exec(select(ProviderLimit)))
            agents = tuple(agent_rows(session, self.clock()))
            rows = self._agent_rows(session, listed=bool(agents))
            fleet = self._fleet(session)
            outcomes = self._outcomes(session)
            waits = self._read_waits(session, bool(events) or full)
            quota = tuple(read_quota(session, self.config, self.clock()))
        first = not self._loaded_once
        self._loaded_once = True
        tasks = MappingProxyType(dict(self._tasks))
        providers = tuple(provider_views(limits, agents, runs, tasks.values()))
        return Snapshot(
            tasks=tasks,
            jobs=jobs,
            plans=plans,
            waves=tuple(wave_views(jobs, tasks.values(), waits)),
            runs=runs,
            providers=providers,
            agents=agents,
            new_events=tuple(event_view(e) for e in events),
            changed_tasks=changed,
            structure_changed=structure or first,
            first=first,
            previous_states={
                k: v.state for k, v in before.items() if v is not None and k in changed
            },
            job_progress=job_progress(tasks.values()),
            state_counts=Counter(t.shown_state for t in tasks.values()),
            stuck_reasons=stuck_reasons(tasks.values(), providers, rows),
            fleet=fleet,
            command_outcomes=outcomes,
            agent_rows=rows,
            task_spend=MappingProxyType(dict(self._task_spend)),
            progress=MappingProxyType(progress),
            asks=asks,
            spend_today=today,
            waits=waits,
            quota=quota,
        )

    def _read_waits(self, session: Session, due: bool) -> MappingProxyType[str, Wait]:
        """What waits, by subject: read again when events came in, at most once a
        :data:`WAITS_SECONDS` (a burst of events is read once, after it)."""
        self._waits_due = self._waits_due or due
        if self._waits_due and time.monotonic() - self._waits_read >= WAITS_SECONDS:
            found = read_waits(session, now=self.clock(), lease_seconds=self.lease_seconds)
            self._waits = {wait.subject: wait for wait in found}
            self._waits_due = False
            self._waits_read = time.monotonic()
        return MappingProxyType(dict(self._waits))

    def _read_spend(
        self, session: Session, events: Iterable[Event], changed: Iterable[str], full: bool
    ) -> None:
        """Spend of the tasks that changed, and of the jobs events named (at most once a
        :data:`SPEND_SECONDS` for a busy job)."""
        if full:
            self._task_spend = spend_by(session, Execution.task_key)
            self._job_spend = spend_by(session, Execution.job_id)
            self._spend_due.clear()
            self._spend_read = time.monotonic()
            return
        keys = list(changed)
        if keys:
            fresh = spend_by(session, Execution.task_key, keys)
            for key in keys:
                self._task_spend.pop(key, None)
            self._task_spend.update(fresh)
        self._spend_due |= {e.job_id for e in events if e.job_id}
        if self._spend_due and time.monotonic() - self._spend_read >= SPEND_SECONDS:
            due, self._spend_due = self._spend_due, set()
            for job_id in due:
                self._job_spend.pop(job_id, None)
            self._job_spend.update(spend_by(session, Execution.job_id, due))
            self._spend_read = time.monotonic()

    def _run_progress(
        self, session: Session, runs: Sequence[ExecutionView]
    ) -> dict[str, RunProgress]:
        """What each running agent is doing, its timeout, and whether its engine is gone."""
        found = self._progress.read(runs)
        engines = {run.engine_id for run in runs if run.engine_id}
        records = (
            {
                r.id: r
                for r in session.exec(select(EngineRecord).where(col(EngineRecord.id).in_(engines)))
            }
            if engines
            else {}
        )
        now = self.clock()
        for run in runs:
            task = self._tasks.get(run.task_key or "")
            timeout = (task.timeout_s or STORY_TIMEOUTS_S.get(task.story_size)) if task else None
            record = records.get(run.engine_id)
            gone = record is not None and why_gone(
                record, now=now, lease_seconds=self.lease_seconds
            )
            last_seen = (record.stopped_at or record.heartbeat_at) if gone and record else None
            found[run.id] = replace(found[run.id], timeout_s=timeout, engine_gone_at=last_seen)
        return found

    def _spend_today(self, session: Session) -> SpendView:
        """Spend since local midnight, summed again at most every few seconds."""
        if time.monotonic() - self._today_read >= TODAY_SECONDS:
            self._today = spend_since(session, local_midnight(self.clock()))
            self._today_read = time.monotonic()
        return self._today

    def _jobs(self, session: Session) -> list[JobView]:
        warn_at = self.config.engine.budget_warn_at if self.config else 0.8
        return read_jobs(session, spend=self._job_spend, warn_at=warn_at)

    def _agent_rows(self, session: Session, *, listed: bool) -> tuple[AgentRow, ...]:
        """Agents as the engines mirrored them (``listed``), else as relay.toml says; with
        relay.toml's daily budgets when this console has it."""
        config = self.config
        agents = None if listed or config is None else config.agents
        return tuple(agent_rows(session, self.clock(), agents, config=config))

    def _fleet(self, session: Session) -> FleetHealth:
        now = self.clock()
        alive = session.execute(
            select_columns(
                func.count(),
                func.max(EngineRecord.heartbeat_at),
                func.sum(EngineRecord.slots),
                func.min(EngineRecord.slots),
                func.count(col(EngineRecord.asleep_since)),  # counts the ones set
            ).where(
                col(EngineRecord.stopped_at).is_(None),
                col(EngineRecord.heartbeat_at) >= now - self.lease_seconds,
            )
        ).one()
        gone = session.exec(
            select(func.count()).where(
                col(EngineRecord.stopped_at).is_(None),
                col(EngineRecord.heartbeat_at) < now - self.lease_seconds,
                col(EngineRecord.heartbeat_at) >= now - RECENT_SECONDS,
            )
        ).one()
        waiting = session.exec(select(func.count()).where(col(Command.applied_at).is_(None))).one()
        count, newest, slots, fewest, asleep = alive
        age = max(0.0, now - newest) if newest is not None else None
        return FleetHealth(
            engines_alive=int(count),
            engines_asleep=int(asleep),
            engines_gone=int(gone),
            heartbeat_age=age,
            commands_waiting=int(waiting),
            slots=int(slots) if count and fewest else None,  # 0: an engine did not say
        )

    def _outcomes(self, session: Session) -> tuple[CommandView, ...]:
        with self._watch_lock:
            watched = sorted(self._watched)
        if not watched:
            return ()
        rows = session.exec(
            select(Command).where(
                col(Command.id).in_(watched), col(Command.applied_at).is_not(None)
            )
        )
        found = tuple(
            CommandView(
                id=row.id or 0,
                kind=row.kind,
                payload=dict(row.payload or {}),
                applied=True,
                succeeded=row.succeeded,
                outcome=row.outcome,
            )
            for row in rows
        )
        with self._watch_lock:
            self._watched.difference_update(c.id for c in found)
        return found

    def _read_events(self) -> list[Event]:
        """The feed since the last look; on the first, only what the event log shows."""
        if not self._loaded_once:
            with self.store.read() as session:
                last, self._feed_mark = feed.read_last(session, EVENT_LOG_SIZE, time.time())
            return last
        events: list[Event] = []
        while True:
            batch, self._feed_mark = self.store.events_after(self._feed_mark, EVENT_BATCH)
            events.extend(batch)
            if len(batch) < EVENT_BATCH:
                return events

    def _reload_all(self, session: Session) -> dict[str, TaskView | None]:
        """Reload every task; returns the previous views (all of them)."""
        before: dict[str, TaskView | None] = dict(self._tasks)
        rows = column_rows(session, select_columns(*TASK_COLUMNS))
        self._tasks = {row.key: TaskView.from_row(row) for row in rows}
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
            query = select_columns(*TASK_COLUMNS).where(col(Task.job_id).in_(job_ids))
            rows = column_rows(session, query)
            for row in rows:
                before.setdefault(row.key, None)
                self._tasks[row.key] = TaskView.from_row(row)
        keys -= set(before)
        for chunk in _chunks(sorted(keys), 500):
            query = select_columns(*TASK_COLUMNS).where(col(Task.key).in_(chunk))
            found = {r.key: r for r in column_rows(session, query)}
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


def stuck_reasons(
    tasks: Iterable[TaskView], providers: Iterable[ProviderView], agents: Iterable[AgentRow]
) -> dict[str, str]:
    """The most common reason per stuck state (``claude limit``, ``budget``, a failed task),
    for the header; counted here, off the UI thread, which would walk every task per
    snapshot (5,000 tasks: 8 ms of a frame)."""
    named, known = {p.provider for p in providers}, {a.id for a in agents}
    found: dict[str, Counter[str]] = {"BLOCKED": Counter(), "PARKED": Counter(), "HELD": Counter()}
    for task in tasks:
        state = task.shown_state
        if state == "BLOCKED":
            found[state][f"{task.blocked_by} failed" if task.blocked_by else "a failure"] += 1
        elif state == TaskState.PARKED:
            found[state][park_reason(task.waiting_on_provider, named, known)] += 1
        elif state == TaskState.HELD:
            found[state][f"by {task.held_by or 'an operator'}"] += 1
    return {state: counter.most_common(1)[0][0] for state, counter in found.items() if counter}


def park_reason(waiting_on: str | None, providers: set[str], agents: set[str]) -> str:
    if waiting_on == "budget":
        return "budget"
    if waiting_on in providers:
        return f"{waiting_on} limit"
    if waiting_on and waiting_on in agents:
        return f"agent {waiting_on}"
    return waiting_on or "a provider"


def job_progress(tasks: Iterable[TaskView]) -> dict[str, tuple[int, int]]:
    done: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for task in tasks:
        total[task.job_id] += 1
        if task.state in DONE_TASK_STATES:  # a dropped task counts as done, empty
            done[task.job_id] += 1
    return {job: (done[job], count) for job, count in total.items()}


def provider_views(
    limits: Iterable[ProviderLimit],
    agents: Iterable[AgentRow],
    runs: Iterable[ExecutionView],
    tasks: Iterable[TaskView],
) -> Iterable[ProviderView]:
    by_name = {limit.provider: limit for limit in limits}
    running = Counter(run.provider for run in runs if run.provider)
    parked = Counter(t.waiting_on_provider for t in tasks if t.state == TaskState.PARKED)
    names = set(by_name) | {a.provider for a in agents} | set(running)
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


def wave_views(
    jobs: Iterable[JobView], tasks: Iterable[TaskView], waits: Mapping[str, Wait] | None = None
) -> Iterable[WaveView]:
    """Per-wave progress, whether an operator gate holds the next wave back, and whether a
    failed assessment holds it shut (its tasks' waits say so)."""
    stats: dict[tuple[str, int], Counter[str]] = {}
    held: set[tuple[str, int]] = set()
    for task in tasks:
        stats.setdefault((task.job_id, task.wave), Counter())[task.state] += 1
        wait = waits.get(f"task {task.key}") if waits else None
        if wait is not None and GATE_HELD in wait.what:
            held.add((task.job_id, task.wave))
    for job in jobs:
        waves = sorted(w for (j, w) in stats if j == job.id)
        previous_done = True
        for wave in waves:
            counts = stats[(job.id, wave)]
            total = sum(counts.values())
            awaiting = (
                job.wave_gate == "operator"
                and job.state == JobState.ACTIVE
                and wave > 1
                and wave > job.approved_wave
                and previous_done
                and counts[TaskState.DRAFT] == total
            )
            yield WaveView(
                job.id,
                wave,
                total,
                counts[TaskState.SUCCEEDED],
                counts[TaskState.FAILED],
                counts[TaskState.RUNNING],
                awaiting,
                counts[TaskState.CANCELLED],
                counts[TaskState.DROPPED],
                (job.id, wave) in held,
            )
            previous_done = previous_done and sum(counts[s] for s in DONE_TASK_STATES) == total

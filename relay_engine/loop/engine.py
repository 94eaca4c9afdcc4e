"""The engine: a reconcile loop over durable state.

Each tick reads the state, decides with the pure modules (scheduler, selection,
recovery, outcomes) and applies the decisions in short transactions, starting and
stopping agent processes in between. The loop runs in one thread; agent processes
never block it (their output goes straight to artifact files, parsed incrementally),
and each process exit wakes the loop at once.

The tick's steps live with their state: :class:`~relay_engine.loop.starter.Starter` claims and
spawns, :class:`~relay_engine.loop.reaper.Reaper` reads output and records exits,
:class:`~relay_engine.loop.rounds.PlannerRounds` drives planned jobs. They share an
:class:`~relay_engine.loop.runtime.EngineRuntime` (store, config, live processes), never the engine
itself; this module owns the loop, the configuration, heartbeats and recovery.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import watchfiles
from sqlalchemy import or_
from sqlmodel import Session, col, select, update

from relay_engine.contracts.config import CONFIG_FILE, ConfigError, RelayConfig, load_config
from relay_engine.core.outcomes import StopReason
from relay_engine.core.states import (
    JobState,
    TaskState,
)
from relay_engine.core.turns import Place, takes_turn
from relay_engine.git.worktrees import Worktrees
from relay_engine.loop.health import DISK_FULL, Health, classify
from relay_engine.loop.live import LiveExecution
from relay_engine.loop.notify import Notifier
from relay_engine.loop.outlook import anything_to_do, read_outlook
from relay_engine.loop.pullstep import PullRequests
from relay_engine.loop.readiness import finish_jobs, promote_ready, resume_parked
from relay_engine.loop.reaper import Reaper
from relay_engine.loop.reclaim import recover_tasks
from relay_engine.loop.rounds import PlannerRounds
from relay_engine.loop.runtime import EXITS_LAND_TOGETHER_S, EngineRuntime
from relay_engine.loop.starter import Starter
from relay_engine.ops import assignments, commands
from relay_engine.ops.schedules import start_due_runs
from relay_engine.ops.upstream import release_waiting_jobs, unblock_revived
from relay_engine.store import feed
from relay_engine.store.db import Store
from relay_engine.store.engines import live_engine_ids, mark_stopped, register_engine, this_host
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.feed import FeedMark
from relay_engine.store.plan_rows import gated_keys
from relay_engine.store.read_model.waits import read_waits
from relay_engine.store.schema import (
    EngineRecord,
    Event,
    Job,
    Plan,
    Task,
)
from relay_engine.store.wakes import OFF, WakeListener

log = logging.getLogger(__name__)
TICKS_KEPT = 10_000
IdleWaits = Literal["none", "timed", "all"]
SETTLING_KINDS = (
    EventKind.TASK_CANCELLED, EventKind.TASK_HANDED_BACK, EventKind.TASK_SUCCEEDED,
    EventKind.TASK_FAILED,
)  # fmt: skip
"""Task events after which a job may be done, whoever recorded them."""
WIND_DOWN_TICKS = 3
"""Full ticks a run until idle may take back to back once no agent runs: enough to write
the last exits, settle their jobs and see that nothing is left, without the tick
interval's wait before each (a second in all at the default interval); bounded so that
work which keeps changing without an agent (starts that fail at once) cannot spin."""
CONFIG_SETTLE_NS = 1_000_000_000
"""How recently relay.toml may have been written for a parse error to mean "still being
saved" rather than "invalid"."""


class Engine:
    """One engine process (or thread) working a workspace's database."""

    def __init__(
        self,
        workspace: Path,
        *,
        store: Store | None = None,
        config: RelayConfig | None = None,
        role: str = "run",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.workspace = workspace.resolve()
        self.store = store or Store.for_workspace(self.workspace)
        self.role = role
        self.clock = clock
        self.id = f"{role}-{uuid.uuid4().hex[:10]}"
        self.host = this_host()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._release_on_stop = True
        self._stopped = threading.Event()
        self._subscribers: list[Callable[[], None]] = []
        self._registered = False
        self._joined = False
        self._last_heartbeat = 0.0
        self._last_db_ok = clock()
        self.runtime = EngineRuntime(
            engine_id=self.id,
            host=self.host,
            workspace=self.workspace,
            store=self.store,
            config=config or load_config(self.workspace),
            wake=self.wake,
            worktrees=Worktrees(self.workspace),
            clock=clock,
        )
        self.starter = Starter(self.runtime)
        self.rounds = PlannerRounds(self.runtime, spawn=self.starter.spawn)
        self.reaper = Reaper(self.runtime, plans=self.rounds)
        self.notifier = Notifier(self.store, lambda: self.runtime.config.notifications)
        self.pulls = PullRequests(self.runtime)
        self.health = Health(self.runtime)
        self._config_changed = threading.Event()
        self._config_seen = self._config_stamp()
        self._command_waiting = threading.Event()
        self._last_full_tick = 0.0
        self._events_seen = feed.START
        self._quiet = False  # this engine's last look found the fleet with nothing to do now
        self._next_look: float | None = None  # when a quiet fleet's first timed wait ends
        self._looks_asked = 0  # wake-ups heard: a look that began before the last is stale
        self._asleep_since: float | None = None  # what this engine's row says of its sleep
        self._wakeups: WakeListener | None = None
        self.did_chores = False  # whether the last tick did the fleet's housekeeping
        self.ticks: deque[tuple[float, float]] = deque(maxlen=TICKS_KEPT)  # (ended at, ms)

    @property
    def config(self) -> RelayConfig:
        return self.runtime.config

    @property
    def live(self) -> dict[str, LiveExecution]:
        return self.runtime.live

    @property
    def condition(self) -> str | None:
        """What holds this engine up ("disk full", "database busy", …), None when nothing."""
        return self.runtime.condition

    # -- public API ------------------------------------------------------------------
    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)

    def wake(self, *_: object) -> None:
        self._wake.set()

    @property
    def hears_wake_ups(self) -> bool:
        """Whether a submit or command written anywhere now wakes this engine at once."""
        return self._wakeups is not None and self._wakeups.up

    def live_count(self) -> int:
        return len(self.live)

    def submit(self, command: commands.OperatorCommand) -> int:
        """Store an operator command and have this engine apply it on its next tick."""
        command_id = commands.enqueue(self.store, command, now=self.clock())
        self._look_now()
        return command_id

    def _look_now(self) -> None:
        """Something was written that may be work (a command, a submit, here or in another
        process): a full tick now, and the tick interval again until a look finds none."""
        self._looks_asked += 1
        self._quiet = False
        self._command_waiting.set()
        self.wake()

    def stop(self, *, release: bool = True, timeout: float = 15.0) -> None:
        """End the loop; with ``release`` live agents stop and their tasks return to QUEUED."""
        self._release_on_stop = release
        self._stop.set()
        self.wake()
        self._stopped.wait(timeout)

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_idle: bool = False,
        waits: IdleWaits = "timed",
    ) -> bool:
        """Run ticks until stopped (or idle); True when every job it saw succeeded.

        ``waits`` says what still counts as work when running until idle: ``"timed"`` (waits
        that end by themselves: a limit's reset, an agent's next probe), ``"none"`` (exit as
        soon as only waits are left), or ``"all"`` (also waits on the operator)."""
        self._stopped.clear()
        winding = 0  # full ticks taken back to back since the last agent ended
        try:
            while not self._stop.is_set() and not (stop and stop.is_set()):
                full = winding > 0 or self._full_tick_due()
                before = self._feed_end() if until_idle and full else None  # only chores end a run
                changed = self._safe_tick(full=full)
                if until_idle and self.did_chores and not changed and self.is_idle(waits, before):
                    self._settle_all_jobs()
                    break
                winding = winding + 1 if until_idle and changed and self._winds_down(winding) else 0
                if winding:
                    continue
                if self._wake.wait(self._sleep_seconds()) and self.live:
                    self._gather_exits()
                self._wake.clear()
        finally:
            self._stop.set()
            self.shutdown(release=self._release_on_stop)
            self._stopped.set()
        return self.all_jobs_succeeded()

    def _winds_down(self, winding: int) -> bool:
        """Whether a run until idle takes its next full tick now: no agent runs, so nothing
        is left to wait for but the tick interval, and the database answered (a tick that
        failed is retried at the interval, not at once)."""
        return winding < WIND_DOWN_TICKS and not self.live and self.condition is None

    @property
    def _dozing(self) -> bool:
        """Whether this engine sleeps between heartbeats. Woken, it does the fleet's
        housekeeping whether or not the tick slot is its turn: engines asleep wake at their
        own heartbeats, or together when a timed wait ends, in a slot that may be none of
        theirs (a place gone stale)."""
        return self._quiet and self.hears_wake_ups

    @property
    def _sleeps(self) -> bool:
        """Whether the loop waits past the tick interval: dozing, with no agent of its own
        to watch and nothing holding it up."""
        return self._dozing and not self.live and self.condition is None

    def _sleep_seconds(self) -> float:
        """How long the loop waits for a wake before its next full tick: the tick interval,
        or, while the fleet has nothing to do now and this engine hears every wake-up (a
        submit or a command from anywhere ends the wait), until its next heartbeat or the
        end of the fleet's first timed wait (:mod:`~relay_engine.loop.outlook`), whichever
        comes first. An idle fleet's engines used to read the database every tick for
        nothing."""
        settings = self.config.engine
        if not self._sleeps:
            return settings.tick_seconds
        now = self.clock()
        due = min(
            self._last_heartbeat + settings.heartbeat_seconds - now, settings.heartbeat_seconds
        )
        if self._next_look is not None:
            due = min(due, self._next_look - now)
        return max(settings.tick_seconds, due)

    def _gather_exits(self) -> None:
        """Woken with agents still running: let the exits landing together arrive, and wait
        a little longer for one expected to land next (:mod:`~relay_engine.core.landing`),
        so their ticks, claims and exit writes are one; its exit ends the wait."""
        self._stop.wait(EXITS_LAND_TOGETHER_S)
        self._wake.clear()
        longer = self.runtime.gather_seconds() - EXITS_LAND_TOGETHER_S
        if longer > 0 and not self._stop.is_set():  # a stop's wake was just cleared
            self._wake.wait(longer)

    def register(self) -> None:
        """Join the registry, mirror the agents, settle jobs; each step once, so a start
        interrupted by a busy database resumes where it stopped on the next tick."""
        if not self._registered:
            register_engine(self.store, self.id, role=self.role, now=self.clock())
            self._registered = True
            if self.config.engine.wake_ups:
                self._wakeups = WakeListener(self.store.wakes, self._look_now, self._stop)
            self._watch_files(self._wakeups.start() if self._wakeups else None)
            self.notifier.start()
        if not self._joined:
            self._events_seen = self._feed_end()
            self._sync_agents()
            self._settle_all_jobs()
            self._joined = True

    def _watch_files(self, wake_folder: Path | None) -> None:
        """Reload relay.toml on the next tick after it changes, and on SQLite hear wake-ups
        in ``wake_folder``: one watchfiles thread for both."""
        config = self.workspace / CONFIG_FILE
        paths = [self.workspace, *([wake_folder] if wake_folder else [])]

        def watch() -> None:
            try:
                for changes in watchfiles.watch(
                    *paths, stop_event=self._stop, recursive=False, debounce=200, rust_timeout=500
                ):
                    changed = [Path(path) for _, path in changes]
                    if config in changed:  # an agent fixed or added may be what work waits on
                        self._config_changed.set()
                        self._look_now()
                    if self._wakeups is not None:
                        self._wakeups.heard(changed)
            finally:
                if self._wakeups is not None and wake_folder is not None:
                    self._wakeups.deaf()

        threading.Thread(target=watch, daemon=True, name=f"relay-files-{self.id}").start()

    def _config_stamp(self) -> tuple[int, int] | None:
        try:
            stat = (self.workspace / CONFIG_FILE).stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _maybe_reload_config(self, now: float) -> bool:
        """Reload when relay.toml changed: watchfiles wakes us, the file's stamp decides."""
        stamp = self._config_stamp()
        if not self._config_changed.is_set() and stamp == self._config_seen:
            return False
        self._config_changed.clear()
        if stamp == self._config_seen:
            return False
        self._config_seen = stamp
        error = reload_config(self.runtime)
        if error and stamp is not None and time.time_ns() - stamp[0] < CONFIG_SETTLE_NS:
            # An editor that saves in place (truncate, then write) may be halfway through:
            # the next full tick looks again, and only a file still invalid is refused.
            self._config_seen = None
            return False
        with self.store.write() as session:
            if error:
                record_event(
                    session,
                    EventKind.CONFIG_INVALID,
                    f"relay.toml not reloaded, keeping the last good config: {error}",
                    now=now,
                    level="error",
                )
            else:
                self._mirror_agents(session, now)
                record_event(
                    session,
                    EventKind.CONFIG_RELOADED,
                    f"relay.toml reloaded: {len(self.config.agents)} agents",
                    now=now,
                )
        return True

    def _sync_agents(self) -> None:
        with self.store.write() as session:
            self._mirror_agents(session, self.clock())

    def _mirror_agents(self, session: Session, now: float) -> None:
        settings = self.config.engine
        assignments.sync_agents(
            session,
            self.config.agents,
            now,
            engine_id=self.id,
            slots=settings.max_concurrent_agents,
            lease_s=settings.lease_seconds,
        )

    def shutdown(self, *, release: bool) -> None:
        self._stop.set()  # its watcher threads end with it, whoever drove its ticks
        now = self.clock()
        for live in list(self.live.values()):
            live.stop(StopReason.RELEASED if release else StopReason.LOST, 0.0)
        deadline = time.monotonic() + self.config.engine.cancel_grace_seconds + 2
        for live in list(self.live.values()):
            live.process.terminate(self.config.engine.cancel_grace_seconds)
            live.process.wait(max(deadline - time.monotonic(), 0.1))
            if live.process.poll() is None:
                live.process.kill_now()
                live.process.wait(2)
        self.reaper.reap(now)
        self.starter.close()
        self.pulls.close()
        if self._registered:
            mark_stopped(self.store, self.id, now=now)
            self.notifier.stop()
        self._publish()

    # -- the tick --------------------------------------------------------------------
    def _safe_tick(self, *, full: bool = True) -> bool:
        """A tick; a busy or unreachable database or a full disk holds the engine up (and
        is logged once) instead of stopping it. Anything else still stops it loudly."""
        began = time.perf_counter()
        try:
            self._command_waiting.clear()
            changed = self.tick(full=full)
        except Exception as error:
            condition = classify(error)
            if condition is None:
                raise
            self.health.failed(condition, error, self.clock())
            return True
        self.ticks.append((time.time(), (time.perf_counter() - began) * 1000))
        self.health.succeeded(self._last_db_ok)
        if changed:
            self._publish()
        return changed

    def tick(self, *, full: bool = True) -> bool:
        """One reconcile pass (DESIGN §2 order). True when anything changed.

        A process exit wakes the loop for a *fast* tick (reap, settle, dispatch): the
        completion transaction already released the dependents. Full ticks, every
        ``tick_seconds`` or when a command arrives, also apply commands, heartbeat and start
        planners; the fleet's housekeeping (:meth:`_fleet_chores`) is done on this engine's
        turns (:mod:`relay_engine.core.turns`).
        """
        self.register()
        now = self.clock()
        changed = False
        self.did_chores = False
        if full:
            self._last_full_tick = now
            changed |= self._maybe_reload_config(now)
            changed |= bool(commands.apply_pending(self.store, self.id, now))
            self._heartbeat(now)
            if self._dozing or takes_turn(self.runtime.place, now, self.config.engine.tick_seconds):
                self.runtime.forget_fleet()  # what other engines recorded is read again
                changed |= self._fleet_chores(now)
            changed |= self.rounds.start_planners(now)
        changed |= self.reaper.reap(now, fence=full)
        if full:  # whether a job is done waits for the next full tick: two reads per job saved
            changed |= self._finish_jobs(now)  # on every exit's fast tick
        if (
            self.condition != DISK_FULL
            and now - self._last_db_ok < self.config.engine.lease_seconds
        ):
            changed |= self.starter.dispatch(now, fresh=full)
        self.reaper.save_output(now)
        if full:
            self._say_whether_asleep(now)
        self._last_db_ok = self.clock()  # here, not in the caller: a tick() alone counts too
        return changed

    def _fleet_chores(self, now: float) -> bool:
        """Work any engine may do for the whole fleet: lost claims, parked work, schedules,
        jobs waiting on jobs, pull requests, planned jobs, drafts, jobs settled elsewhere."""
        self.did_chores = True
        asked = self._looks_asked
        if not (self.pulls.in_flight or self._fleet_has_work()):
            self._doze(asked, next_look=None)
            return False
        changed = recover_tasks(self.runtime, now)
        changed |= resume_parked(self.store, now)
        changed |= start_due_runs(self.store, now, self.config.engine)
        changed |= release_waiting_jobs(self.store, now) | unblock_revived(self.store, now)
        changed |= self.pulls.tick(now)
        changed |= self.rounds.tick(now)
        changed |= promote_ready(self.store, now, self._gated())
        self._notice_settled_elsewhere()
        self._quiet = False
        if not (changed or self.live or self.pulls.in_flight) and self.hears_wake_ups:
            with self.store.read() as session:
                outlook = read_outlook(session, now, self.config.git.check_seconds)
            if not outlook.busy:  # the fleet only waits: on the operator, or on the clock
                self._doze(asked, next_look=outlook.next_at)
        return changed

    def _doze(self, asked: int, *, next_look: float | None) -> None:
        """Sleep between heartbeats (and until ``next_look``), unless a wake-up came while
        this engine looked: what woke it may be what the look missed."""
        self._quiet = asked == self._looks_asked
        self._next_look = next_look

    def _fleet_has_work(self) -> bool:
        with self.store.read() as session:
            return anything_to_do(session)

    def _full_tick_due(self) -> bool:
        due = self.clock() - self._last_full_tick >= self.config.engine.tick_seconds
        return due or self._command_waiting.is_set()

    def _gated(self) -> frozenset[str]:
        with self.store.read() as session:
            return gated_keys(session)

    def _feed_end(self) -> FeedMark:
        with self.store.read() as session:
            return feed.end(session, self.clock())

    def is_idle(self, waits: IdleWaits = "timed", quiet_since: FeedMark | None = None) -> bool:
        """Nothing runs, is queued or being planned (see :meth:`run` for ``waits``). A task
        parked with no time to wake waits on an operator (an agent to log in, a CLI to
        install): nothing this engine does will move it, so only ``"all"`` counts it.

        ``quiet_since``: the change feed's end before the tick that found nothing to do. A
        change recorded since (an operator's approval landing between the tick's promotion
        of ready drafts and this check) may have made work the tick did not see, so the
        engine is not idle until a tick has looked again. The feed is read last: a
        change landing while this check reads the tables (the approval that empties the
        waits) is then still seen as news."""
        if self.runtime.held():
            return False
        active = [TaskState.QUEUED, TaskState.RUNNING]
        with self.store.read() as session:
            query = select(Task.key).where(col(Task.state).in_(active))
            if waits == "timed":
                timed = (col(Task.state) == TaskState.PARKED) & col(Task.not_before).is_not(None)
                query = select(Task.key).where(or_(col(Task.state).in_(active), timed))
            if session.exec(query.limit(1)).first() is not None:
                return False
            if self.rounds.planning_active(session):
                return False
            lease = self.config.engine.lease_seconds
            if waits == "all" and read_waits(session, now=self.clock(), lease_seconds=lease):
                return False
        if self.pulls.busy(self.clock()):
            return False
        if quiet_since is None:
            return True
        with self.store.read() as session:
            return not feed.news_since(session, quiet_since, self.clock())

    def all_jobs_succeeded(self) -> bool:
        with self.store.read() as session:
            states = session.exec(select(Job.state)).all()
        # READY: approved and waiting for its merge (by the operator, or by the user's git).
        return all(state in ("SUCCEEDED", "MERGED", "READY") for state in states)

    def _publish(self) -> None:
        self.notifier.wake()
        for callback in list(self._subscribers):
            try:
                callback()
            except Exception:
                log.exception("subscriber failed")

    # -- heartbeat and recovery ------------------------------------------------------
    def _heartbeat(self, now: float) -> None:
        """Renew this engine's row and its executions' leases; only once that committed are
        the agents' supervisor deadlines moved on (a renewal that failed moves nothing, so
        the agents of an engine that cannot reach its database stop before their leases
        end)."""
        if 0 <= now - self._last_heartbeat < self.config.engine.heartbeat_seconds:
            return  # (a clock set back is no reason to wait the difference out)
        self._last_heartbeat = now
        lease_until = now + self.config.engine.lease_seconds
        renewed: set[str] = set()
        with self.store.write() as session:
            wake_ups = self._wakeups.said if self._wakeups is not None else OFF
            session.exec(
                update(EngineRecord)
                .where(col(EngineRecord.id) == self.id)
                .values(heartbeat_at=now, wake_ups=wake_ups)
            )
            held = list(self.runtime.held())
            for table in (Task, Plan) if held else ():
                renewal = (
                    update(table)
                    .where(col(table.execution_id).in_(held))
                    .values(lease_expires_at=lease_until)
                    .returning(col(table.execution_id))
                )
                renewed.update(session.execute(renewal).scalars())
            live = live_engine_ids(session, now, self.config.engine.lease_seconds)
        self.runtime.extend_deadlines(lease_until, renewed)
        self.runtime.place = Place.among(self.id, live)

    def _say_whether_asleep(self, now: float) -> None:
        """Record in this engine's row when it begins to sleep and when it wakes (a write
        per change, none per tick): ``relay engines`` says so, and an operator who sees it
        tick only at its heartbeats knows the fleet has nothing to do, not that it hangs."""
        asleep = self._sleeps
        if asleep == (self._asleep_since is not None):
            return
        since = now if asleep else None
        with self.store.write() as session:
            session.exec(
                update(EngineRecord)
                .where(col(EngineRecord.id) == self.id)
                .values(asleep_since=since)
            )
        self._asleep_since = since

    def _notice_settled_elsewhere(self) -> None:
        """Tasks another process finished (a cancel or a hand-back applied by the CLI, an
        engine elsewhere) may leave their job done: it is settled here too. One read of the
        feed since the last look."""
        now, seen = self.clock(), self._events_seen
        query = select(Event.id, Event.job_id, Event.kind).where(feed.beyond(seen, now))
        with self.store.read() as session:
            rows = session.exec(query).all()
        self._events_seen = feed.passed(seen, [int(i or 0) for i, _, _ in rows], now)
        settling = {job for _, job, kind in rows if job and kind in SETTLING_KINDS}
        self.runtime.dirty_jobs.update(settling)

    def _settle_all_jobs(self) -> None:
        """Settle every active job, including ones another engine finished the work of."""
        with self.store.read() as session:
            active = session.exec(select(Job.id).where(Job.state == JobState.ACTIVE)).all()
        self.runtime.dirty_jobs.update(active)
        self._finish_jobs(self.clock())

    def _finish_jobs(self, now: float) -> bool:
        dirty = set(self.runtime.dirty_jobs)
        self.runtime.dirty_jobs.clear()
        return finish_jobs(self.store, dirty, now) if dirty else False


def reload_config(runtime: EngineRuntime) -> str | None:
    """Re-read relay.toml; keep the last good config and say why when it is invalid."""
    try:
        runtime.use_config(load_config(runtime.workspace))
    except ConfigError as error:
        return str(error)
    return None

"""The engine: a reconcile loop over durable state.

Each tick reads the state, decides with the pure modules (scheduler, selection,
recovery, outcomes) and applies the decisions in short transactions, starting and
stopping agent processes in between. The loop runs in one thread; agent processes
never block it (their output goes straight to artifact files, parsed incrementally),
and each process exit wakes the loop at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import watchfiles
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select, update

from relay_engine import assignments, commands, dispatch
from relay_engine.completion import (
    LimitDecision,
    apply_outcome,
    fail_or_retry,
    fenced_task,
    finish_execution_row,
    limited_providers,
    record_limit,
)
from relay_engine.config import CONFIG_FILE, AgentConfig, ConfigError, RelayConfig, load_config
from relay_engine.context import prompt_context
from relay_engine.handlers import HANDLERS
from relay_engine.jobs import timeout_for
from relay_engine.launch import (
    LaunchRequest,
    adapter_for,
    build_launch,
    record_spawn,
)
from relay_engine.live import FinishedExecution, LiveExecution
from relay_engine.model import EngineRecord, Execution, Job, Plan, ProviderLimit, Task
from relay_engine.outcomes import (
    ExitFacts,
    Outcome,
    OutcomeKind,
    StopReason,
    judge_exit,
    redact_outcome,
)
from relay_engine.planning import gated_keys
from relay_engine.prompts import assemble_prompt
from relay_engine.readiness import finish_jobs, promote_ready, resume_parked
from relay_engine.recovery import ClaimFacts, Recovery, decide_recoveries
from relay_engine.redaction import Redactor
from relay_engine.registry import kill_orphan, mark_stopped, owner_facts, register_engine, this_host
from relay_engine.rounds import PlannerRounds
from relay_engine.runner import LaunchError, LaunchSpec, launch
from relay_engine.selection import NoAgent, Park, Selected
from relay_engine.states import JobState, TaskState
from relay_engine.store import Store, record_event
from relay_engine.taskops import move_task
from relay_engine.workspace import WorkspaceError, Worktrees

log = logging.getLogger(__name__)
OUTPUT_SAVE_INTERVAL_S = 1.0


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
        self.config = config or load_config(self.workspace)
        self.role = role
        self.clock = clock
        self.id = f"{role}-{uuid.uuid4().hex[:10]}"
        self.host = this_host()
        self.live: dict[str, LiveExecution] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._release_on_stop = True
        self._stopped = threading.Event()
        self._subscribers: list[Callable[[], None]] = []
        self._registered = False
        self._last_heartbeat = 0.0
        self._last_output_save = 0.0
        self._last_db_ok = clock()
        self._dirty_jobs: set[str] = set()
        self.rounds = PlannerRounds(self)
        self.worktrees = Worktrees(self.workspace)
        self.redactor = Redactor.for_agents(a.env for a in self.config.agents)
        self._base_env = dict(os.environ)
        self._spawner = ThreadPoolExecutor(
            max_workers=4, thread_name_prefix=f"relay-spawn-{self.id}"
        )
        self._config_changed = threading.Event()
        self._config_seen = self._config_stamp()
        self._command_waiting = threading.Event()
        self._last_full_tick = 0.0

    # -- public API ------------------------------------------------------------------
    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)

    def wake(self, *_: object) -> None:
        self._wake.set()

    def live_count(self) -> int:
        return len(self.live)

    def submit_command(self, kind: str, payload: dict) -> int:
        command_id = self.store.enqueue_command(kind, payload, now=self.clock())
        self._command_waiting.set()
        self.wake()
        return command_id

    def stop(self, *, release: bool = True, timeout: float = 15.0) -> None:
        """End the loop; with ``release`` live agents stop and their tasks return to QUEUED."""
        self._release_on_stop = release
        self._stop.set()
        self.wake()
        self._stopped.wait(timeout)

    def run(self, stop: threading.Event | None = None, *, until_idle: bool = False) -> bool:
        """Run ticks until stopped (or idle); True when every job it saw succeeded."""
        self._stopped.clear()
        self.register()
        try:
            while not self._stop.is_set() and not (stop and stop.is_set()):
                full = self._full_tick_due()
                changed = self._safe_tick(full=full)
                if until_idle and full and not changed and self.is_idle():
                    self._settle_all_jobs()
                    break
                self._wake.wait(self.config.engine.tick_seconds)
                self._wake.clear()
        finally:
            self._stop.set()
            self.shutdown(release=self._release_on_stop)
            self._stopped.set()
        return self.all_jobs_succeeded()

    def register(self) -> None:
        if not self._registered:
            register_engine(self.store, self.id, role=self.role, now=self.clock())
            self._registered = True
            self._sync_agents()
            self._watch_config()
            self._settle_all_jobs()

    def _watch_config(self) -> None:
        """Reload relay.toml on the next tick after it changes (watchfiles, in a thread)."""
        path = self.workspace / CONFIG_FILE

        def watch() -> None:
            for changes in watchfiles.watch(
                self.workspace,
                stop_event=self._stop,
                recursive=False,
                debounce=200,
                rust_timeout=500,
            ):
                if any(Path(changed).name == path.name for _, changed in changes):
                    self._config_changed.set()
                    self._command_waiting.set()
                    self.wake()

        threading.Thread(target=watch, daemon=True, name=f"relay-config-{self.id}").start()

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
        error = reload_config(self)
        self.redactor = Redactor.for_agents(a.env for a in self.config.agents)
        with self.store.write() as session:
            if error:
                record_event(
                    session,
                    "config.invalid",
                    f"relay.toml not reloaded, keeping the last good config: {error}",
                    now=now,
                    level="error",
                )
            else:
                assignments.sync_agents(session, self.config.agents, now)
                record_event(
                    session,
                    "config.reloaded",
                    f"relay.toml reloaded: {len(self.config.agents)} agents",
                    now=now,
                )
        return True

    def _sync_agents(self) -> None:
        with self.store.write() as session:
            assignments.sync_agents(session, self.config.agents, self.clock())

    def shutdown(self, *, release: bool) -> None:
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
        self._reap(now)
        self._spawner.shutdown(wait=True)
        if self._registered:
            mark_stopped(self.store, self.id, now=now)
        self._publish()

    # -- the tick --------------------------------------------------------------------
    def _safe_tick(self, *, full: bool = True) -> bool:
        try:
            self._command_waiting.clear()
            changed = self.tick(full=full)
        except OperationalError as error:
            if not _is_transient(error):
                raise
            log.warning("database unavailable: %s", error)
            return True
        self._last_db_ok = self.clock()
        if changed:
            self._publish()
        return changed

    def tick(self, *, full: bool = True) -> bool:
        """One reconcile pass (DESIGN §2 order). True when anything changed.

        A process exit wakes the loop for a *fast* tick (reap, settle, dispatch): the
        completion transaction already released the dependents. Housekeeping (commands,
        recovery, parked work, planning, readiness) runs on full ticks, every
        ``tick_seconds`` or when a command arrives.
        """
        now = self.clock()
        changed = False
        if full:
            self._last_full_tick = now
            changed |= self._maybe_reload_config(now)
            changed |= bool(
                commands.apply_pending(self.store, self.id, now, self.command_handlers())
            )
            self._heartbeat(now)
            changed |= self._recover(now)
            changed |= resume_parked(self.store, now)
            changed |= self.plan(now)
            changed |= promote_ready(self.store, now, self._gated())
        changed |= self._reap(now, fence=full)
        changed |= self._finish_jobs(now)
        if now - self._last_db_ok < self.config.engine.lease_seconds:
            changed |= self._dispatch(now)
        self._save_output(now)
        return changed

    def _full_tick_due(self) -> bool:
        due = self.clock() - self._last_full_tick >= self.config.engine.tick_seconds
        return due or self._command_waiting.is_set()

    def command_handlers(self) -> dict[str, commands.Handler]:
        return HANDLERS

    def plan(self, now: float) -> bool:
        return self.rounds.tick(now)

    def _gated(self) -> frozenset[str]:
        with self.store.read() as session:
            return gated_keys(session)

    def is_idle(self) -> bool:
        if self.live:
            return False
        active = [TaskState.QUEUED, TaskState.RUNNING, TaskState.PARKED]
        with self.store.read() as session:
            busy = session.exec(select(Task.key).where(col(Task.state).in_(active)).limit(1))
            return busy.first() is None and not self._planning_active(session)

    def _planning_active(self, session: Session) -> bool:
        return self.rounds.planning_active(session)

    def all_jobs_succeeded(self) -> bool:
        with self.store.read() as session:
            states = session.exec(select(Job.state)).all()
        return all(state in ("SUCCEEDED", "MERGED") for state in states)

    def _publish(self) -> None:
        for callback in list(self._subscribers):
            try:
                callback()
            except Exception:
                log.exception("subscriber failed")

    # -- heartbeat and recovery ------------------------------------------------------
    def _heartbeat(self, now: float) -> None:
        if now - self._last_heartbeat < self.config.engine.heartbeat_seconds:
            return
        self._last_heartbeat = now
        lease_until = now + self.config.engine.lease_seconds
        with self.store.write() as session:
            session.exec(
                update(EngineRecord).where(col(EngineRecord.id) == self.id).values(heartbeat_at=now)
            )
            if self.live:
                session.exec(
                    update(Task)
                    .where(col(Task.execution_id).in_(list(self.live)))
                    .values(lease_expires_at=lease_until)
                )
                session.exec(
                    update(Plan)
                    .where(col(Plan.execution_id).in_(list(self.live)))
                    .values(lease_expires_at=lease_until)
                )

    def lost_claims(self, claims: list[ClaimFacts], now: float) -> list[Recovery]:
        """Claims whose runner is gone (dead engine, silent host) or whose lease expired."""
        if not claims:
            return []
        with self.store.read() as session:
            owners = owner_facts(session, {c.owner or "" for c in claims}, self.host)
        return decide_recoveries(
            claims,
            owners,
            my_engine=self.id,
            my_live=frozenset(self.live),
            my_host=self.host,
            now=now,
            ttl=self.config.engine.lease_seconds,
        )

    def _recover(self, now: float) -> bool:
        with self.store.read() as session:
            claims = [
                ClaimFacts(
                    t.key,
                    t.execution_id or "",
                    t.lease_owner,
                    t.lease_expires_at,
                    t.attempt,
                    t.max_attempts,
                )
                for t in dispatch.busy_tasks(session)
            ]
        decisions = self.lost_claims(claims, now)
        for decision in decisions:
            if decision.kill_local_group:
                kill_orphan(self.store, decision.execution_id)
            self._apply_recovery(decision.key, decision.execution_id, decision.reason, now)
        return bool(decisions)

    def _apply_recovery(self, key: str, execution_id: str, reason: str, now: float) -> None:
        with self.store.write() as session:
            task = fenced_task(session, key, execution_id)
            if task is None:
                return
            outcome = Outcome(OutcomeKind.FAILED, error=reason)
            finish_execution_row(session, execution_id, outcome, exit_code=None, now=now)
            record_event(
                session,
                "task.recovered",
                f"{key}: {reason}",
                now=now,
                job_id=task.job_id,
                task_key=key,
                level="warning",
            )
            fail_or_retry(session, task, reason, now=now)
            self._dirty_jobs.add(task.job_id)

    def _settle_all_jobs(self) -> None:
        """Settle every active job, including ones another engine finished the work of."""
        with self.store.read() as session:
            active = session.exec(select(Job.id).where(Job.state == JobState.ACTIVE)).all()
        self._dirty_jobs.update(active)
        self._finish_jobs(self.clock())

    def _finish_jobs(self, now: float) -> bool:
        dirty, self._dirty_jobs = self._dirty_jobs, set()
        return finish_jobs(self.store, dirty, now) if dirty else False

    # -- dispatch ----------------------------------------------------------------------
    def _dispatch(self, now: float) -> bool:
        capacity = self.config.engine.max_concurrent_agents
        with self.store.read() as session:
            limits = limited_providers(session)
            view = dispatch.read_queue(session, limits)
            if not view.queued or len(view.running) >= capacity:
                return False
            running = dispatch.running_by_agent(session)
        wanted: list[tuple[Task, Selected]] = []
        changed = False
        for task in dispatch.choose(view, capacity):
            selection = dispatch.pick_agent(task, view, self.config, running, now)
            if isinstance(selection, Selected):
                wanted.append((task, selection))
                running[selection.agent_id] += 1
            elif isinstance(selection, Park):
                changed |= self._park_before_launch(task, selection, now)
            elif isinstance(selection, NoAgent):
                changed |= self._fail_unassignable(task, selection.reason, now)
        return self._start(wanted, capacity, now) or changed

    def _start(self, wanted: list[tuple[Task, Selected]], capacity: int, now: float) -> bool:
        """Claim in one transaction, spawn, then record every start in one more."""
        if not wanted:
            return False
        claims = dispatch.claim_batch(
            self.store,
            wanted,
            engine_id=self.id,
            capacity=capacity,
            lease_s=self.config.engine.lease_seconds,
            now=now,
        )
        started: list[tuple[dispatch.Claim, LiveExecution, LaunchSpec, LaunchRequest]] = []
        failed: list[tuple[dispatch.Claim, str]] = []
        # Writing artifacts and forking wait on the disk and the scheduler, not the CPU:
        # overlapping them keeps a burst of starts from stalling the loop.
        for claim, result in zip(claims, self._spawner.map(self._prepare, claims), strict=True):
            if isinstance(result, str):
                failed.append((claim, result))
            else:
                started.append((claim, *result))
        with self.store.write() as session:
            for claim, live, spec, request in started:
                record_spawn(session, request, live, spec, now, self.redactor)
                self._mark_started(session, claim.task.key, claim.execution_id, now)
            for claim, error in failed:
                self._launch_failed(session, claim.task.key, claim.execution_id, error, now)
        return bool(claims)

    def _prepare(
        self, claim: dispatch.Claim
    ) -> tuple[LiveExecution, LaunchSpec, LaunchRequest] | str:
        """Build and start one claimed task's agent; the error text when it cannot start."""
        agent = self.config.agent(claim.selected.agent_id)
        if agent is None:
            return f"agent {claim.selected.agent_id} is no longer configured"
        try:
            request = self._launch_request(claim.task, agent, claim.execution_id)
            live, spec = self.spawn(request, task_key=claim.task.key, plan_id=None)
        except (LaunchError, WorkspaceError, OSError, ValueError) as error:
            return str(error)
        return live, spec, request

    def spawn(
        self, request: LaunchRequest, *, task_key: str | None, plan_id: int | None
    ) -> tuple[LiveExecution, LaunchSpec]:
        """Start the agent process; the caller records it (see :func:`record_spawn`)."""
        spec = build_launch(self.workspace, request, self._base_env)
        process = launch(spec, on_exit=self.wake)
        live = LiveExecution(
            execution_id=request.execution_id,
            task_key=task_key,
            plan_id=plan_id,
            job_id=request.job_id,
            agent_id=request.agent.id,
            provider=request.agent.provider,
            process=process,
            parser=adapter_for(request.agent).parser(),
            extra={"resumed": request.resume_session_id is not None},
        )
        self.live[request.execution_id] = live
        return live, spec

    def _launch_request(self, task: Task, agent: AgentConfig, execution_id: str) -> LaunchRequest:
        with self.store.read() as session:
            job = session.get(Job, task.job_id)
            prompt = assemble_prompt(
                prompt_context(session, self.workspace, task, job, agent.provider)
            )
            resume = assignments.resumable_session(session, task, agent.id)
        cwd = (
            self.worktrees.cwd_for(job.repo_path, job.id, task.task_id, job.base_branch)
            if job
            else self.workspace
        )
        return LaunchRequest(
            execution_id=execution_id,
            task_key=task.key,
            job_id=task.job_id,
            attempt=task.attempt,
            prompt=prompt,
            cwd=cwd,
            timeout_s=timeout_for(task),
            agent=agent,
            sim_script=task.sim,
            resume_session_id=resume,
        )

    def _mark_started(self, session: Session, key: str, execution_id: str, now: float) -> None:
        fenced = fenced_task(session, key, execution_id)
        if fenced is None:
            return
        move_task(
            session,
            fenced,
            TaskState.RUNNING,
            now=now,
            kind="task.started",
            message=f"{fenced.key} started on {fenced.agent} "
            f"(attempt {fenced.attempt}/{fenced.max_attempts})",
            started_at=now,
            data={"agent": fenced.agent, "provider": fenced.provider, "execution": execution_id},
        )

    def _launch_failed(
        self, session: Session, key: str, execution_id: str, error: str, now: float
    ) -> None:
        fenced = fenced_task(session, key, execution_id)
        failure = Outcome(OutcomeKind.FAILED, error=error)
        finish_execution_row(session, execution_id, failure, exit_code=None, now=now)
        if fenced is not None:
            fail_or_retry(session, fenced, f"could not start agent: {error}", now=now)
            self._dirty_jobs.add(fenced.job_id)

    def _park_before_launch(self, task: Task, park: Park, now: float) -> bool:
        return self._settle_unclaimed(
            task.key,
            TaskState.PARKED,
            now,
            kind="task.parked",
            level="warning",
            message=f"{task.key} parked before launch: {park.reason}",
            not_before=park.until,
            waiting_on_provider=park.provider,
            parked_at=now,
            provider=park.provider,
            data={"provider": park.provider, "until": park.until},
        )

    def _fail_unassignable(self, task: Task, reason: str, now: float) -> bool:
        self._dirty_jobs.add(task.job_id)
        return self._settle_unclaimed(
            task.key,
            TaskState.FAILED,
            now,
            kind="task.failed",
            level="error",
            message=f"{task.key} cannot run: {reason}",
            error=reason,
            finished_at=now,
        )

    def _settle_unclaimed(self, key: str, target: TaskState, now: float, **change: Any) -> bool:
        """Move a still-unclaimed queued task; False if another engine got to it first."""
        with self.store.write() as session:
            fresh = session.get(Task, key)
            if fresh is None or fresh.state != TaskState.QUEUED or fresh.execution_id:
                return False
            move_task(session, fresh, target, now=now, **change)
        return True

    # -- running processes -------------------------------------------------------------
    def _reap(self, now: float, *, fence: bool = True) -> bool:
        if not self.live:
            return False
        if fence:
            self._fence_check()
        wall = datetime.now().astimezone()
        finished = []
        for live in list(self.live.values()):
            report = live.pump(wall)
            if report.limit is not None and live.stop_reason is None:
                live.stop(StopReason.LIMITED, 2.0)
            if live.process.timed_out(now) and live.stop_reason is None:
                live.stop(StopReason.TIMEOUT, self.config.engine.cancel_grace_seconds)
            if live.process.poll() is not None:
                del self.live[live.execution_id]
                finished.append(self._judge(live, wall))
        if not finished:
            return False
        with self.store.write() as session:
            for exit_ in finished:
                self._record_execution(session, exit_, now)
                if exit_.live.plan_id is not None:
                    self.rounds.complete(session, exit_, now)
                else:
                    self.on_complete(session, exit_.live, exit_.outcome, now)
        return True

    def _fence_check(self) -> None:
        """Kill processes whose task was taken from us (cancelled, recovered elsewhere)."""
        with self.store.read() as session:
            mine = list(self.live)
            owned = set(
                session.exec(select(Task.execution_id).where(col(Task.execution_id).in_(mine)))
            )
            owned |= self.rounds.owned_executions(session, mine)
        for execution_id, live in self.live.items():
            if execution_id not in owned and live.stop_reason is None:
                live.stop(StopReason.LOST, self.config.engine.cancel_grace_seconds)

    def _judge(self, live: LiveExecution, wall: datetime) -> FinishedExecution:
        """What the exit means, with the task's work merged (or not) into the job branch."""
        live.drain(wall)
        exit_code = live.process.poll() or 0
        stderr_tail = live.process.stderr_tail()
        report = live.parser.finish(exit_code, stderr_tail, wall)
        result_file = live.result_file()
        outcome = judge_exit(
            ExitFacts(
                exit_code=exit_code,
                stop_reason=live.stop_reason,
                timeout_s=live.process.spec.timeout_s,
                cli_error=report.error,
                cli_is_error=report.is_error,
                result_text=report.result_text,
                result_file=result_file if result_file is not None else report.result_data,
                limit=report.limit,
                stderr_tail=stderr_tail,
            )
        )
        if live.plan_id is None:
            outcome = self._settle_worktree(live, outcome)
        for artifact in (live.process.stdout_path, live.process.stderr_path):
            self.redactor.file(artifact)
        live.last_output = self.redactor.text(live.last_output)
        return FinishedExecution(
            live, redact_outcome(outcome, self.redactor), report, exit_code, result_file
        )

    def _settle_worktree(self, live: LiveExecution, outcome: Outcome) -> Outcome:
        """Merge a succeeded task's work into the job branch; a conflict fails the attempt."""
        with self.store.read() as session:
            job = session.get(Job, live.job_id)
            task = session.get(Task, live.task_key)
        if job is None or task is None:
            return outcome
        succeeded = outcome.kind is OutcomeKind.SUCCEEDED
        try:
            merge = self.worktrees.finish(
                job.repo_path, job.id, task.task_id, task.title, succeeded=succeeded
            )
        except WorkspaceError as error:
            return (
                Outcome(OutcomeKind.FAILED, error=f"could not merge: {error}")
                if succeeded
                else outcome
            )
        if merge is None:
            return outcome
        if not merge.merged:
            paths = ", ".join(merge.conflicts) or "unknown paths"
            return Outcome(
                OutcomeKind.FAILED,
                summary=outcome.summary,
                data=outcome.data,
                error=f"merge conflict with the job branch in: {paths}",
            )
        return replace(outcome, diffstat=merge.diffstat.strip() or None, commit=merge.commit)

    def _record_execution(self, session: Session, exit_: FinishedExecution, now: float) -> None:
        live, report = exit_.live, exit_.report
        finish_execution_row(
            session, live.execution_id, exit_.outcome, exit_code=exit_.exit_code, now=now
        )
        session.exec(
            update(Execution)
            .where(col(Execution.id) == live.execution_id)
            .values(
                session_id=report.session_id,
                input_tokens=report.input_tokens,
                output_tokens=report.output_tokens,
                cost_usd=report.cost_usd,
                last_output=(live.last_output or live.saved_output or "")[:300] or None,
            )
        )

    def on_complete(
        self, session: Session, live: LiveExecution, outcome: Outcome, now: float
    ) -> None:
        if outcome.kind is OutcomeKind.LOST or live.task_key is None:
            return
        task = fenced_task(session, live.task_key, live.execution_id)
        if task is None:
            return
        decision = self._limit_decision(session, task, outcome, now) if outcome.limit else None
        self._carry_over(session, task, live, outcome, decision, now)
        apply_outcome(session, task, outcome, now=now, limit_decision=decision)
        self._dirty_jobs.add(task.job_id)

    def _carry_over(
        self,
        session: Session,
        task: Task,
        live: LiveExecution,
        outcome: Outcome,
        decision: LimitDecision | None,
        now: float,
    ) -> None:
        """Session, memory and pin bookkeeping that outlives this execution."""
        assignments.remember_session(
            session,
            task,
            live.agent_id,
            live.provider,
            live.parser.report.session_id,
            resumed=bool(live.extra.get("resumed")),
            failed_for_good=outcome.kind is OutcomeKind.FAILED
            and task.attempt >= task.max_attempts,
            now=now,
        )
        if outcome.kind is OutcomeKind.SUCCEEDED:
            assignments.add_memory(session, task, outcome.summary, now)
        pin = assignments.active_pin(session, task)
        if decision and decision.swap_to and pin and pin.agent_id != decision.swap_to:
            assignments.replace_pin(
                session,
                task.job_id,
                task.workstream or "",
                task.role,
                decision.swap_to,
                reason=f"swapped from {pin.agent_id}: {decision.provider} limited",
                now=now,
            )

    def _limit_decision(
        self, session: Session, task: Task, outcome: Outcome, now: float
    ) -> LimitDecision:
        signal = outcome.limit
        assert signal is not None
        provider = task.provider or signal.provider
        limit = record_limit(session, provider, signal.reset_at, signal.source_text, now)
        view = dispatch.QueueView([], [], {}, limited_providers(session), {})
        choice = dispatch.pick_agent(task, view, self.config, Counter(), now, frozenset({provider}))
        reason = signal.source_text[:200]
        if isinstance(choice, Selected):
            return LimitDecision(choice.agent_id, None, provider, reason)
        return LimitDecision(None, limit.reset_at, provider, reason)

    def _save_output(self, now: float) -> None:
        if not self.live or now - self._last_output_save < OUTPUT_SAVE_INTERVAL_S:
            return
        self._last_output_save = now
        changed = [lv for lv in self.live.values() if lv.last_output != lv.saved_output]
        if not changed:
            return
        with self.store.write() as session:
            for live in changed:
                session.exec(
                    update(Execution)
                    .where(col(Execution.id) == live.execution_id)
                    .values(
                        last_output=self.redactor.text(live.last_output[:300]),
                        session_id=live.parser.report.session_id,
                    )
                )
                live.saved_output = live.last_output


def provider_status(store: Store) -> list[ProviderLimit]:
    with store.read() as session:
        return list(session.exec(select(ProviderLimit)))


def reload_config(engine: Engine) -> str | None:
    """Re-read relay.toml; keep the last good config and say why when it is invalid."""
    try:
        engine.config = load_config(engine.workspace)
    except ConfigError as error:
        return str(error)
    return None


TRANSIENT_DB_ERRORS = (
    "locked",
    "busy",
    "connection",
    "could not connect",
    "server closed",
    "unable to open",
    "terminating",
)


def _is_transient(error: OperationalError) -> bool:
    """Lock and connection trouble passes; a broken schema must stop the engine loudly."""
    text = str(error.orig if error.orig is not None else error).lower()
    return any(marker in text for marker in TRANSIENT_DB_ERRORS)

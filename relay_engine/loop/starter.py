"""Starting agents: pick what may run, claim it, write its artifacts and spawn it.

The decisions come from the pure scheduler and selection modules (via :mod:`dispatch`);
this module turns a tick's claims into running processes and records them.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.agents.adapters import MEMORY_TOOL_PROVIDERS
from relay_engine.agents.launch import (
    LaunchRequest,
    adapter_for,
    artifact_dir,
    artifacts_root,
    build_launch,
    missing_executable,
)
from relay_engine.agents.runner import LaunchError, LaunchSpec, launch
from relay_engine.contracts.config import AgentConfig
from relay_engine.contracts.prompts import assemble_prompt
from relay_engine.core import merge_prep
from relay_engine.core.budgets import Hold
from relay_engine.core.capacity import FleetCaps, FleetCounts
from relay_engine.core.failures import AgentFailure
from relay_engine.core.faults import DiskFull, is_disk_full
from relay_engine.core.memory import NoteFacts
from relay_engine.core.outcomes import Outcome, OutcomeKind, StopReason
from relay_engine.core.permissions import cli_rules
from relay_engine.core.selection import FleetView, NoAgent, Park, Selected, pick_agent
from relay_engine.core.states import TaskState
from relay_engine.git.worktrees import WorkspaceError
from relay_engine.loop import dispatch
from relay_engine.loop.crashpoints import crash_point
from relay_engine.loop.dispatch import Claim, QueueKept, QueueView
from relay_engine.loop.live import LiveExecution, spawn_row
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops import agents as agent_status
from relay_engine.ops import asks, assignments, budgets, memory
from relay_engine.ops.completion import (
    fail_or_retry,
    fail_task,
    fenced_task,
    finish_execution_row,
    move_to_other_agent,
    release_task,
)
from relay_engine.ops.failed_starts import (
    Stage,
    StartFailure,
    error_text,
    unclaimed_execution,
    write_artifacts,
)
from relay_engine.ops.prompt_context import prompt_context
from relay_engine.store import spend
from relay_engine.store.events import EventKind
from relay_engine.store.schema import Job, PermissionRule, Task
from relay_engine.store.task_rows import move_task, timeout_for

REFILL_ROUNDS = 3  # claim rounds a tick may take to fill slots of passed-over candidates


@dataclass(frozen=True)
class Deferred:
    """A start that failed for the machine's reasons (disk full): refunded, not charged."""

    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class _Batch:
    """What a dispatch round read once for all of its starts: the jobs, the operators'
    permission rules."""

    jobs: dict[str, Job]
    rules: list[PermissionRule]


@dataclass
class _Picks:
    """A round's chosen tasks: the ones to claim, each with its agent, and the ones parked
    or failed instead (they left the queue)."""

    wanted: list[tuple[Task, Selected]] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    changed: bool = False


@dataclass(frozen=True)
class _Assembled:
    """What a start needs besides the claim: read in one transaction before the spawn."""

    job: Job | None
    prompt: str
    resume: str | None
    allow_rules: tuple[str, ...]
    deny_rules: tuple[str, ...]
    said: tuple[str, ...]  # the operator's words this prompt carries
    memory: tuple[NoteFacts, ...] | None = None  # the notes its memory tools search


class Starter:
    """The dispatch step of the tick, and the one way agent processes are spawned."""

    def __init__(self, runtime: EngineRuntime) -> None:
        self.runtime = runtime
        self._base_env = dict(os.environ)  # copied once; each launch takes its allow-list from it
        self._said: dict[str, tuple[str, ...]] = {}  # execution -> operator notes in its prompt
        self._batch = _Batch({}, [])
        # Kept between full ticks (see QueueKept): the queue's jobs and pins, the rules.
        self._kept: tuple[QueueKept, list[PermissionRule] | None, int] = (
            QueueKept(),
            None,
            -1,
        )
        self._spawner = ThreadPoolExecutor(
            max_workers=4, thread_name_prefix=f"relay-spawn-{runtime.engine_id}"
        )
        self._queue_grew = runtime.store.queue_grew  # as the kept queue rows know it

    def close(self) -> None:
        self._spawner.shutdown(wait=True)

    def dispatch(self, now: float, *, fresh: bool = False) -> bool:
        """Start what may start now: order, capacity, scope locks, agent selection.

        Tasks a claim passes over (their rows held by another session) do not keep their
        slots: the next candidates are read and claimed in the same tick, a few rounds at
        most. ``fresh``: the queue is read again, not taken from the rows kept from the
        last read (a full tick: other processes may have queued work ahead of them)."""
        if fresh:
            self._kept[0].forget_rows()
        slots = self.runtime.config.engine.max_concurrent_agents
        passed_over: set[str] = set()
        changed = False
        for _ in range(REFILL_ROUNDS):
            if self.runtime.own_claims() >= slots:
                break  # full by this engine's own count: nothing to read
            before = len(passed_over)
            result = self._dispatch_round(now, passed_over)
            changed |= bool(result)
            if result is None or len(passed_over) == before:
                break
        return changed

    def _kept_now(self) -> tuple[QueueKept, list[PermissionRule] | None, int]:
        """What dispatch kept, unless the engine forgot it since (a full tick, a change)."""
        if self._kept[2] != self.runtime.generation:
            self._kept = (QueueKept(), None, self.runtime.generation)
        if self._queue_grew != self.runtime.store.queue_grew:  # work queued here since
            self._queue_grew = self.runtime.store.queue_grew
            self._kept[0].forget_rows()
        return self._kept

    def _dispatch_round(self, now: float, passed_over: set[str]) -> bool | None:
        """One read of the queue and one claim batch; None when nothing could start."""
        config, engine_id = self.runtime.config, self.runtime.engine_id
        kept = self._kept_now()
        caps = FleetCaps.from_config(config)
        with self.runtime.store.read() as session:
            view = dispatch.read_queue(
                session,
                config.engine.max_concurrent_agents,
                engine_id=engine_id,
                max_running=config.cluster.max_running,
                exclude=frozenset(passed_over),
                kept=kept[0],
                own=None if caps.any() else self.runtime.own_claims_by_agent(),
                alternates=self._alternates(),
                pages=dispatch.KEPT_PAGES if self.runtime.place.size <= 1 else 1,
            )
            if not view.queued or view.free <= 0:
                return None
            running = Counter(view.mine)
            fleet = dispatch.fleet_counts(view.running)
            spent = spend.job_holds(session, view.jobs.values())
            if kept[1] is None:
                self._kept = (kept[0], asks.every_rule(session), self._kept[2])
            self._batch = _Batch(view.jobs, self._kept[1] or [])
            standing = self.runtime.fleet_view(session, now, view.pins)
        picks = self._pick_agents(view, spent, standing, (running, fleet, caps), now)
        budgeted = {
            j.id
            for j in view.jobs.values()
            if j.budget_usd is not None or j.budget_tokens is not None
        }
        known = (budgeted, view.owned)
        wanted = picks.wanted
        claims = self._start(wanted, view.lock_dirs, caps, now, passed_over, known, view.free)
        kept[0].took([*(c.task.key for c in claims), *passed_over, *picks.settled])
        if len(claims) < min(view.free, len(wanted)):  # kept rows gone: read the queue
            kept[0].forget_rows()
        return bool(claims) or picks.changed

    def _pick_agents(
        self,
        view: QueueView,
        spent: dict[str, Hold],
        standing: FleetView,
        counts: tuple[Counter[str], FleetCounts, FleetCaps],
        now: float,
    ) -> _Picks:
        """An agent for each task the round chose, in dispatch order; the tasks no agent
        may take now are parked or failed here. ``counts``: the agents' claims, the fleet's,
        and the caps on them, counting each pick as it is made."""
        running, fleet, caps = counts
        agents, picks = self.runtime.config.agents, _Picks()
        for task in dispatch.choose(view):
            if task.job_id in spent:
                picks.settled.append(task.key)
                picks.changed |= self._park_on_budget(task.key, spent[task.job_id], now)
                continue
            selection = pick_agent(
                task, agents, standing, now, running=running, counts=fleet, caps=caps
            )
            if isinstance(selection, Selected):
                picks.wanted.append((task, selection))
                running[selection.agent_id] += 1
                fleet.add(selection.agent_id, selection.provider)
            elif isinstance(selection, Park):
                picks.settled.append(task.key)
                picks.changed |= self._park_before_launch(task, selection, now)
            elif isinstance(selection, NoAgent):
                picks.settled.append(task.key)
                picks.changed |= self._fail_unassignable(task, selection.reason, now)
        return picks  # a task told to Wait (its agents are busy) stays queued, and kept

    def _alternates(self) -> int:
        """Candidates chosen per free slot beyond it, claimed in place of first picks another
        engine took since the queue was read: one for each live engine. The
        engines read the same top of the queue, so the more of them there are, the more of
        a read's first picks are gone by its claim, and a claim left with none costs a
        round of reads and a claim more."""
        return self.runtime.place.size

    def _start(
        self,
        wanted: list[tuple[Task, Selected]],
        lock_dirs: dict[str, str | None],
        caps: FleetCaps,
        now: float,
        passed_over: set[str] | None = None,
        known: tuple[set[str], int] | None = None,
        take: int | None = None,
    ) -> list[Claim]:
        """Claim in one transaction, spawn, then record every start in one more.
        ``known``: the jobs with a budget and this engine's claims, as the queue's read
        found them (the claim need not read them again); ``take``, the slots to fill when
        ``wanted`` holds alternates.

        Each agent's supervisor writes its on-disk record before the agent runs, so an
        engine killed anywhere in between leaves nothing that recovery cannot find and kill.
        """
        if not wanted:
            return []
        runtime = self.runtime
        claims = dispatch.claim_batch(
            runtime.store,
            wanted,
            engine_id=runtime.engine_id,
            capacity=runtime.config.engine.max_concurrent_agents,
            lease_s=runtime.config.engine.lease_seconds,
            now=now,
            artifacts=artifacts_root(runtime.workspace),
            caps=caps,
            lock_dirs=lock_dirs,
            passed_over=passed_over,
            budgeted=known[0] if known else None,
            mine=known[1] if known else None,
            take=take,
        )
        started: list[tuple[Claim, LiveExecution, LaunchSpec, LaunchRequest]] = []
        failed: list[tuple[Claim, str | AgentFailure | Deferred]] = []
        # Writing artifacts and forking wait on the disk and the scheduler, not the CPU:
        # overlapping them keeps a burst of starts from stalling the loop.
        for claim, result in zip(claims, self._spawner.map(self._prepare, claims), strict=True):
            if isinstance(result, str | AgentFailure | Deferred):
                failed.append((claim, result))
            else:
                started.append((claim, *result))
        crash_point("spawned")
        try:
            self._record_starts(started, failed, now)
        except BaseException:
            for _, live, _, _ in started:  # never run work the database does not know about
                live.stop(StopReason.RELEASED, 0.0)
            raise
        return claims

    def _record_starts(
        self,
        started: list[tuple[Claim, LiveExecution, LaunchSpec, LaunchRequest]],
        failed: list[tuple[Claim, str | AgentFailure | Deferred]],
        now: float,
    ) -> None:
        """Where each agent runs is written with the engine's next write (its exit, or the
        output it saves within a second): the claim already started the task. A write of
        their own only for starts that change more than their execution's row -- a pin's
        count, the operator's words their prompt carried, a handed-back task's kept work --
        and for launches that failed."""
        redactor = self.runtime.redactor
        for _, live, spec, request in started:
            self.runtime.unwritten_spawns[request.execution_id] = spawn_row(
                request, live, spec, now, redactor
            )
        said = {c.execution_id: self._said.pop(c.execution_id, ()) for c, *_ in started}
        more = [c for c, *_ in started if _changes_more(c, said[c.execution_id])]
        if not more and not failed:
            return
        with self.runtime.store.write() as session:
            for claim in more:
                dispatch.count_assignment(session, claim, now)
                self._after_start(session, claim, said[claim.execution_id])
            for claim, error in failed:
                self._said.pop(claim.execution_id, None)
                self._launch_failed(session, claim.task.key, claim.execution_id, error, now)
        if any(isinstance(error, Deferred) for _, error in failed):
            raise DiskFull("no space left for the artifacts of new executions")

    def _prepare(
        self, claim: Claim
    ) -> tuple[LiveExecution, LaunchSpec, LaunchRequest] | str | AgentFailure | Deferred:
        """Build and start one claimed task's agent; why, when it cannot start (an
        :class:`AgentFailure` when the agent's CLI is missing, a :class:`Deferred` when the
        disk is full: the task is not to blame for either). A start that fails leaves
        error.txt (and prompt.md, once assembled) in the execution's artifact folder."""
        stage, prompt = Stage.AGENT, None
        agent = self.runtime.config.agent(claim.selected.agent_id)
        failed: str | AgentFailure | Deferred
        if agent is None:
            failed = f"agent {claim.selected.agent_id} is no longer configured"
        elif (missing := missing_executable(agent)) is not None:
            failed = missing
        else:
            try:
                stage = Stage.PROMPT
                assembled = self._assemble(claim.task, agent)
                prompt = assembled.prompt
                stage = Stage.WORKTREE
                request = self._launch_request(claim, agent, assembled)
                self._said[claim.execution_id] = assembled.said
                stage = Stage.LAUNCH
                live, spec = self.spawn(
                    request,
                    task_key=claim.task.key,
                    plan_id=None,
                    lease_until=claim.task.lease_expires_at,
                )
                return live, spec, request
            except (LaunchError, WorkspaceError, OSError, ValueError) as error:
                failed = Deferred(str(error)) if is_disk_full(error) else str(error)
        self._keep_failure(claim, StartFailure(stage, _describe(failed)), prompt)
        return failed

    def _keep_failure(self, claim: Claim, failure: StartFailure, prompt: str | None) -> None:
        redact = self.runtime.redactor.text
        text = error_text(claim.task, claim.selected.agent_id, failure)
        directory = artifact_dir(self.runtime.workspace, claim.execution_id)
        write_artifacts(directory, redact(text), redact(prompt) if prompt is not None else None)

    def spawn(
        self,
        request: LaunchRequest,
        *,
        task_key: str | None,
        plan_id: int | None,
        lease_until: float | None = None,
    ) -> tuple[LiveExecution, LaunchSpec]:
        """Start the agent process; the caller records it (see :func:`record_spawn`).

        Its supervisor's deadline starts from the claim's lease (``lease_until``), not from
        now: a slow start must not push the agent's end past the lease."""
        runtime, settings = self.runtime, self.runtime.config.engine
        adapter = adapter_for(request.agent)
        spec = build_launch(runtime.workspace, request, self._base_env, runtime.redactor, adapter)
        until = lease_until if lease_until is not None else runtime.clock() + settings.lease_seconds
        spec = replace(
            spec,
            grace_s=settings.cancel_grace_seconds,
            deadline_s=runtime.deadline_after(until),
            fence_grace_s=settings.fence_grace_seconds,
        )
        process = launch(spec, on_exit=self.runtime.wake)
        live = LiveExecution(
            execution_id=request.execution_id,
            task_key=task_key,
            plan_id=plan_id,
            job_id=request.job_id,
            agent_id=request.agent.id,
            provider=request.agent.provider,
            process=process,
            parser=adapter.parser(),
            extra={"resumed": request.resume_session_id is not None, "checks": request.checks},
            adapter=adapter,
            access=request.agent.access,
        )
        self.runtime.live[request.execution_id] = live
        return live, spec

    def _assemble(self, task: Task, agent: AgentConfig) -> _Assembled:
        """The task's job, its prompt, the provider session to resume (if any), and the
        permission rules the agent's CLI is handed."""
        batch = self._batch
        with self.runtime.store.read() as session:  # the batch's job and rules, not again
            job = batch.jobs.get(task.job_id) or session.get(Job, task.job_id)
            prompt = assemble_prompt(
                prompt_context(session, self.runtime.workspace, task, job, agent.provider)
            )
            resume = assignments.resumable_session(session, task, agent.id)
            added = asks.rules_of(
                batch.rules, task_key=task.key, job_id=task.job_id, agent=agent.id
            )
            notes = None
            if agent.provider in MEMORY_TOOL_PROVIDERS:
                notes = tuple(memory.snapshot(session, task.job_id, task.workstream or ""))
        allow, deny = cli_rules(self.runtime.config, agent, added)
        said = tuple(task.operator_notes or ())
        return _Assembled(job, prompt, resume, allow, deny, said, notes)

    def _launch_request(
        self, claim: Claim, agent: AgentConfig, assembled: _Assembled
    ) -> LaunchRequest:
        """Where the agent will run: a fresh worktree when the job's repo is git."""
        task, job = claim.task, assembled.job
        cwd = (
            self.runtime.worktrees.cwd_for(
                job.repo_path,
                job.id,
                task.task_id,
                job.base_branch,
                kind=task.kind,
                keep_work=task.keep_work,
            )
            if job
            else self.runtime.worktrees.directory_of(None, task.job_id, task.task_id)
        )
        return LaunchRequest(
            execution_id=claim.execution_id,
            task_key=task.key,
            job_id=task.job_id,
            attempt=task.attempt,
            prompt=assembled.prompt,
            cwd=cwd,
            timeout_s=timeout_for(task),
            agent=agent.for_kind(task.kind),
            sim_script=task.sim,
            resume_session_id=assembled.resume,
            allow_rules=assembled.allow_rules,
            deny_rules=assembled.deny_rules,
            memory=assembled.memory,
            checks=self.runtime.config.git.merge_checks if task.kind == merge_prep.KIND else (),
        )

    def _after_start(self, session: Session, claim: Claim, said: tuple[str, ...]) -> None:
        """A started task no longer carries the operator's words its prompt did (read again
        under the row's lock: words said since stay), nor a hand-back's kept work."""
        if not said and not claim.task.keep_work:
            return
        task = session.get(Task, claim.task.key, populate_existing=True, with_for_update=True)
        if task is None or task.execution_id != claim.execution_id:
            return
        task.operator_notes = [n for n in task.operator_notes or [] if n not in said]
        task.keep_work = False
        session.add(task)

    def _launch_failed(
        self,
        session: Session,
        key: str,
        execution_id: str,
        error: str | AgentFailure | Deferred,
        now: float,
    ) -> None:
        """A start that failed: the task's fault (charged), or the machine's (refunded)."""
        fenced = fenced_task(session, key, execution_id)
        if isinstance(error, Deferred):
            outcome = Outcome(OutcomeKind.RELEASED, error=f"not started: {error.reason}")
            finish_execution_row(
                session, execution_id, outcome, exit_code=None, now=now, never_ran=True
            )
            if fenced is not None:
                release_task(session, fenced, f"not started: {error.reason}", now=now)
            return
        if isinstance(error, AgentFailure):
            outcome = Outcome(OutcomeKind.UNAVAILABLE, error=f"{error.kind}: {error.reason}")
        else:
            outcome = Outcome(OutcomeKind.FAILED, error=error)
        finish_execution_row(
            session, execution_id, outcome, exit_code=None, now=now, never_ran=True
        )
        if fenced is None:
            return
        self.runtime.settle_later(fenced.job_id)
        if isinstance(error, AgentFailure):
            self.runtime.forget_fleet()  # the agent's status changes here
            wait = agent_status.decide_agent_wait(session, fenced, error, self.runtime.config, now)
            move_to_other_agent(session, fenced, wait, now)
        else:
            fail_or_retry(session, fenced, f"could not start agent: {error}", now=now)

    def _park_before_launch(self, task: Task, park: Park, now: float) -> bool:
        """Park without launching; a wait on an unavailable agent keeps its reason as the error
        (the task's provider stays the one it last ran on)."""
        extra = {"provider": park.provider} if park.agent is None else {"error": park.reason}
        return self._settle_unclaimed(
            task.key,
            TaskState.PARKED,
            now,
            kind=EventKind.TASK_PARKED,
            level="warning",
            message=f"{task.key} parked before launch: {park.reason}",
            not_before=park.until,
            waiting_on_provider=park.provider,
            parked_at=now,
            data={"provider": park.provider, "until": park.until, "agent": park.agent},
            **extra,
        )

    def _park_on_budget(self, key: str, hold: Hold, now: float) -> bool:
        with self.runtime.store.write() as session:
            fresh = self._unclaimed(session, key)
            if fresh is None:
                return False
            budgets.park_on_budget(session, fresh, hold, now)
        return True

    def _fail_unassignable(self, task: Task, reason: str, now: float) -> bool:
        self.runtime.settle_later(task.job_id)
        with self.runtime.store.write() as session:
            fresh = self._unclaimed(session, task.key)
            if fresh is None:
                return False
            fail_task(session, fresh, reason, f"cannot run: {reason}", now=now)
            self._record_unassignable(session, fresh, reason, now)
        return True

    def _record_unassignable(self, session: Session, task: Task, reason: str, now: float) -> None:
        """No agent can take the task: an execution row and error.txt all the same."""
        runtime = self.runtime
        execution = unclaimed_execution(
            task,
            engine_id=runtime.engine_id,
            artifacts=artifacts_root(runtime.workspace),
            error=f"cannot run: {reason}",
            now=now,
        )
        failure = StartFailure(Stage.SELECTION, reason)
        write_artifacts(Path(execution.artifact_dir or ""), error_text(task, None, failure))
        session.add(execution)

    def _settle_unclaimed(self, key: str, target: TaskState, now: float, **change: Any) -> bool:
        """Move a still-unclaimed queued task; False if another engine got to it first."""
        with self.runtime.store.write() as session:
            fresh = self._unclaimed(session, key)
            if fresh is None:
                return False
            move_task(session, fresh, target, now=now, **change)
        return True

    @staticmethod
    def _unclaimed(session: Session, key: str) -> Task | None:
        """The task, locked, while still queued and unclaimed; None when another session
        holds its row (it is passed over, not waited for) or it moved on."""
        query = (
            select(Task)
            .where(col(Task.key) == key)
            .with_for_update(skip_locked=True)
            .execution_options(populate_existing=True)
        )
        fresh = session.exec(query).first()
        if fresh is None or fresh.state != TaskState.QUEUED or fresh.execution_id:
            return None
        return fresh


def _changes_more(claim: Claim, said: tuple[str, ...]) -> bool:
    """Whether a start writes more than its execution's row (see ``_record_starts``)."""
    return claim.selected.via == "pin" or bool(said) or claim.task.keep_work


def _describe(failed: str | AgentFailure | Deferred) -> str:
    if isinstance(failed, AgentFailure):
        return f"{failed.kind.value}: {failed.reason} (fix: {failed.fix})"
    return str(failed)

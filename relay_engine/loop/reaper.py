"""Reaping agents: read their output, stop the ones that must stop, record every exit.

What an exit means is decided by :func:`outcomes.judge_exit`; this module gathers the
facts (exit code, parsed report, result file, merge into the job branch) and writes all
of a tick's exits in one transaction.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.agents.adapters.base import AgentReport
from relay_engine.agents.codex_rollout import rollout_readings
from relay_engine.agents.runner import cap_file
from relay_engine.contracts.pricing import execution_spend
from relay_engine.core.merge_prep import RECORD_FILE, judge_checks, parse_record
from relay_engine.core.outcomes import (
    GONE,
    ExitFacts,
    Outcome,
    OutcomeKind,
    StopReason,
    ends_session,
    judge_exit,
    redact_outcome,
)
from relay_engine.core.quota import QuotaReading
from relay_engine.core.selection import Selected, pick_agent
from relay_engine.core.states import TaskState
from relay_engine.git.worktrees import WorkspaceError
from relay_engine.loop.asking import Asking, record_denial
from relay_engine.loop.health import excuse, low_space
from relay_engine.loop.live import FinishedExecution, LiveExecution
from relay_engine.loop.rounds import PlannerRounds
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops import agents as agent_status
from relay_engine.ops import asks, assignments, budgets, memory, quota
from relay_engine.ops.answers import vet_answer
from relay_engine.ops.completion import (
    LimitDecision,
    apply_outcome,
    fenced_tasks,
    record_limit,
)
from relay_engine.store.events import EventKind, events_together, record_event
from relay_engine.store.plain_rows import update_by_id
from relay_engine.store.read_model.fleet import read_fleet
from relay_engine.store.schema import Execution, Job, Task

OUTPUT_SAVE_INTERVAL_S = 1.0
STDERR_WATCH_INTERVAL_S = 2.0
ROLLOUT_WATCH_INTERVAL_S = 5.0
log = logging.getLogger(__name__)


STOPPED_BY_OPERATOR = (TaskState.CANCELLED, TaskState.DROPPED)


class Reaper:
    """The reap step of the tick: the engine's live processes, from output to outcome."""

    def __init__(self, runtime: EngineRuntime, *, plans: PlannerRounds) -> None:
        self.runtime = runtime
        self.plans = plans
        self.asking = Asking(runtime)
        self._last_output_save = 0.0

    def reap(self, now: float, *, fence: bool = True) -> bool:
        """Pump live output, stop what must stop, and write down every exit in one go.

        Order per exit: judge it (from its own artifacts), then -- only while the execution
        still owns its task -- merge its worktree, then the fenced write. An exit whose write
        fails (database busy, disk full) stays in ``runtime.exited`` and is written on a
        later tick, without merging again.
        """
        runtime = self.runtime
        if not runtime.live and not runtime.exited:
            return False
        if fence and runtime.live:
            self._fence_check()
        wall = datetime.now().astimezone()
        windows: list[tuple[LiveExecution, list[QuotaReading]]] = []
        for live in list(runtime.live.values()):
            report = live.pump(wall)
            self.asking.collect(live)
            if (seen := self._new_windows(live, report, now)) is not None:
                windows.append((live, seen))
            if report.limit is not None and live.stop_reason is None:
                live.stop(StopReason.LIMITED, 2.0)
            if self._watch_stderr(live, now):  # what it saw may be a failure
                report = live.parser.report
            if report.failure is not None and live.stop_reason is None:
                live.stop(StopReason.UNAVAILABLE, 2.0)  # e.g. codex waiting for the network
            if live.timed_out(now) and live.stop_reason is None:
                live.stop(StopReason.TIMEOUT, runtime.config.engine.cancel_grace_seconds)
            if live.process.poll() is not None:
                if live.process.fenced and live.stop_reason is None:
                    live.stop_reason = StopReason.FENCED  # refunded if still ours, else lost
                finished = self._judge(live, wall)
                runtime.note_ended(live)
                del runtime.live[live.execution_id]
                runtime.exited[live.execution_id] = finished
        asked = self.asking.step(now)
        if windows:
            with runtime.store.write() as session:
                for live, readings in windows:
                    self._record_windows(session, live, readings, now)
        if not runtime.exited:
            return asked or bool(windows)
        self._settle_worktrees(now)
        self._write_exits(now)
        return True

    def _new_windows(
        self, live: LiveExecution, report: AgentReport, now: float, *, final: bool = False
    ) -> list[QuotaReading] | None:
        """Quota windows the run reported since they were last recorded (codex: from its
        session log, looked at every few seconds), so a running agent that crosses its
        watermark stops new work on its account at once; None when nothing changed."""
        readings = list(report.windows)
        if live.provider == "codex" and report.session_id:
            if final or now - live.extra.get("rollout_seen", 0.0) >= ROLLOUT_WATCH_INTERVAL_S:
                live.extra["rollout_seen"] = now
                live.extra["rollout"] = rollout_readings(live.process.spec.env, report.session_id)
            readings += live.extra.get("rollout", [])
        if not readings or tuple(readings) == live.extra.get("windows"):
            return None
        live.extra["windows"] = tuple(readings)
        return readings

    def _record_windows(
        self, session: Session, live: LiveExecution, readings: list[QuotaReading], now: float
    ) -> None:
        config = self.runtime.config
        agent = config.agent(live.agent_id)
        key = agent.account_key if agent is not None else live.provider
        quota.record_windows(
            session, key, readings, agent_id=live.agent_id, stop_at=config.stop_at(key), now=now
        )
        self.runtime.forget_fleet()  # a watermark crossed parks the account's next starts

    def _watch_stderr(self, live: LiveExecution, now: float) -> bool:
        """Some CLIs retry a dead network on stderr only (gemini): look every few seconds.
        Whether it looked (and the parser may have noted something)."""
        if now - live.extra.get("stderr_seen", 0.0) < STDERR_WATCH_INTERVAL_S:
            return False
        live.extra["stderr_seen"] = now
        live.parser.notice_stderr(live.process.stderr_tail())
        return True

    def _fence_check(self) -> None:
        """Stop processes whose task was taken from us: cancelled (or dropped) by the
        operator, or recovered by another engine after a lost lease."""
        with self.runtime.store.read() as session:
            mine = list(self.runtime.live)
            owned = set(
                session.exec(select(Task.execution_id).where(col(Task.execution_id).in_(mine)))
            )
            owned |= self.plans.owned_executions(session, mine)
            gone = [lv for eid, lv in self.runtime.live.items()
                    if eid not in owned and lv.stop_reason is None]  # fmt: skip
            keys = [lv.task_key for lv in gone if lv.task_key]
            stopped = set(
                session.exec(
                    select(Task.key).where(
                        col(Task.key).in_(keys), col(Task.state).in_(STOPPED_BY_OPERATOR)
                    )
                )
            ) if keys else set()  # fmt: skip
        grace = self.runtime.config.engine.cancel_grace_seconds
        for live in gone:
            cancelled = live.task_key in stopped
            live.stop(StopReason.CANCELLED if cancelled else StopReason.LOST, grace)

    def _judge(self, live: LiveExecution, wall: datetime) -> FinishedExecution:
        """What the exit means, from the agent's own output (its worktree is settled later)."""
        live.drain(wall)
        exit_code = live.process.poll() or 0
        stderr_tail = live.process.stderr_tail()
        report = live.parser.finish(exit_code, stderr_tail, wall)
        limit = self.runtime.config.engine.max_artifact_bytes
        for path in (live.process.stdout_path, live.process.stderr_path):
            cap_file(path, limit)
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
                failure=report.failure,
                resumed=bool(live.extra.get("resumed")),
            )
        )
        condition = self.runtime.condition or low_space(self.runtime.workspace / ".relay")
        outcome = excuse(outcome, stderr_tail, condition)
        if checks := live.extra.get("checks"):
            outcome = judge_checks(outcome, checks, parse_record(live.agent_file(RECORD_FILE)))
        for artifact in (live.process.stdout_path, live.process.stderr_path):
            try:
                self.runtime.redactor.file(artifact)
            except OSError as error:  # a full disk must not lose the exit itself
                log.warning("could not redact %s: %s", artifact, error)
        live.last_output = self.runtime.redactor.text(live.last_output)
        return FinishedExecution(
            live, redact_outcome(outcome, self.runtime.redactor), report, exit_code, result_file
        )

    def _settle_worktrees(self, now: float) -> None:
        """Merge (or keep) the work of exits whose task is still theirs; never anyone else's.

        The ownership check renews the task's lease in the same statement, so the task
        stays this execution's for a whole lease while git runs.
        """
        runtime = self.runtime
        todo = [
            e
            for e in runtime.exited.values()
            if not e.tree_settled
            and e.live.plan_id is None
            and runtime.worktrees.has_tree(e.live.job_id, e.live.task_key)
        ]
        if not todo:
            return
        claims = {e.live.task_key or "": e.live.execution_id for e in todo}
        with runtime.store.write() as session:
            owned = fenced_tasks(session, claims)
            for row in owned.values():
                row.lease_expires_at = now + runtime.config.engine.lease_seconds
                session.add(row)
        for exit_ in todo:
            task = owned.get(exit_.live.task_key or "")
            settled = replace(exit_, tree_settled=True)
            if task is not None and exit_.outcome.kind not in GONE:
                settled = self._settle_worktree(settled, task)
            runtime.exited[exit_.live.execution_id] = settled

    def _settle_worktree(self, exit_: FinishedExecution, task: Task) -> FinishedExecution:
        """Merge a succeeded task's work into the job branch; a conflict fails the attempt."""
        live, outcome = exit_.live, exit_.outcome
        with self.runtime.store.read() as session:
            job = session.get(Job, live.job_id)
        if job is None:
            return exit_
        succeeded = outcome.kind is OutcomeKind.SUCCEEDED
        try:
            merge = self.runtime.worktrees.finish(
                job.repo_path, job.id, task.task_id, task.title, succeeded=succeeded, kind=task.kind
            )
        except WorkspaceError as error:
            if not succeeded:
                return exit_
            return replace(
                exit_, outcome=Outcome(OutcomeKind.FAILED, error=f"could not merge: {error}")
            )
        if merge is None:
            return exit_
        if not merge.merged:
            paths = ", ".join(merge.conflicts) or "unknown paths"
            failed = Outcome(
                OutcomeKind.FAILED,
                summary=outcome.summary,
                data=outcome.data,
                error=f"merge conflict with the job branch in: {paths}",
            )
            return replace(exit_, outcome=failed)
        merged = replace(outcome, diffstat=merge.diffstat.strip() or None, commit=merge.commit)
        return replace(exit_, outcome=merged, merge=merge)

    def _write_exits(self, now: float) -> None:
        """One fenced transaction for every pending exit; a stale one is recorded as lost."""
        runtime = self.runtime
        pending = list(runtime.exited.values())
        claims = {e.live.task_key: e.live.execution_id for e in pending if e.live.task_key}
        with runtime.store.write() as session:
            # The tasks' locks and their dependents (drafts to release) in one read.
            owned = fenced_tasks(session, claims, with_dependents=True)
            # An event or more per exit, and the tasks' new values, in one statement.
            with events_together(session, changes_of=Task):
                rows, stale = self._apply_exits(session, pending, owned, now)
        self._spawns_written(rows)
        daily = _daily_budgets(runtime)
        if any(_changes_fleet(e, daily) for e in pending):
            runtime.forget_fleet()
        for exit_ in pending:
            runtime.exited.pop(exit_.live.execution_id, None)
        for exit_ in stale:
            self._undo_merge(exit_)

    def _apply_exits(
        self,
        session: Session,
        pending: list[FinishedExecution],
        owned: dict[str, Task],
        now: float,
    ) -> tuple[list[dict[str, Any]], list[FinishedExecution]]:
        """The executions' rows and their outcomes, written; the rows, and the exits that
        finished after their task moved on (stale: a merge of theirs is undone)."""
        kept = {}
        for exit_ in pending:
            live = exit_.live
            if live.plan_id is not None:
                kept[live.execution_id] = self.plans.owns(session, live.plan_id, live.execution_id)
            else:
                kept[live.execution_id] = live.task_key in owned
        # The rows first, in one statement: applying an outcome may still refine one.
        rows = self._with_spawns(
            [self._execution_row(session, e, now, kept[e.live.execution_id]) for e in pending]
        )
        update_by_id(session, Execution, rows)
        stale = []
        for exit_ in pending:
            live = exit_.live
            last = self._new_windows(live, exit_.report, now, final=True)
            if last is not None:
                self._record_windows(session, live, last, now)
            if live.plan_id is not None:
                self.plans.complete(session, exit_, now)
            else:
                self.on_complete(session, live, exit_.outcome, now, owned.get(live.task_key or ""))
            if not kept[live.execution_id] and exit_.outcome.kind not in GONE:
                stale.append(exit_)
        spent = {e.live.job_id for e in pending if _spent_anything(e)}
        if spent:  # a budget's level can only move with spend
            budgets.announce(session, spent, self.runtime.config.engine.budget_warn_at, now)
        asked = [e.live.execution_id for e in pending if e.live.extra.get("asked")]
        asks.cancel_open(session, asked, now)
        return rows, stale

    def _undo_merge(self, exit_: FinishedExecution) -> None:
        if exit_.merge is None:
            return
        with self.runtime.store.read() as session:
            job = session.get(Job, exit_.live.job_id)
        if job is not None:
            self.runtime.worktrees.undo_merge(job.repo_path, job.id, exit_.merge)

    def _execution_row(
        self, session: Session, exit_: FinishedExecution, now: float, kept: bool
    ) -> dict[str, Any]:
        """The execution's row; its outcome only when it still owned its task, else lost."""
        live, report, outcome = exit_.live, exit_.report, exit_.outcome
        kind, error = outcome.kind.value, outcome.error
        if not kept and outcome.kind not in GONE:
            task = session.get(Task, live.task_key) if live.task_key else None
            cancelled = task is not None and task.state in STOPPED_BY_OPERATOR
            kind = (OutcomeKind.CANCELLED if cancelled else OutcomeKind.LOST).value
            why = "its task was cancelled" if cancelled else "its task moved on"
            error = f"finished ({outcome.kind.value}) after {why}: result discarded"
            _note_lost(session, live, outcome, error, now)
        agent = self.runtime.config.agent(live.agent_id)
        model = report.model or (agent.model if agent else None)
        spend = execution_spend(
            reported_cost=report.cost_usd,
            model=model,
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
            cached_tokens=report.cached_tokens,
            prices=self.runtime.config.prices,
        )
        _note_cli_denials(session, live, now)
        return {
            "id": live.execution_id,
            "ended_at": now,
            "exit_code": exit_.exit_code,
            "outcome": kind,
            "error": error,
            "session_id": report.session_id,
            "input_tokens": report.input_tokens,
            "output_tokens": report.output_tokens,
            "cached_tokens": report.cached_tokens,
            "model": model,
            "cost_usd": spend.cost_usd,
            "cost_estimated": spend.estimated,
            "last_output": (live.last_output or live.saved_output or "")[:300] or None,
            "denials": [d.as_json() for d in live.all_denials()],
        }

    def on_complete(
        self,
        session: Session,
        live: LiveExecution,
        outcome: Outcome,
        now: float,
        task: Task | None,
    ) -> None:
        """Apply the outcome to ``task`` (None when it was taken from this execution)."""
        if outcome.kind in GONE or task is None:
            return
        outcome = vet_answer(session, task, outcome)
        decision = self._limit_decision(session, task, outcome, now) if outcome.limit else None
        wait = None
        if outcome.kind is OutcomeKind.UNAVAILABLE and outcome.failure is not None:
            wait = agent_status.decide_agent_wait(
                session, task, outcome.failure, self.runtime.config, now
            )
        elif outcome.kind in (OutcomeKind.SUCCEEDED, OutcomeKind.FAILED) and (
            self.runtime.may_be_unavailable(live.agent_id)  # e.g. a probe got through
        ):
            agent_status.note_worked(session, live.agent_id, now)
        self._carry_over(session, task, live, outcome, decision, now)
        apply_outcome(session, task, outcome, now=now, limit_decision=decision, agent_wait=wait)
        self.runtime.settle_later(task.job_id)

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
            stale=ends_session(outcome),
            now=now,
        )
        if outcome.kind is OutcomeKind.SUCCEEDED:
            assignments.add_memory(session, task, outcome.summary, now)
        if added := live.memory_added():  # a failed attempt's lessons are kept too
            notes = [self.runtime.redactor.text(note) for note in added]  # they reach prompts
            memory.add_agent_notes(session, memory.scope_of(task, live.execution_id), notes, now)
        if not (decision and decision.swap_to):
            return
        pin = assignments.active_pin(session, task)
        if pin and pin.agent_id != decision.swap_to:
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
        """Record the limit on the run's account, then move the task: to another account of
        the same provider first, another provider next, else park until the reset."""
        signal = outcome.limit
        assert signal is not None
        config = self.runtime.config
        agent = config.agent(task.agent or "")
        key = agent.account_key if agent is not None else (task.provider or signal.provider)
        limit = record_limit(session, key, signal.reset_at, signal.source_text, now)
        fleet = read_fleet(session, config, now)
        prefer = agent.provider if agent is not None else None
        choice = pick_agent(
            task, config.agents, fleet, now, exclude=frozenset({key}), prefer=prefer
        )
        reason = signal.source_text[:200]
        if isinstance(choice, Selected):
            return LimitDecision(choice.agent_id, None, key, reason)
        return LimitDecision(None, limit.reset_at, key, reason)

    def save_output(self, now: float) -> None:
        """Every second: the last line of each agent's output (what the console's Running
        pane shows) and where agents started since run, in one write."""
        runtime = self.runtime
        if now - self._last_output_save < OUTPUT_SAVE_INTERVAL_S:
            return
        changed = [lv for lv in runtime.live.values() if lv.last_output != lv.saved_output]
        if not changed and not runtime.unwritten_spawns:
            return
        self._last_output_save = now
        rows = self._with_spawns(
            [
                {
                    "id": live.execution_id,
                    "last_output": runtime.redactor.text(live.last_output[:300]),
                    "session_id": live.parser.report.session_id,
                }
                for live in changed
            ]
        )
        with runtime.store.write() as session:
            update_by_id(session, Execution, rows)
        for live in changed:
            live.saved_output = live.last_output
        self._spawns_written(rows)

    def _with_spawns(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """These execution rows with where their agents run merged in, when the starter left
        that for the next write (see ``Starter._record_starts``), then the other executions'
        such values: one UPDATE per set of columns writes them all."""
        spawns = dict(self.runtime.unwritten_spawns)
        merged = [row | spawns.pop(row["id"], {}) for row in rows]
        return [*merged, *spawns.values()]

    def _spawns_written(self, rows: list[dict[str, Any]]) -> None:
        """Once their transaction committed: a failed write keeps them for the next."""
        for row in rows:
            self.runtime.unwritten_spawns.pop(row["id"], None)


def _spent_anything(exit_: FinishedExecution) -> bool:
    report = exit_.report
    return bool(report.cost_usd or report.input_tokens or report.output_tokens)


def _daily_budgets(runtime: EngineRuntime) -> bool:
    config = runtime.config
    return any(a.daily_budget_usd is not None for a in config.agents) or any(
        p.daily_budget_usd is not None for p in config.providers.values()
    )


def _changes_fleet(exit_: FinishedExecution, daily_budgets: bool) -> bool:
    """Exits after which limits, agent statuses or daily budgets may read differently."""
    kinds = (OutcomeKind.LIMITED, OutcomeKind.UNAVAILABLE, OutcomeKind.SESSION_GONE)
    if exit_.outcome.kind in kinds or exit_.outcome.limit is not None:
        return True
    return daily_budgets and _spent_anything(exit_)


def _note_lost(
    session: Session, live: LiveExecution, outcome: Outcome, error: str, now: float
) -> None:
    """The event that says a stale execution's late result was discarded."""
    record_event(
        session,
        EventKind.EXECUTION_LOST,
        f"{live.task_key or f'plan {live.plan_id}'}: execution {live.execution_id[:8]} {error}",
        now=now,
        job_id=live.job_id,
        task_key=live.task_key,
        plan_id=live.plan_id,
        level="warning",
        data={"execution": live.execution_id, "outcome": outcome.kind.value},
    )


def _note_cli_denials(session: Session, live: LiveExecution, now: float) -> None:
    """What the CLI refused on its own (a rule of its own mode) is said, never dropped."""
    for denial in live.all_denials():
        if denial.by != "cli":
            continue
        record_denial(session, live, denial, f"{denial.summary} refused by the CLI itself", now)

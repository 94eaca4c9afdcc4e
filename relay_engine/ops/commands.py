"""The command inbox: operator requests as durable rows, applied exactly once by whichever
process sees them first.

An operator command is a typed model (:class:`CancelTask`, :class:`Replan`, …) stored as its
kind and payload, so a console on one host can steer engines on another. This module is the
only place that reads payloads: it parses a row back into its model and applies it through
the typed operations (:mod:`~relay_engine.ops.tasks`, :mod:`~relay_engine.ops.jobs`, …),
which everything else calls directly.

Any process may apply a command (the ``relay`` CLI does so right after storing it), because
applying only changes rows: an engine that owns a cancelled task's process notices on its
next tick that its execution id no longer matches (fencing) and kills the process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlmodel import Session, col, select, update

from relay_engine.ops import (
    agents,
    asks,
    assignments,
    budgets,
    completion,
    jobs,
    plans,
    pulls,
    tasks,
)
from relay_engine.ops.refusals import Refused
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Command


class OperatorCommand(BaseModel):
    """One request of the operator's; ``kind`` names it in the command row."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    kind: ClassVar[str]

    def apply(self, session: Session, now: float) -> str:
        """Apply inside the caller's transaction; the outcome the operator reads."""
        raise NotImplementedError

    def job_id(self) -> str | None:
        """The job the command is about, for the events it leads to."""
        return getattr(self, "job", None) or (getattr(self, "task", None) or "").partition("/")[0]

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class CancelTask(OperatorCommand):
    kind: ClassVar[str] = "cancel"
    task: str
    reason: str = "cancelled by operator"

    def apply(self, session: Session, now: float) -> str:
        return tasks.cancel_task(session, tasks.find_task(session, self.task), self.reason, now)


class RetryTask(OperatorCommand):
    kind: ClassVar[str] = "retry"
    task: str

    def apply(self, session: Session, now: float) -> str:
        return tasks.retry_task(session, tasks.find_task(session, self.task), now)


class DropTask(OperatorCommand):
    """Not needed after all: the task never runs and its dependents go on without it."""

    kind: ClassVar[str] = "drop"
    task: str
    by: str = "operator"

    def apply(self, session: Session, now: float) -> str:
        task = tasks.find_task(session, self.task)
        outcome = tasks.drop_task(session, task, now, by=self.by)
        completion.release_dependents(session, task, now=now)
        tasks.reactivate_job(session, task, now)
        return outcome


class CancelJob(OperatorCommand):
    kind: ClassVar[str] = "cancel_job"
    job: str

    def apply(self, session: Session, now: float) -> str:
        return jobs.cancel_job(session, jobs.find_job(session, self.job), now)


class Replan(OperatorCommand):
    kind: ClassVar[str] = "replan"
    job: str
    guidance: str | None = None

    def apply(self, session: Session, now: float) -> str:
        return plans.replan(session, jobs.find_job(session, self.job), self.guidance, now)


class ApproveWave(OperatorCommand):
    kind: ClassVar[str] = "approve"
    job: str

    def apply(self, session: Session, now: float) -> str:
        return plans.approve_wave(session, jobs.find_job(session, self.job), now)


class InstallPlan(OperatorCommand):
    kind: ClassVar[str] = "install_plan"
    job: str
    plan: Any
    guidance: str | None = None

    def apply(self, session: Session, now: float) -> str:
        job = jobs.find_job(session, self.job)
        return plans.install_plan(session, job, self.plan, now, guidance=self.guidance)


class Pin(OperatorCommand):
    """A task, or a job's workstream (for one role), to an agent."""

    kind: ClassVar[str] = "pin"
    agent: str
    task: str | None = None
    job: str | None = None
    workstream: str = ""
    role: str = "implementer"

    def apply(self, session: Session, now: float) -> str:
        if self.task:
            task = tasks.find_task(session, self.task)
            return assignments.pin_task(session, task, self.agent, now)
        if not self.job:
            raise Refused("pin needs a job (and workstream) or a task")
        return assignments.pin_workstream(
            session, self.job, self.workstream, self.role, self.agent, now
        )


class RaiseBudget(OperatorCommand):
    kind: ClassVar[str] = "budget"
    job: str
    add_usd: float | None = None
    add_tokens: int | None = None

    def apply(self, session: Session, now: float) -> str:
        job = jobs.find_job(session, self.job)
        return budgets.raise_budget(
            session, job, now, add_usd=self.add_usd, add_tokens=self.add_tokens
        )


class ResetAgent(OperatorCommand):
    kind: ClassVar[str] = "agent.reset"
    agent: str

    def apply(self, session: Session, now: float) -> str:
        return agents.reset_agent(session, self.agent, now)


class Merge(OperatorCommand):
    kind: ClassVar[str] = "merge"
    job: str
    force: bool = False

    def apply(self, session: Session, now: float) -> str:
        job = jobs.find_job(session, self.job)
        return pulls.request_merge(session, job, now, force=self.force)


class Close(OperatorCommand):
    kind: ClassVar[str] = "close"
    job: str

    def apply(self, session: Session, now: float) -> str:
        return pulls.request_close(session, jobs.find_job(session, self.job), now)


class AnswerAsk(OperatorCommand):
    """Allow, deny or answer what an agent asked; ``always`` adds the rule for a scope."""

    kind: ClassVar[str] = "answer"
    ask: int
    answer: Literal["allow", "deny", "answer"]
    text: str | None = None
    always: Literal["task", "job", "agent"] | None = None
    by: str = "operator"

    def apply(self, session: Session, now: float) -> str:
        ask = asks.find_ask(session, self.ask)
        return asks.answer_ask(
            session, ask, self.answer, now, text=self.text, always=self.always, by=self.by
        )

    def job_id(self) -> str | None:
        return None


class TakeOver(OperatorCommand):
    """The operator works on the task in the agent's own CLI; relay keeps its hands off."""

    kind: ClassVar[str] = "takeover"
    task: str
    by: str = "operator"

    def apply(self, session: Session, now: float) -> str:
        return tasks.take_over(session, tasks.find_task(session, self.task), self.by, now)


class HandBack(OperatorCommand):
    """``done``: the task succeeded with what its worktree held (merged by whoever sent
    this, before sending it); else it runs on headless in the same session, reading
    ``text``."""

    kind: ClassVar[str] = "handback"
    task: str
    done: bool = False
    text: str | None = None

    def apply(self, session: Session, now: float) -> str:
        task = tasks.find_task(session, self.task)
        outcome = tasks.hand_back(session, task, now, done=self.done, text=self.text)
        if self.done:
            completion.release_dependents(session, task, now=now)
        return outcome


class Say(OperatorCommand):
    kind: ClassVar[str] = "say"
    task: str
    text: str

    def apply(self, session: Session, now: float) -> str:
        return tasks.say(session, tasks.find_task(session, self.task), self.text, now)


COMMANDS: dict[str, type[OperatorCommand]] = {
    c.kind: c
    for c in (
        CancelTask, RetryTask, CancelJob, Replan, ApproveWave, InstallPlan, Pin, RaiseBudget,
        ResetAgent, Merge, Close, AnswerAsk, TakeOver, HandBack, Say, DropTask,
    )
}  # fmt: skip


class UnsupportedCommand(LookupError):
    """A row of a kind this relay does not know (written by a newer relay, say)."""


@dataclass(frozen=True)
class AppliedCommand:
    id: int
    kind: str
    outcome: str
    ok: bool


def enqueue(store: Store, command: OperatorCommand, *, now: float | None = None) -> int:
    """Store a command for whichever process applies it first; its id."""
    return store.enqueue_command(command.kind, command.payload(), now=now)


def parse(kind: str, payload: dict[str, Any] | None) -> OperatorCommand:
    """The typed command a row holds; :class:`Refused` names what is wrong with it."""
    model = COMMANDS.get(kind)
    if model is None:
        raise UnsupportedCommand(f"{kind}: not supported yet by this engine")
    try:
        return model.model_validate(payload or {})
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "payload"
        raise Refused(f"{where}: {problem['msg']}") from None


def apply_pending(store: Store, applier: str, now: float) -> list[AppliedCommand]:
    """Apply every command nobody has applied yet, each in its own transaction."""
    with store.read() as session:
        query = (
            select(Command.id).where(col(Command.applied_at).is_(None)).order_by(col(Command.id))
        )
        pending = list(session.exec(query))
    return [a for a in (_apply_one(store, cid, applier, now) for cid in pending) if a]


def _apply_one(
    store: Store, command_id: int | None, applier: str, now: float
) -> AppliedCommand | None:
    with store.write(wakes=True) as session:  # what it changed, every engine sees at once
        claimed = session.exec(
            update(Command)
            .where(col(Command.id) == command_id, col(Command.applied_at).is_(None))
            .values(applied_at=now, applied_by=applier)
        )
        if claimed.rowcount != 1:
            return None  # another engine applied it first
        row = session.get(Command, command_id)
        assert row is not None
        outcome, ok = _run(session, row, now)
        row.outcome = outcome
        row.succeeded = ok
        session.add(row)
    return AppliedCommand(row.id or 0, row.kind, outcome, ok)


def _run(session: Session, row: Command, now: float) -> tuple[str, bool]:
    payload = row.payload or {}
    job_id = payload.get("job") or str(payload.get("task", "")).partition("/")[0] or None
    try:
        command = parse(row.kind, payload)
        job_id = command.job_id() or job_id
        with session.begin_nested():
            return command.apply(session, now), True
    except UnsupportedCommand as unsupported:
        kind, message = EventKind.COMMAND_UNSUPPORTED, str(unsupported)
    except ValueError as error:  # Refused, or an illegal transition
        kind, message = EventKind.COMMAND_REJECTED, f"{row.kind} refused: {error}"
    record_event(session, kind, message, now=now, job_id=job_id, level="warning")
    return message, False


def wait_for_outcome(store: Store, command_id: int, timeout: float = 10.0) -> AppliedCommand | None:
    """The outcome of a command, whichever process applied it; None if nobody did in time."""
    deadline = time.monotonic() + timeout
    while True:
        with store.read() as session:
            command = session.get(Command, command_id)
        if command is not None and command.applied_at is not None:
            return AppliedCommand(
                command_id, command.kind, command.outcome or "", bool(command.succeeded)
            )
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)

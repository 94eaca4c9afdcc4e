"""The change feed: every state change appends one event, in the same transaction.

Events are how consoles and notifications learn what happened, so their kinds are named
here, once: the engine records them, and the console, notifications and tests match on
the same constants. ``EventKind`` is a ``StrEnum``: the rows keep plain strings, and a
kind read back from the database compares equal to its constant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlmodel import Session

from relay_engine.store.plain_rows import insert_rows
from relay_engine.store.schema import Event


class EventKind(StrEnum):
    JOB_SUBMITTED = "job.submitted"
    JOB_STARTED = "job.started"
    JOB_WAITING = "job.waiting"
    JOB_BLOCKED = "job.blocked"
    JOB_REACTIVATED = "job.reactivated"
    JOB_ACTIVE = "job.active"
    JOB_REVIEWING = "job.reviewing"
    JOB_READY = "job.ready"
    JOB_FINISHED = "job.finished"

    SCHEDULE_SUBMITTED = "schedule.submitted"
    SCHEDULE_RUN = "schedule.run"  # a slot came due and its run (a job) was made
    SCHEDULE_MISSED = "schedule.missed"  # slots passed while no engine ran
    SCHEDULE_FAILED = "schedule.failed"  # a due slot's run could not be made
    SCHEDULE_PAUSED = "schedule.paused"
    SCHEDULE_RESUMED = "schedule.resumed"  # slots that passed while paused are skipped
    SCHEDULE_REMOVED = "schedule.removed"  # its runs already made stay

    TASK_QUEUED = "task.queued"
    TASK_STARTED = "task.started"
    TASK_SUCCEEDED = "task.succeeded"
    TASK_FAILED = "task.failed"
    TASK_RETRYING = "task.retrying"
    TASK_RETRIED = "task.retried"
    TASK_CANCELLED = "task.cancelled"
    TASK_DROPPED = "task.dropped"
    TASK_PARKED = "task.parked"
    TASK_RESUMED = "task.resumed"
    TASK_RELEASED = "task.released"
    TASK_RECOVERED = "task.recovered"
    TASK_SWAPPED = "task.swapped"
    TASK_BLOCKED = "task.blocked"
    TASK_UNBLOCKED = "task.unblocked"
    TASK_PINNED = "task.pinned"
    TASK_TROUBLESHOOTING = "task.troubleshooting"
    TASK_TROUBLESHOT = "task.troubleshot"
    TASK_GAVE_UP = "task.gave_up"

    PLAN_CREATED = "plan.created"
    PLAN_STARTED = "plan.started"
    PLAN_SUCCEEDED = "plan.succeeded"
    PLAN_FAILED = "plan.failed"
    PLAN_REJECTED = "plan.rejected"
    PLAN_RECOVERED = "plan.recovered"
    PLAN_MATERIALISED = "plan.materialised"
    WAVE_ASSESSING = "wave.assessing"
    WAVE_APPROVED = "wave.approved"
    GATE_HELD = "gate.held"

    REVIEW_QUEUED = "review.queued"
    REVIEW_APPROVE = "review.approve"
    REVIEW_CHANGES = "review.changes"
    REVIEW_INVALID = "review.invalid"
    REVIEW_STALE = "review.stale"
    REVIEW_FIXING = "review.fixing"
    PR_OPENED = "pr.opened"
    PR_HEAD_MOVED = "pr.head_moved"
    PR_CONFLICT = "pr.conflict"
    PR_PREPARING = "pr.preparing"  # a merge_prep task prepares the head to merge
    PR_MERGE_REQUESTED = "pr.merge_requested"
    PR_CLOSE_REQUESTED = "pr.close_requested"
    PR_MERGED = "pr.merged"
    PR_CLOSED = "pr.closed"
    PR_ERROR = "pr.error"

    PROVIDER_LIMITED = "provider.limited"
    PROVIDER_RECOVERED = "provider.recovered"
    PROVIDER_QUOTA = "provider.quota"  # an account crossed its watermark: nothing new starts
    AGENT_UNAVAILABLE = "agent.unavailable"
    AGENT_READY = "agent.ready"
    ASSIGNMENT_PINNED = "assignment.pinned"
    BUDGET_WARNING = "budget.warning"
    BUDGET_EXHAUSTED = "budget.exhausted"
    BUDGET_RAISED = "budget.raised"
    EXECUTION_LOST = "execution.lost"
    AGENT_NEEDS_INPUT = "agent.needs_input"
    AGENT_DENIED = "agent.denied"
    ASK_ANSWERED = "ask.answered"
    ASK_EXPIRED = "ask.expired"
    TASK_HELD = "task.held"
    TASK_HANDED_BACK = "task.handed_back"
    OPERATOR_SAID = "operator.said"
    MEMORY_ADDED = "memory.added"  # an agent noted something for the job's later tasks

    ENGINE_STARTED = "engine.started"
    ENGINE_STOPPED = "engine.stopped"
    ENGINE_PAUSED = "engine.paused"
    ENGINE_RESUMED = "engine.resumed"
    CONFIG_RELOADED = "config.reloaded"
    CONFIG_INVALID = "config.invalid"
    CONFIG_WARNING = "config.warning"
    COMMAND_REJECTED = "command.rejected"
    COMMAND_UNSUPPORTED = "command.unsupported"
    NOTIFY_FAILED = "notify.failed"


def record_event(
    session: Session,
    kind: EventKind,
    message: str,
    *,
    now: float,
    job_id: str | None = None,
    task_key: str | None = None,
    plan_id: int | None = None,
    level: str = "info",
    data: dict[str, Any] | None = None,
) -> Event:
    """Append to the change feed inside the caller's transaction."""
    row = NewEvent(kind, message, now, job_id, task_key, plan_id, level, data).row()
    event = Event(**row)
    session.add(event)
    return event


@dataclass(frozen=True)
class NewEvent:
    """An event's row, built one way for :func:`record_event` and for the events
    :func:`append_events` writes together in one statement."""

    kind: EventKind
    message: str
    at: float
    job_id: str | None = None
    task_key: str | None = None
    plan_id: int | None = None
    level: str = "info"
    data: dict[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        return {
            "at": self.at, "job_id": self.job_id, "task_key": self.task_key,
            "plan_id": self.plan_id, "kind": EventKind(self.kind).value, "level": self.level,
            "message": self.message, "data": self.data,
        }  # fmt: skip


def append_events(session: Session, events: Sequence[NewEvent]) -> None:
    """Append these events to the change feed in one INSERT, without ORM objects: for the
    writes every task makes (its claim's ``task.started``), where building an ``Event``
    and flushing it cost more than the rest of the statement. The session is flushed
    first, so the feed keeps the order the transaction recorded its events in."""
    if events:
        session.flush()
        insert_rows(session, Event, [event.row() for event in events])

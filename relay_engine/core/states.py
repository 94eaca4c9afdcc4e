"""State machines of tasks, plans, jobs and pull requests as transition tables.

Every state change in relay goes through :func:`check_task`, :func:`check_plan`,
:func:`check_job` or :func:`check_pull`, so an impossible change (a SUCCEEDED task running again, say)
raises at the point where it would happen instead of corrupting the job graph.

Pure: the tables and their checks, nothing else.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar


class IllegalTransition(ValueError):
    """A state change that the state machine does not allow."""


class TaskState(StrEnum):
    DRAFT = "DRAFT"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    PARKED = "PARKED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    HELD = "HELD"  # an operator took it over in the agent's own CLI: no engine touches it
    DROPPED = "DROPPED"  # not needed after all: never runs; its dependents go on without it


class PlanState(StrEnum):
    PLANNING = "PLANNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SUPERSEDED = "SUPERSEDED"


class JobState(StrEnum):
    DRAFT = "DRAFT"  # waiting on the jobs it comes ``after``
    ACTIVE = "ACTIVE"
    REVIEWING = "REVIEWING"  # work done, pull request open, final review queued or running
    READY = "READY"  # final review approved the pull request's current head
    BLOCKED = "BLOCKED"  # a task failed for good: waits for the operator to save it
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    MERGED = "MERGED"
    CLOSED = "CLOSED"


TERMINAL_TASK_STATES = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.DROPPED}
)
ACTIVE_TASK_STATES = frozenset(set(TaskState) - TERMINAL_TASK_STATES)
DONE_TASK_STATES = frozenset({TaskState.SUCCEEDED, TaskState.DROPPED})
"""A dependency in one of these holds nothing up: a dropped task counts as done, empty."""
LIVE_JOB_STATES = frozenset(
    {JobState.DRAFT, JobState.ACTIVE, JobState.REVIEWING, JobState.READY, JobState.BLOCKED}
)
TERMINAL_JOB_STATES = frozenset(set(JobState) - LIVE_JOB_STATES)

_T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _T.DRAFT: frozenset({_T.QUEUED, _T.CANCELLED, _T.DROPPED}),
    # QUEUED -> QUEUED: claim and swap keep the state but change the execution.
    _T.QUEUED: frozenset(
        {_T.QUEUED, _T.RUNNING, _T.PARKED, _T.FAILED, _T.CANCELLED, _T.HELD, _T.DROPPED}
    ),
    _T.RUNNING: frozenset(
        {_T.SUCCEEDED, _T.QUEUED, _T.FAILED, _T.PARKED, _T.CANCELLED, _T.HELD, _T.DROPPED}
    ),
    _T.PARKED: frozenset({_T.QUEUED, _T.CANCELLED, _T.HELD, _T.DROPPED}),
    _T.SUCCEEDED: frozenset(),
    # An operator retry goes back to QUEUED, or to DRAFT while dependencies are unfinished.
    _T.FAILED: frozenset({_T.QUEUED, _T.DRAFT, _T.HELD, _T.DROPPED}),
    _T.CANCELLED: frozenset({_T.QUEUED, _T.DRAFT, _T.DROPPED}),
    # Handed back: done (its worktree committed and merged) or to run on in the same session.
    _T.HELD: frozenset({_T.SUCCEEDED, _T.QUEUED, _T.CANCELLED, _T.DROPPED}),
    _T.DROPPED: frozenset({_T.QUEUED, _T.DRAFT}),  # an operator retry takes it up again
}
DROPPABLE_TASK_STATES = frozenset(TASK_TRANSITIONS) - {_T.SUCCEEDED, _T.DROPPED}
TAKEOVER_STATES = frozenset({_T.QUEUED, _T.RUNNING, _T.PARKED, _T.FAILED})
RETRYABLE_TASK_STATES = frozenset({_T.FAILED, _T.CANCELLED, _T.DROPPED})
"""What an operator retry starts again: the ended states that may go back to QUEUED or DRAFT."""
SUPERSEDABLE_TASK_STATES = frozenset({_T.DRAFT, _T.QUEUED, _T.PARKED})
"""Not started yet, so a replan cancels them (a QUEUED task already claimed runs on)."""

_P = PlanState
PLAN_TRANSITIONS: dict[PlanState, frozenset[PlanState]] = {
    _P.PLANNING: frozenset({_P.PLANNING, _P.SUCCEEDED, _P.FAILED, _P.SUPERSEDED}),
    _P.SUCCEEDED: frozenset({_P.SUPERSEDED, _P.FAILED}),
    _P.FAILED: frozenset({_P.PLANNING}),
    _P.SUPERSEDED: frozenset(),
}

_J = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    _J.DRAFT: frozenset({_J.ACTIVE, _J.CANCELLED}),
    _J.ACTIVE: frozenset(
        {_J.REVIEWING, _J.SUCCEEDED, _J.FAILED, _J.CANCELLED, _J.MERGED, _J.CLOSED, _J.BLOCKED}
    ),
    # Back to ACTIVE for fix work or a replan; SUCCEEDED when the branch holds nothing to merge.
    _J.REVIEWING: frozenset(
        {
            _J.READY,
            _J.ACTIVE,
            _J.SUCCEEDED,
            _J.FAILED,
            _J.CANCELLED,
            _J.MERGED,
            _J.CLOSED,
            _J.BLOCKED,
        }
    ),
    # The operator saves it (retry, drop, replan: ACTIVE; merge what is there: REVIEWING or
    # MERGED) or gives up on it (close, cancel); it never fails by itself.
    _J.BLOCKED: frozenset({_J.ACTIVE, _J.REVIEWING, _J.MERGED, _J.CLOSED, _J.CANCELLED, _J.FAILED}),
    # Back to REVIEWING when the head moves, to ACTIVE for a rebase or a replan.
    _J.READY: frozenset({_J.REVIEWING, _J.ACTIVE, _J.CANCELLED, _J.MERGED, _J.CLOSED}),
    # SUCCEEDED is for jobs without a branch to merge; an operator retry or replan revives it.
    _J.SUCCEEDED: frozenset({_J.ACTIVE}),
    # A job that failed or was cancelled comes back to life when the operator retries a task;
    # its pull request may still be merged or closed by a person.
    _J.FAILED: frozenset({_J.ACTIVE, _J.MERGED, _J.CLOSED}),
    _J.CANCELLED: frozenset({_J.ACTIVE, _J.MERGED, _J.CLOSED}),
    _J.MERGED: frozenset(),
    _J.CLOSED: frozenset(),
}
DONE_JOB_STATES = frozenset({_J.SUCCEEDED, _J.MERGED})
"""The job's work landed: what a job that comes ``after`` it waits for."""


class PullState(StrEnum):
    OPEN = "OPEN"
    MERGED = "MERGED"
    CLOSED = "CLOSED"


PULL_TRANSITIONS: dict[PullState, frozenset[PullState]] = {
    PullState.OPEN: frozenset({PullState.MERGED, PullState.CLOSED}),
    PullState.MERGED: frozenset(),
    PullState.CLOSED: frozenset(),
}


S = TypeVar("S", bound=StrEnum)


def _check(table: dict[S, frozenset[S]], what: str, current: S, target: S) -> S:
    if target not in table[current]:
        raise IllegalTransition(f"{what} cannot go from {current} to {target}")
    return target


def check_task(current: TaskState | str, target: TaskState, *, key: str = "task") -> TaskState:
    """Return ``target`` if a task may move there from ``current``; raise otherwise."""
    return _check(TASK_TRANSITIONS, f"task {key}", TaskState(current), target)


def check_plan(current: PlanState | str, target: PlanState, *, key: str = "plan") -> PlanState:
    return _check(PLAN_TRANSITIONS, key, PlanState(current), target)


def check_job(current: JobState | str, target: JobState, *, key: str = "job") -> JobState:
    return _check(JOB_TRANSITIONS, f"job {key}", JobState(current), target)


def check_pull(
    current: PullState | str, target: PullState, *, key: str = "pull request"
) -> PullState:
    return _check(PULL_TRANSITIONS, key, PullState(current), target)

"""When a fleet with nothing to do right now next needs a look.

An engine that hears wake-ups (:mod:`~relay_engine.store.wakes`) need not read the database
every tick while the fleet only waits: on the operator (an approval, an answer, a merge, a
login), whose commands wake every engine, or on the clock (a provider's reset, a parked
task's next try, a schedule's next slot, a pull request's next check). Between those it
sleeps until the earliest of them or its next heartbeat, whichever comes first. A waiting
fleet used to cost each engine its housekeeping reads every tick, all night: a job left
ready for review, a schedule for tomorrow morning, a provider limited until noon.

The reads here are what the engine asks after its housekeeping found nothing to change:
whether anything is left that only a tick moves on (queued or running tasks, a planner
round), and when the earliest timed wait ends. Whatever they miss is still looked at by the
engine's next heartbeat tick.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, ScalarSelect, bindparam, exists, func, or_
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    LIVE_JOB_STATES,
    PlanState,
    PullState,
    TaskState,
)
from relay_engine.ops.schedules import next_slots
from relay_engine.store.db import ColumnsSelect, select_columns
from relay_engine.store.schema import Job, Plan, ProviderLimit, PullRequest, Schedule, Task


@dataclass(frozen=True)
class Outlook:
    """What the fleet holds, as an engine about to sleep sees it."""

    busy: bool  # something only a tick moves on: a queued or running task, a planner round
    next_at: float | None  # the earliest moment a timed wait ends; None: none is timed


def anything_to_do(session: Session) -> bool:
    """Whether any housekeeping chore may find something to act on: one read instead of
    the chores' dozen, for a fleet whose work is all done."""
    return bool(session.execute(_fleet_work()).scalar())


def read_outlook(session: Session, now: float, check_seconds: float) -> Outlook:
    """The fleet's outlook after a housekeeping pass that changed nothing."""
    params = {"now": now, "checked_after": now - check_seconds}
    busy, parked, reset, checked, retry, acting = session.execute(_waits(), params).one()
    if busy:
        return Outlook(busy=True, next_at=None)
    check = None if checked is None else checked + check_seconds
    ends = _ahead([parked, reset, check, retry, acting, *next_slots(session)], now)
    return Outlook(busy=False, next_at=min(ends, default=None))


def _ahead(moments: Iterable[float | None], now: float) -> list[float]:
    return [moment for moment in moments if moment is not None and moment > now]


@cache
def _fleet_work() -> SelectOfScalar[bool]:
    """What any chore acts on: a live job, an unfinished task or plan, an open pull request,
    a running schedule, a provider waiting for its limit to reset. Built once, as every full
    tick of an idle engine runs it."""
    live = (
        exists().where(col(Job.state).in_(LIVE_JOB_STATES)),
        exists().where(col(Task.state).in_(ACTIVE_TASK_STATES)),
        exists().where(col(Plan.status) == PlanState.PLANNING),
        exists().where(col(PullRequest.state) == PullState.OPEN),
        exists().where(col(Schedule.paused_at).is_(None)),
        exists().where(col(ProviderLimit.status) == "limited"),
    )
    return select(or_(*live))


@cache
def _waits() -> ColumnsSelect:
    """Whether a tick has work, and the earliest end still to come of each kind of timed
    wait, in one statement: parked tasks' next tries, providers' resets, open pull
    requests' next checks and the holds on them (a back-off, another engine's forge
    action). Ends already past are what the housekeeping that just ran did not act on (a
    hold being renewed), not a reason to look again at once."""
    now: BindParameter[float] = bindparam("now")
    busy = or_(
        exists().where(col(Task.state).in_([TaskState.QUEUED, TaskState.RUNNING])),
        exists().where(col(Plan.status) == PlanState.PLANNING),
    )
    open_pr = col(PullRequest.state) == PullState.OPEN
    checked = col(PullRequest.last_checked_at)
    return select_columns(
        busy,
        _earliest(Task.not_before, col(Task.state) == TaskState.PARKED, now),
        _earliest(ProviderLimit.reset_at, col(ProviderLimit.status) == "limited", now),
        _earliest(checked, open_pr & col(PullRequest.published), bindparam("checked_after")),
        _earliest(PullRequest.retry_at, open_pr, now),
        _earliest(PullRequest.action_expires_at, open_pr, now),
    )


def _earliest(column: Any, where: ColumnElement[bool], after: Any) -> ScalarSelect[Any]:
    """The smallest value of ``column`` over the rows ``where`` holds, past ``after``."""
    return select(func.min(column)).where(where, column > after).scalar_subquery()

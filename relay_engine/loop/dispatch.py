"""Dispatch: order the queue, respect capacity and scope locks, pick agents, claim.

The decisions come from the pure scheduler, selection and capacity modules; this module
gathers their inputs in one read and performs each claim as one conditional UPDATE in a
short write transaction. Engines sharing a PostgreSQL database do not queue behind one
lock to claim: candidates are locked with ``FOR UPDATE SKIP LOCKED`` (a row another engine
is claiming is passed over, not waited for), scope exclusivity is a unique index over the
claimed tasks' scopes (the database refuses a second holder, whoever asks), and only the
fleet-wide caps an operator sets are counted under an advisory lock of their own.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, bindparam, case, or_, text, tuple_
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select, update
from sqlmodel.sql.expression import SelectOfScalar

from relay_engine.core.capacity import FleetCaps, FleetCounts, free_slots, lock_key
from relay_engine.core.faults import is_busy
from relay_engine.core.scheduler import TaskFacts, plan_dispatch
from relay_engine.core.selection import Selected
from relay_engine.core.states import TaskState
from relay_engine.git.worktrees import shared_directory
from relay_engine.loop.crashpoints import crash_point
from relay_engine.store import spend
from relay_engine.store.db import (
    ColumnsSelect,
    Store,
    column_rows,
    select_columns,
)
from relay_engine.store.events import event_rows
from relay_engine.store.plain_rows import Rows, write_rows
from relay_engine.store.read_model.fleet import active_pins
from relay_engine.store.schema import Assignment, Execution, Job, Task
from relay_engine.store.task_rows import EXECUTION_HISTORY_KEPT, start_values, started_event


@dataclass(frozen=True)
class QueueView:
    """One read of what dispatch decides on."""

    queued: list[Any]  # rows of QUEUE_COLUMNS: unclaimed QUEUED tasks
    running: list[Any]  # rows of BUSY_COLUMNS: claimed tasks
    jobs: dict[str, Job]
    pins: dict[tuple[str, str, str], str]
    free: int = 0  # agents this engine may start now
    spare: int = 0  # alternates read beyond them (see choose)
    lock_dirs: dict[str, str | None] = field(default_factory=dict)  # job -> shared directory
    mine: Counter[str] = field(default_factory=Counter)  # this engine's claims, by agent
    owned: int = 0  # this engine's claims (every claim's, without an engine id)


def task_facts(task: Task, gated: bool = False, lock_dir: str | None = None) -> TaskFacts:
    """``lock_dir``: the shared directory the task holds while it runs, the task's own
    (``task.lock_dir``) once claimed, its job's for a queued one (queue rows carry none)."""
    return TaskFacts(
        key=task.key,
        job_id=task.job_id,
        task_id=task.task_id,
        state=TaskState(task.state),
        priority=task.priority,
        created_at=task.created_at,
        dependencies=tuple(task.dependencies),
        workstream=task.workstream,
        resumed_at=task.resumed_at,
        parked_at=task.parked_at if task.resumed_at else None,
        execution_id=task.execution_id,
        wave_gate_blocked=gated,
        lock_dir=lock_dir,
    )


BUSY_STATES = frozenset({TaskState.RUNNING, TaskState.QUEUED})


def claimed() -> ColumnElement[bool]:
    """Claimed tasks, found through the execution id's index: ``> ''`` rather than ``IS NOT
    NULL`` because SQLite only walks an index for a range, and the state is checked in
    Python because a condition on it would lead the planner to scan every QUEUED row."""
    return col(Task.execution_id) > ""


QUEUE_COLUMNS = (
    Task.key, Task.job_id, Task.task_id, Task.state, Task.priority, Task.created_at,
    Task.dependencies, Task.workstream, Task.resumed_at, Task.provider, Task.parked_at,
    Task.execution_id, Task.role, Task.model_class, Task.pinned_agent,
)  # fmt: skip
"""What ordering and agent selection read: plain rows, not ORM objects, since a queue of
thousands is read on every dispatch."""

BUSY_COLUMNS = (
    *QUEUE_COLUMNS, Task.lease_owner, Task.lease_expires_at, Task.agent, Task.lock_dir,
    Task.attempt, Task.max_attempts, Task.recoveries,
)  # fmt: skip
"""What dispatch and recovery read of claimed tasks: plain rows (an engine running 200
agents reads them every tick; whole ORM rows, with every JSON column, cost 18 ms)."""


def busy_tasks(session: Session) -> list[Any]:
    """Claimed tasks still queued or running, as rows of :data:`BUSY_COLUMNS`."""
    rows = column_rows(session, select_columns(*BUSY_COLUMNS).where(claimed()))
    return [row for row in rows if row.state in BUSY_STATES]


QUEUE_PAGE_MIN = 16
"""The fewest queued rows one page reads: a page is twice the candidates dispatch wants
(free slots and alternates), so a few the scheduler turns down (a workstream's second task,
a shared directory's) rarely cost another query. Each row read costs its decoding and its
scheduling facts twice; an engine with two slots read 32 of them every tick."""

KEPT_PAGES = 4
"""How many pages a lone engine's read of an unscoped queue takes, the rest kept for the
rounds after it (:attr:`QueueKept.rows`): a round whose exits queued nothing new here
chooses from them instead of reading again (the read was an engine's costliest statement,
sent once a round). Engines that share the queue read one page: the others claim from the
same top, so kept rows went stale within a round or two, and the claims that found them
taken cost more than the reads they saved (4 x 2 engines: 1.05 claims per task became
1.2-1.7)."""


@dataclass
class QueueKept:
    """What a fast tick's dispatch need not read again: job rows, their pins, and whether
    any resumed work was queued at the last look. Kept from one full tick to the next
    (commands, which change pins and budgets, are applied on full ticks; work resumed
    after a limit is found by the next full tick's read)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    pins: dict[str, dict[tuple[str, str, str], str]] = field(default_factory=dict)
    resumed: bool | None = None  # None: not looked at yet
    scoped: bool = False  # the queue held scoped work: read the fleet's claims with it
    rows: list[Any] = field(default_factory=list)  # see read_queue: the next rounds' rows

    def took(self, keys: Iterable[str]) -> None:
        """These tasks left the queue (claimed, parked, failed) or another engine has them:
        rounds that use the kept rows choose among the rest."""
        gone = set(keys)
        self.rows = [row for row in self.rows if row.key not in gone]

    def forget_rows(self) -> None:
        """Work may have been queued ahead of the kept rows: the next round reads."""
        self.rows = []


def read_queue(
    session: Session,
    capacity: int,
    *,
    engine_id: str | None = None,
    max_running: int | None = None,
    exclude: frozenset[str] = frozenset(),
    kept: QueueKept | None = None,
    own: Counter[str] | None = None,
    alternates: int = 0,
    pages: int = 1,
) -> QueueView:
    """What dispatch decides on: the claimed tasks and the *top* of the ready queue.

    ``capacity`` is this engine's slots (``engine_id``'s claims count against it; without
    an engine id, every claim does). Only as many queued tasks are read as it takes to
    fill the free slots (a few pages, in dispatch order, over ``ix_relay_task_queue``), so
    the cost of a dispatch does not grow with the length of the queue. ``exclude`` are
    tasks a claim of this tick passed over (another session holds their rows): the next
    candidates are read in their place. ``alternates``: how many candidates per free slot the
    caller chooses beyond it (``spare`` in :func:`choose`), read with them.

    ``own`` is this engine's claims by agent, when the caller counts them itself and no
    fleet-wide cap needs the other engines' (only this engine claims against its slots).
    Then the fleet's claims are read only for a queue that holds scoped work, which must
    skip what the fleet holds: read every round by every engine, they were the statement
    a fleet sent most. Such a queue is read ``pages`` pages at a time (see
    :data:`KEPT_PAGES`), and the rows kept in ``kept`` serve the next rounds until too few
    are left; the caller forgets them when the queue may have grown ahead of them (a full
    tick, or a write of this process that queued work:
    :attr:`~relay_engine.store.db.Store.queue_grew`). The claim re-checks every row under
    its lock, as it does after a fresh read.
    """
    kept = kept if kept is not None else QueueKept()
    if own is not None and max_running is None and not kept.scoped:
        owned = sum(own.values())
        free = free_slots(capacity, owned, 0, None)
        spare = free * alternates
        top = _kept_top(kept, free, spare, exclude) if pages > 1 else None
        if top is not None:
            return _view(session, top, [], (free, spare), kept, own, owned)
        rows, lock_dirs = _top_of_queue(session, [], free, spare, exclude, kept, pages=pages)
        kept.scoped = any(t.workstream or lock_dirs.get(t.job_id) for t in rows)
        kept.rows = rows if pages > 1 and not kept.scoped else []
        window = rows[: _page_size(free, spare)] if pages > 1 else rows  # the rest wait
        if not kept.scoped:
            return _view(session, (window, lock_dirs), [], (free, spare), kept, own, owned)
    running = busy_tasks(session)
    mine = len(running) if engine_id is None else owned_by(running, engine_id)
    free = free_slots(capacity, mine, len(running), max_running)
    spare = free * alternates
    top = _top_of_queue(session, running, free, spare, exclude, kept)
    mine_by_agent = running_by_agent(running, engine_id)
    return _view(session, top, running, (free, spare), kept, mine_by_agent, mine)


def _view(
    session: Session,
    top: tuple[list[Any], dict[str, str | None]],
    running: list[Any],
    slots: tuple[int, int],
    kept: QueueKept,
    mine: Counter[str],
    owned: int,
) -> QueueView:
    """The view of the top of the queue (its rows and their jobs' shared directories), with
    their jobs and pins (read once, then kept); ``slots`` are the free ones and the
    alternates read for them."""
    queued, lock_dirs = top
    jobs = _jobs_of(session, queued, kept)
    pins = {key: agent for job_id in jobs for key, agent in kept.pins.get(job_id, {}).items()}
    free, spare = slots
    return QueueView(
        queued, running, jobs, pins, free, spare, lock_dirs=lock_dirs, mine=mine, owned=owned
    )


def _jobs_of(session: Session, rows: list[Any], kept: QueueKept) -> dict[str, Job]:
    """The jobs of these rows, and their pins, read once and then kept."""
    job_ids = sorted({t.job_id for t in rows})
    missing = [job_id for job_id in job_ids if job_id not in kept.jobs]
    if missing:
        kept.jobs.update(
            (j.id, j) for j in session.exec(select(Job).where(col(Job.id).in_(missing)))
        )
        for job_id in missing:
            kept.pins[job_id] = {}
        for key, agent in active_pins(session, missing).items():
            kept.pins[key[0]][key] = agent
    return {job_id: kept.jobs[job_id] for job_id in job_ids if job_id in kept.jobs}


def _note_lock_dirs(lock_dirs: dict[str, str | None], jobs: dict[str, Job]) -> None:
    """The directory each job's tasks take turns in, if any, looked at once per read (a
    few stats of its repository)."""
    for job_id, job in jobs.items():
        if job_id not in lock_dirs:
            lock_dirs[job_id] = shared_directory(job.repo_path)


def owned_by(tasks: Sequence[Task], engine_id: str) -> int:
    return sum(1 for task in tasks if task.lease_owner == engine_id)


_ORDER = (col(Task.priority), col(Task.created_at), col(Task.key))  # dispatch order


@cache
def _queue_page(
    page: int, *, busy: bool, excluding: bool, after: bool, taking_turns: bool = False
) -> ColumnsSelect:
    """A page of unclaimed QUEUED tasks not back from a limit, in dispatch order, whose
    workstream is not busy and whose job is not taking turns in a directory another of its
    tasks holds (the database skips the rest): built once per shape, its values bound at
    each read (``busy``, ``exclude`` and ``turns`` expanding, the last row's ``after_*``).
    Every dispatch of every engine reads it; building it anew each time cost more than
    sending it."""
    query = select_columns(*QUEUE_COLUMNS).where(
        Task.state == TaskState.QUEUED,
        col(Task.execution_id).is_(None),
        col(Task.resumed_at).is_(None),
    )
    if excluding:
        query = query.where(col(Task.key).not_in(bindparam("exclude", expanding=True)))
    if taking_turns:
        query = query.where(col(Task.job_id).not_in(bindparam("turns", expanding=True)))
    if busy:
        free_scope = tuple_(Task.job_id, Task.workstream).not_in(bindparam("busy", expanding=True))
        query = query.where(or_(col(Task.workstream).is_(None), free_scope))
    if after:
        last = tuple_(*(bindparam(f"after_{i}") for i in range(len(_ORDER))))
        query = query.where(tuple_(*_ORDER) > last)
    return query.order_by(*_ORDER).limit(page)


@cache
def _resumed_query() -> ColumnsSelect:
    return select_columns(*QUEUE_COLUMNS).where(col(Task.resumed_at) > 0)


def _resumed(session: Session, busy: set[tuple[str, str]], exclude: frozenset[str]) -> list[Any]:
    """Work back from a provider limit, which dispatches first: few rows, found through
    their own index and checked here (see :func:`_claimed` for why not in SQL)."""
    rows = column_rows(session, _resumed_query())
    return [
        r
        for r in rows
        if r.state == TaskState.QUEUED
        and r.execution_id is None
        and (r.job_id, r.workstream) not in busy
        and r.key not in exclude
    ]


def _top_of_queue(
    session: Session,
    running: list[Any],
    free: int,
    spare: int,
    exclude: frozenset[str],
    kept: QueueKept,
    pages: int = 1,
) -> tuple[list[Any], dict[str, str | None]]:
    """Resumed work first, then pages of the rest in dispatch order, until the free slots
    are spoken for or the queue ends; with the directories their jobs take turns in.
    ``pages``: how many pages' worth one statement reads (rows kept for the next rounds).

    A job whose tasks take turns in its directory (see :func:`claim_scopes`) has one
    candidate at most: the database skips its queued tasks while one of them holds the
    directory, and the pages after the one its first candidate came on. Its siblings
    otherwise looked like enough candidates, and every job behind them waited with slots
    free; or, counted as one, they were read to the end of the queue on every dispatch."""
    lock_dirs: dict[str, str | None] = {}
    if free <= 0:
        return [], lock_dirs
    busy = {(t.job_id, t.workstream) for t in running if t.workstream}
    turns = {t.job_id for t in running if t.lock_dir}
    page = _page_size(free, spare) * pages
    rows = _resumed(session, busy, exclude) if kept.resumed is not False else []
    kept.resumed = bool(rows)
    params: dict[str, Any] = {"exclude": sorted(exclude), "busy": sorted(busy)}
    after = False
    while True:
        shape = {"busy": bool(busy), "excluding": bool(exclude), "taking_turns": bool(turns)}
        params["turns"] = sorted(turns)
        batch = list(column_rows(session, _queue_page(page, after=after, **shape), params))
        rows += batch
        _note_lock_dirs(lock_dirs, _jobs_of(session, rows, kept))
        if len(batch) < page or _fills(rows, running, free, lock_dirs):
            return rows, lock_dirs
        turns |= {row.job_id for row in batch if lock_dirs.get(row.job_id)}
        last = batch[-1]
        params |= {"after_0": last.priority, "after_1": last.created_at, "after_2": last.key}
        after = True


def _page_size(free: int, spare: int) -> int:
    return max(2 * (free + spare), QUEUE_PAGE_MIN)


def _kept_top(
    kept: QueueKept, free: int, spare: int, exclude: frozenset[str]
) -> tuple[list[Any], dict[str, str | None]] | None:
    """The next page of the rows the last read kept, when a round can still fill its free
    slots and alternates from them; else None, and the queue is read again."""
    if exclude:
        kept.took(exclude)
    page = kept.rows[: _page_size(free, spare)]
    if free <= 0 or len(page) < free + spare:
        return None
    return page, dict.fromkeys((row.job_id for row in page), None)  # none is scoped


def _fills(
    rows: list[Any], running: list[Task], free: int, lock_dirs: dict[str, str | None]
) -> bool:
    """Whether these rows already give the scheduler a task for every free slot."""
    busy = [task_facts(t, lock_dir=t.lock_dir) for t in running]
    queued = [task_facts(r, lock_dir=lock_dirs.get(r.job_id)) for r in rows]
    plan = plan_dispatch(queued, busy, len(running) + free)
    return len(plan.chosen) >= free


def choose(view: QueueView) -> list[Task]:
    """Queued tasks to dispatch now, in dispatch order: at most the view's free slots, and
    its ``spare`` more, which the claim takes only in place of ones another engine took
    first (see ``take`` in :func:`claim_batch`)."""
    by_key = {t.key: t for t in view.queued}
    queued = [task_facts(t, lock_dir=view.lock_dirs.get(t.job_id)) for t in view.queued]
    running = [task_facts(t, lock_dir=t.lock_dir) for t in view.running]
    plan = plan_dispatch(queued, running, len(running) + view.free + view.spare)
    return [by_key[key] for key in plan.chosen]


@dataclass(frozen=True)
class Claim:
    task: Task
    selected: Selected
    execution_id: str
    written: dict[str, Any] | None = None  # the task's new values, when still to be written


def claim_batch(
    store: Store,
    wanted: Sequence[tuple[Task, Selected]],
    *,
    engine_id: str,
    capacity: int,
    lease_s: float,
    now: float,
    artifacts: Path | None = None,
    caps: FleetCaps | None = None,
    lock_dirs: dict[str, str | None] | None = None,
    passed_over: set[str] | None = None,
    budgeted: set[str] | None = None,
    mine: int | None = None,
    take: int | None = None,
) -> list[Claim]:
    """Claim tasks in one short transaction: each one conditional UPDATE, re-checked.

    ``capacity`` is this engine's slots: only this engine claims against them. Candidates
    another engine is claiming right now are skipped, not waited for (``SKIP LOCKED``, and a
    try-lock per scope on PostgreSQL; SQLite has one writer at a time anyway); the unique
    scope indexes make a second holder impossible whatever the timing. Fleet-wide caps,
    when set, are counted under their own advisory locks, the only waits, bounded by the
    store's ``lock_timeout``. ``artifacts`` is where each execution's directory (and its
    supervisor's record) will be, written with the claim so recovery can find it.
    ``passed_over`` receives the wanted tasks this batch could not take (their rows held by
    another session, or claimed since), so the caller can fill their slots with the next
    candidates in the same tick. ``budgeted`` (jobs with a budget, when the caller knows)
    and ``mine`` (this engine's running claims, which only it makes) spare the claim
    re-reading what does not concern it: without fleet caps or scoped tasks, the fleet's
    claims are not read again.

    ``take``: lock only this many rows, the first in ``wanted``'s order no one holds; the
    rest are alternates, for first picks another engine took since the queue was read.
    """
    caps = caps or FleetCaps()
    lock_dirs = lock_dirs or {}
    with store.write() as session:
        _hold_fleet_caps(session, store, caps, wanted)
        locked_at = time.perf_counter()  # from here on this transaction holds locks
        scoped = any(t.workstream or lock_dirs.get(t.job_id) for t, _ in wanted)
        if scoped:
            _wait_no_more(session, store)
        keys = [task.key for task, _ in wanted]
        claimable = _claimable(session, keys, take)
        if passed_over is not None:
            passed_over.update(_skipped(keys, claimable, take))
        fleet = _fleet_for(session, engine_id, caps, scoped=scoped, mine=mine)
        crash_point("claim-locked")  # after the first statement: SQLite's lock is taken then
        jobs = {task.job_id for task, _ in wanted}
        spent = _spent_jobs(session, jobs if budgeted is None else jobs & budgeted)
        claims = _claim_in_order(
            session, store, wanted, fleet, claimable, spent, capacity=capacity, caps=caps,
            lock_dirs=lock_dirs, engine_id=engine_id, lease_s=lease_s, now=now,
        )  # fmt: skip
        _write_claims(session, claims, engine_id, artifacts, now)
    store.stats.note_claim((time.perf_counter() - locked_at) * 1000)
    return claims


def _write_claims(
    session: Session, claims: list[Claim], engine_id: str, artifacts: Path | None, now: float
) -> None:
    """The batch's claims: its tasks, its ``task.started`` events, its executions, in one
    statement on PostgreSQL (three on SQLite); rows, not ORM objects (the unit of work's
    flush and building each object cost a claim more than its statements)."""
    if not claims:
        return
    unwritten = [claim.written for claim in claims if claim.written is not None]
    started = [started_event(c.task, c.execution_id, now=now) for c in claims]
    write_rows(
        session,
        Rows(Task, unwritten, update=True),
        event_rows(session, started),
        Rows(Execution, [_execution_row(c, engine_id, artifacts) for c in claims]),
    )


def _fleet_for(
    session: Session, engine_id: str, caps: FleetCaps, *, scoped: bool, mine: int | None
) -> _Fleet:
    """The fleet's claims as this claim counts them: read again only when caps or scopes
    need them, or the caller does not know this engine's own count."""
    if scoped or caps.any() or mine is None:
        return _Fleet.read(session, engine_id)
    return _Fleet(mine, FleetCounts(), set())


def _claim_in_order(
    session: Session,
    store: Store,
    wanted: Sequence[tuple[Task, Selected]],
    fleet: _Fleet,
    claimable: dict[str, Task],
    spent: set[str],
    *,
    capacity: int,
    caps: FleetCaps,
    lock_dirs: dict[str, str | None],
    engine_id: str,
    lease_s: float,
    now: float,
) -> list[Claim]:
    """The wanted tasks this engine takes, in dispatch order while it and the fleet have
    room: still claimable, within budget and caps, in scopes nobody holds."""
    claims: list[Claim] = []
    for task, selected in wanted:
        if fleet.mine >= capacity or fleet.full(caps):
            break
        lock_dir = lock_dirs.get(task.job_id)
        scopes = claim_scopes(task.job_id, task.workstream, lock_dir)
        if (
            task.key not in claimable
            or task.job_id in spent  # its budget ran out since dispatch read it
            or not fleet.allows(caps, selected)
            or not fleet.scopes.isdisjoint(scopes)
            or not _try_scopes(session, store, scopes)
        ):
            continue
        ticket = _Ticket(selected, engine_id, lease_s, now, lock_dir)
        claim = _claim_one(session, claimable[task.key], ticket)
        if claim is not None:
            claims.append(claim)
            fleet.took(selected, scopes)
    return claims


def claim_scopes(job_id: str, workstream: str | None, lock_dir: str | None) -> set[str]:
    """The scopes a claimed task holds: its workstream, and a shared directory."""
    scopes = {f"ws:{job_id}:{workstream}"} if workstream else set()
    if lock_dir:
        scopes.add(f"dir:{lock_dir}")
    return scopes


@dataclass
class _Fleet:
    """What is claimed on every engine, read inside the claim transaction."""

    mine: int
    counts: FleetCounts
    scopes: set[str]

    @classmethod
    def read(cls, session: Session, engine_id: str) -> _Fleet:
        query = select_columns(
            Task.job_id, Task.workstream, Task.lock_dir, Task.state, Task.lease_owner,
            Task.agent, Task.provider,
        ).where(claimed())  # fmt: skip
        fleet = cls(0, FleetCounts(), set())
        for row in column_rows(session, query):
            if row.state in BUSY_STATES:
                fleet.mine += row.lease_owner == engine_id
                fleet.counts.add(row.agent, row.provider)
                fleet.scopes |= claim_scopes(row.job_id, row.workstream, row.lock_dir)
        return fleet

    def full(self, caps: FleetCaps) -> bool:
        return caps.max_running is not None and self.counts.total >= caps.max_running

    def allows(self, caps: FleetCaps, selected: Selected) -> bool:
        room = self.counts.room(caps, selected.agent_id, selected.provider)
        return room is None or room > 0

    def took(self, selected: Selected, scopes: set[str]) -> None:
        self.mine += 1
        self.counts.add(selected.agent_id, selected.provider)
        self.scopes |= scopes


def _hold_fleet_caps(
    session: Session, store: Store, caps: FleetCaps, wanted: Sequence[tuple[Task, Selected]]
) -> None:
    """Hold still the fleet-wide counts these claims are checked against (PostgreSQL;
    SQLite's single writer already does). Sorted, so engines never wait on each other in
    a circle."""
    if store.is_sqlite:
        return
    for name in caps.lock_names((s.agent_id, s.provider) for _, s in wanted):
        lock = text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=lock_key(name))
        session.exec(lock)  # type: ignore[call-overload]  # sqlmodel: exec runs text(), untyped


CLAIM_LOCK_TIMEOUT_MS = 100


def _wait_no_more(session: Session, store: Store) -> None:
    """Past the fleet caps, nothing in a claim is worth waiting for (PostgreSQL): rows are
    taken with SKIP LOCKED, and whatever else might still wait (a scope index entry another
    session is writing) gives up within this bound and costs only its own task."""
    if not store.is_sqlite:
        timeout = text(f"SET LOCAL lock_timeout = {CLAIM_LOCK_TIMEOUT_MS}")
        session.exec(timeout)  # type: ignore[call-overload]  # sqlmodel: exec runs text(), untyped


def _claimable(session: Session, keys: list[str], take: int | None = None) -> dict[str, Task]:
    """Of these tasks, the ones still unclaimed and not being claimed by another engine
    right now (those rows are skipped, not waited for), read whole under their row lock:
    the first ``take`` of them in the order of ``keys``, when given (the database locks
    only the rows it returns)."""
    take = take if take is not None and take < len(keys) else None
    query = _claimable_query(len(keys), take)
    params = {f"key_{i}": key for i, key in enumerate(keys)}
    return {task.key: task for task in session.exec(query, params=params)}


@cache
def _claimable_query(count: int, take: int | None) -> SelectOfScalar[Task]:
    """:func:`_claimable`'s statement for ``count`` keys (``key_0`` …, ranked in that
    order when only ``take`` rows are to be locked): built once per shape, as every claim
    of every engine runs it."""
    keys: list[BindParameter[str]] = [bindparam(f"key_{i}") for i in range(count)]
    query = (
        select(Task)
        .where(col(Task.key).in_(keys), Task.state == TaskState.QUEUED)
        .where(col(Task.execution_id).is_(None))
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    )
    if take is None:
        return query
    rank = case(*((col(Task.key) == key, i) for i, key in enumerate(keys)))
    return query.order_by(rank).limit(take)


def _skipped(keys: list[str], claimable: dict[str, Task], take: int | None) -> list[str]:
    """The candidates a claim looked at and could not lock: all it did not get, unless it
    got all ``take``; then only those before the last it got (the rest were not reached)."""
    if take is None or len(claimable) < take:
        return [key for key in keys if key not in claimable]
    last = max((i for i, key in enumerate(keys) if key in claimable), default=0)
    return [key for key in keys[:last] if key not in claimable]


def _try_scopes(session: Session, store: Store, scopes: set[str]) -> bool:
    """Whether no other engine is claiming in these scopes at this moment (PostgreSQL).
    Without it, a second claimant would wait on the unique scope index until the first
    commits; with it, engines working on different jobs never wait on each other and
    engines on the same scope never wait in a circle."""
    if store.is_sqlite:
        return True
    for scope in sorted(scopes):
        lock = text("SELECT pg_try_advisory_xact_lock(:k)").bindparams(k=lock_key(scope))
        taken = session.exec(lock).one()[0]  # type: ignore[call-overload]  # sqlmodel: as above
        if not taken:
            return False
    return True


def _spent_jobs(session: Session, job_ids: set[str]) -> set[str]:
    """Jobs whose budget is spent, read inside the claim transaction: two engines cannot
    both start work on the last dollar."""
    if not job_ids:
        return set()
    jobs = session.exec(select(Job).where(col(Job.id).in_(sorted(job_ids)))).all()
    return set(spend.job_holds(session, jobs))


@dataclass(frozen=True)
class _Ticket:
    """What one claim writes on its task besides the new execution id."""

    selected: Selected
    engine_id: str
    lease_s: float
    now: float
    lock_dir: str | None

    def values(self, task: Task, execution_id: str) -> dict[str, Any]:
        history = [*(task.execution_history or []), execution_id][-EXECUTION_HISTORY_KEPT:]
        return start_values(self.now) | {
            "attempt": task.attempt + 1,
            "execution_id": execution_id,
            "execution_history": history,
            "lease_owner": self.engine_id,
            "lease_expires_at": self.now + self.lease_s,
            "lock_dir": self.lock_dir,
            "agent": self.selected.agent_id,
            "provider": self.selected.provider,
            "resumed_at": None,
            "waiting_on_provider": None,
            "updated_at": self.now,
        }


def _claim_one(session: Session, locked: Task, ticket: _Ticket) -> Claim | None:
    """Claim a task whose row this transaction holds locked and found unclaimed, which
    starts it (:func:`~relay_engine.store.task_rows.start_values`).

    A task without a scope is claimed in place: its object takes the new values as
    committed ones, and :func:`_write_claims` writes every such claim of the batch in one
    statement. One that takes a scope is a conditional UPDATE in a savepoint, so a
    unique-index refusal (another engine's claim committed since we looked) costs only
    this task.
    """
    execution_id = uuid.uuid4().hex
    values = ticket.values(locked, execution_id)
    if locked.workstream or ticket.lock_dir:
        claimed = _claim_scoped(session, locked.key, values)
        return None if claimed is None else Claim(claimed, ticket.selected, execution_id)
    for name, value in values.items():
        set_committed_value(locked, name, value)
    return Claim(locked, ticket.selected, execution_id, written={"key": locked.key, **values})


def _claim_scoped(session: Session, key: str, values: dict[str, Any]) -> Task | None:
    claim = (
        update(Task)
        .where(
            col(Task.key) == key,
            col(Task.state) == TaskState.QUEUED,
            col(Task.execution_id).is_(None),
        )
        .values(**values)
        .returning(Task)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    try:
        with session.begin_nested():
            return session.execute(claim).scalars().first()
    except IntegrityError:
        return None  # a scope index says another engine holds its scope
    except OperationalError as error:
        if not is_busy(error):
            raise
        return None  # another session writes in its scope right now: passed over


def _execution_row(claim: Claim, engine_id: str, artifacts: Path | None) -> dict[str, Any]:
    return {
        "id": claim.execution_id,
        "job_id": claim.task.job_id,
        "task_key": claim.task.key,
        "engine_id": engine_id,
        "attempt": claim.task.attempt,
        "agent": claim.selected.agent_id,
        "provider": claim.selected.provider,
        "started_at": claim.task.started_at,
        "artifact_dir": str(artifacts / claim.execution_id) if artifacts else None,
    }


def count_assignment(session: Session, claim: Claim, now: float) -> None:
    """A pinned agent's start counts on its assignment: written with the start, not in the
    claim, whose every statement must pass over rows others hold rather than wait."""
    task, selected, execution_id = claim.task, claim.selected, claim.execution_id
    if selected.via != "pin":
        return
    session.exec(
        update(Assignment)
        .where(
            col(Assignment.job_id) == task.job_id,
            col(Assignment.workstream) == (task.workstream or ""),
            col(Assignment.role) == task.role,
            col(Assignment.status) == "active",
        )
        .values(
            executions=Assignment.executions + 1, last_execution_id=execution_id, updated_at=now
        )
    )


def running_by_agent(running: Sequence[Task], engine_id: str | None) -> Counter[str]:
    """Agents' claimed tasks on this engine, from the claimed tasks dispatch already read."""
    return Counter(t.agent for t in running if t.agent and t.lease_owner == engine_id)


def fleet_counts(tasks: Sequence[Task]) -> FleetCounts:
    counts = FleetCounts()
    for task in tasks:
        counts.add(task.agent, task.provider)
    return counts

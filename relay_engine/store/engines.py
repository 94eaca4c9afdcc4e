"""The engines sharing a database: the registry each engine joins and heartbeats, and the
rows ``relay engines``, ``relay status`` and the console show (live or gone, how busy).

The registry is how one engine tells a live peer from a dead one (see
:func:`owner_facts`).

An engine is *gone* once it recorded its stop, or once its heartbeat is older than one lease
(``[engine] lease_seconds``): the same silence after which its peers recover its work.
Engines gone long ago would pile up in a database used for months, so listings keep those
last heard from within :data:`RECENT_SECONDS` unless asked for all.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from relay_engine.agents.runner import process_start_time, same_process
from relay_engine.agents.supervisor import proc_start_ticks
from relay_engine.core.recovery import OwnerFacts
from relay_engine.core.states import TaskState
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import EngineRecord, Task

RECENT_SECONDS = 24 * 3600.0
_HOLDS_SLOT = frozenset({TaskState.RUNNING, TaskState.QUEUED})  # claimed: execution id set


@dataclass(frozen=True, slots=True)
class EngineRow:
    """One engine as an operator reads it; ``slots``/``agents`` None when not recorded."""

    id: str
    host: str
    pid: int
    role: str
    started_at: float
    heartbeat_at: float
    heartbeat_age: float
    stopped_at: float | None
    state: str  # "live" | "gone"
    why_gone: str | None  # "stopped" (said so) | "silent" (heartbeat older than a lease)
    running: int
    slots: int | None
    agents: tuple[str, ...] | None
    condition: str | None
    wake_ups: str | None = None  # "heard", "not heard", "off"; None: not said
    asleep_since: float | None = None  # the fleet had nothing to do: it ticks at heartbeats

    @property
    def last_seen(self) -> float:
        return self.stopped_at if self.stopped_at is not None else self.heartbeat_at

    def as_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["agents"] = list(self.agents) if self.agents is not None else None
        return body

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> EngineRow:
        """The inverse of :meth:`as_dict` (``relay status`` prints the rows of its report)."""
        agents = body.get("agents")
        return cls(**{**body, "agents": tuple(agents) if agents is not None else None})


def live_engine_ids(session: Session, now: float, lease_seconds: float) -> list[str]:
    """Engines neither stopped nor silent for a lease (:func:`why_gone` in SQL): the ones
    that take turns."""
    query = select(EngineRecord.id).where(
        col(EngineRecord.stopped_at).is_(None), EngineRecord.heartbeat_at >= now - lease_seconds
    )
    return list(session.exec(query))


def why_gone(record: EngineRecord, *, now: float, lease_seconds: float) -> str | None:
    """None for a live engine; otherwise why it counts as gone."""
    if record.stopped_at is not None:
        return "stopped"
    if now - record.heartbeat_at > lease_seconds:
        return "silent"
    return None


def engine_rows(
    records: Iterable[EngineRecord],
    running: Mapping[str, int],
    *,
    now: float,
    lease_seconds: float,
    recent_seconds: float | None = RECENT_SECONDS,
) -> list[EngineRow]:
    """Live engines first (oldest first), then gone ones (most recently heard from first).

    ``recent_seconds`` None keeps every engine ever registered."""
    rows = [_row(r, running, now, lease_seconds) for r in records]
    if recent_seconds is not None:
        rows = [r for r in rows if r.state == "live" or now - r.last_seen <= recent_seconds]
    live = sorted((r for r in rows if r.state == "live"), key=lambda r: (r.started_at, r.id))
    gone = sorted((r for r in rows if r.state == "gone"), key=lambda r: (-r.last_seen, r.id))
    return [*live, *gone]


def _row(record: EngineRecord, running: Mapping[str, int], now: float, lease: float) -> EngineRow:
    reason = why_gone(record, now=now, lease_seconds=lease)
    # engines of databases upgraded from 0.1.0 recorded neither (0 slots, no agents)
    slots = record.slots or None
    agents = tuple(record.agents) if record.agents else None
    return EngineRow(
        id=record.id,
        host=record.host,
        pid=record.pid,
        role=record.role,
        started_at=record.started_at,
        heartbeat_at=record.heartbeat_at,
        heartbeat_age=max(0.0, now - record.heartbeat_at),
        stopped_at=record.stopped_at,
        state="gone" if reason else "live",
        why_gone=reason,
        running=0 if reason == "stopped" else running.get(record.id, 0),
        slots=slots,
        agents=agents,
        condition=record.condition,
        wake_ups=record.wake_ups,
        asleep_since=None if reason else record.asleep_since,
    )


def running_by_engine(session: Session, job_id: str | None = None) -> Counter[str]:
    """Claimed tasks per owning engine (of one job, or of all): what holds each engine's
    slots (planner rounds hold none)."""
    query = (
        select(Task.lease_owner, Task.state, func.count())
        .where(col(Task.execution_id) > "", col(Task.lease_owner).is_not(None))
        .group_by(col(Task.lease_owner), col(Task.state))
    )
    if job_id is not None:
        query = query.where(col(Task.job_id) == job_id)
    counts: Counter[str] = Counter()
    for owner, state, count in session.exec(query):
        if state in _HOLDS_SLOT and owner:
            counts[owner] += int(count)
    return counts


def read_engines(
    session: Session,
    *,
    now: float,
    lease_seconds: float,
    recent_seconds: float | None = RECENT_SECONDS,
) -> list[EngineRow]:
    records = session.exec(select(EngineRecord))
    return engine_rows(
        records,
        running_by_engine(session),
        now=now,
        lease_seconds=lease_seconds,
        recent_seconds=recent_seconds,
    )


def job_engines(
    session: Session, job_id: str, *, now: float, lease_seconds: float
) -> list[EngineRow]:
    """The engines holding a job's claimed tasks, ``running`` counting that job's only; an
    engine gone while it holds work is listed however long ago it went."""
    running = running_by_engine(session, job_id)
    if not running:
        return []
    records = session.exec(select(EngineRecord).where(col(EngineRecord.id).in_(sorted(running))))
    return engine_rows(records, running, now=now, lease_seconds=lease_seconds, recent_seconds=None)


def capacity_cell(row: EngineRow) -> str:
    """``running/slots``, with ``?`` for slots an engine did not record."""
    return f"{row.running}/{row.slots if row.slots is not None else '?'}"


def agents_cell(row: EngineRow) -> str:
    return ", ".join(row.agents) if row.agents is not None else "?"


def age_text(seconds: float) -> str:
    """How long ago, in the largest unit that keeps it short: ``4s``, ``12m``, ``3h``, ``2d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


# -- the registry ---------------------------------------------------------------------------
HOST_ENV = "RELAY_HOST"


def this_host() -> str:
    """The host this engine registers as: ``RELAY_HOST`` when set (containers that share one
    hostname, or tests that play two hosts on one machine), else the hostname. Recovery
    kills a dead engine's processes by pid only for engines of this very host name."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def register_engine(store: Store, engine_id: str, *, role: str, now: float) -> EngineRecord:
    record = EngineRecord(
        id=engine_id,
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_time(os.getpid()),
        start_ticks=proc_start_ticks(os.getpid()),
        started_at=now,
        heartbeat_at=now,
        role=role,
    )
    with store.write() as session:
        session.add(record)
        record_event(
            session,
            EventKind.ENGINE_STARTED,
            f"engine {engine_id} ({role}) started on {record.host} pid {record.pid}",
            now=now,
            data={"engine": engine_id},
        )
    return record


def mark_stopped(store: Store, engine_id: str, *, now: float) -> None:
    with store.write() as session:
        record = session.get(EngineRecord, engine_id)
        if record is not None:
            record.stopped_at = now
            session.add(record)
            record_event(session, EventKind.ENGINE_STOPPED, f"engine {engine_id} stopped", now=now)


def owner_facts(session: Session, engine_ids: Iterable[str], my_host: str) -> dict[str, OwnerFacts]:
    """Facts about the engines that own claimed work, with local liveness checked now."""
    ids = sorted(set(engine_ids))
    if not ids:
        return {}
    records = session.exec(select(EngineRecord).where(col(EngineRecord.id).in_(ids)))
    return {
        record.id: OwnerFacts(
            engine_id=record.id,
            host=record.host,
            heartbeat_at=record.heartbeat_at,
            stopped=record.stopped_at is not None,
            process_alive=(
                same_process(record.pid, record.start_ticks, record.process_start)
                if record.host == my_host
                else None
            ),
        )
        for record in records
    }

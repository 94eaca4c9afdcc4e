"""The registry of live engines: how one engine tells a live peer from a dead one."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from sqlmodel import Session, col, select

from relay_engine.agents.runner import process_alive, process_start_time
from relay_engine.core.recovery import OwnerFacts
from relay_engine.store.db import Store, record_event
from relay_engine.store.schema import EngineRecord


def this_host() -> str:
    return socket.gethostname()


def register_engine(store: Store, engine_id: str, *, role: str, now: float) -> EngineRecord:
    record = EngineRecord(
        id=engine_id,
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_time(os.getpid()),
        started_at=now,
        heartbeat_at=now,
        role=role,
    )
    with store.write() as session:
        session.add(record)
        record_event(
            session,
            "engine.started",
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
            record_event(session, "engine.stopped", f"engine {engine_id} stopped", now=now)


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
                process_alive(record.pid, record.process_start) if record.host == my_host else None
            ),
        )
        for record in records
    }

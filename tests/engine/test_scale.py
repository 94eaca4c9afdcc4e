"""Scale-out as a fleet meets it: engines add their slots, a cluster cap holds across them,
a job's scope held by one session delays no other job, and scopes never overlap.

Concurrency is read from the event log in commit order (a slot is released in the same
transaction as its event, and a claim can only follow that commit), not from timestamps:
an execution's start time is its engine's tick time, which can precede a release that the
claim itself came after.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    occupancy_by_events,
    sim,
    stop_process,
    wait_for,
)
from sqlalchemy import create_engine, text
from sqlmodel import select

from relay_engine.core.capacity import lock_key
from relay_engine.core.selection import Selected
from relay_engine.loop import dispatch
from relay_engine.store.db import Store
from relay_engine.store.schema import Task

pytestmark = pytest.mark.postgres


def run_engines(workspace: Workspace, count: int, timeout: float = 120) -> None:
    procs = [
        workspace.popen("run", "--until-idle", "--quiet", log_name=f"e{n}.log")
        for n in range(count)
    ]
    try:
        codes = [proc.wait(timeout) for proc in procs]
    finally:
        for proc in procs:
            stop_process(proc)
    logs = "".join((workspace.path / f"e{n}.log").read_text() for n in range(count))
    assert codes == [0] * count, logs
    assert "Traceback" not in logs, logs


def parallel_tasks(count: int, seconds: float) -> list[dict]:
    return [{"id": f"t{i:02d}", "sim": sim(seconds)} for i in range(count)]


@pytest.mark.slow
def test_three_engines_of_two_slots_run_six_agents_at_once(pg_url: str, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, pg_url)
    workspace.configure(capacity=2)
    workspace.submit(job_toml("wide", parallel_tasks(18, 2.0)))  # engines may start late
    run_engines(workspace, 3)
    store = workspace.store()
    runs = [r for r in executions(store) if r.outcome == "succeeded"]
    assert len(runs) == 18
    engine_of = {run.task_key: run.engine_id for run in runs}
    log = events(store)
    assert occupancy_by_events(log) == {"": 6}  # every engine's slots, at once
    assert set(occupancy_by_events(log, engine_of.get).values()) == {2}  # none over its own
    workspace.close()


@pytest.mark.slow
def test_a_cluster_cap_holds_across_engines(pg_url: str, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, pg_url)
    workspace.configure(capacity=3)
    with (workspace.path / "relay.toml").open("a") as config:
        config.write("\n[cluster]\nmax_running = 4\n")
    workspace.submit(job_toml("wide", parallel_tasks(12, 1.5)))
    run_engines(workspace, 3)
    store = workspace.store()
    assert [r.outcome for r in executions(store)] == ["succeeded"] * 12
    assert occupancy_by_events(events(store)) == {"": 4}
    workspace.close()


def test_a_session_holding_one_jobs_scope_does_not_delay_another_job(
    pg_url: str, tmp_path: Path
) -> None:
    """An operator's (or a paused engine's) open transaction locks job a's row and its
    scope; job b's work is claimed and done meanwhile, and a's follows once it lets go."""
    workspace = Workspace(tmp_path, pg_url)
    workspace.configure(capacity=2)
    workspace.submit(job_toml("a", [{"id": "t", "workstream": "core", "sim": sim(0.1)}]), "a.toml")
    workspace.submit(job_toml("b", [{"id": "t", "workstream": "core", "sim": sim(0.1)}]), "b.toml")
    store = workspace.store()
    with store.write() as session:  # ready, as the engine's readiness step leaves them
        session.exec(text("UPDATE relay_task SET state = 'QUEUED'"))  # type: ignore[call-overload]
    holder = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with holder.connect() as connection:  # what an engine paused mid-claim holds
        transaction = connection.begin()
        connection.execute(text("SELECT key FROM relay_task WHERE key = 'a/t' FOR UPDATE"))
        scope = {"k": lock_key("ws:a:core")}
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), scope)
        engine = workspace.popen("run", "--quiet")
        try:
            wait_for(lambda: _state(store, "b/t") == "SUCCEEDED", timeout=30, what="job b")
            assert _state(store, "a/t") == "QUEUED"  # skipped, not waited for
            transaction.rollback()
            wait_for(lambda: _state(store, "a/t") == "SUCCEEDED", timeout=30, what="job a")
        finally:
            stop_process(engine)
    holder.dispose()
    workspace.close()


def _state(store: Store, key: str) -> str | None:
    with store.read() as session:
        task = session.get(Task, key)
        return task.state if task else None


@pytest.mark.slow
def test_engines_racing_on_one_workstream_never_both_claim_it(pg_url: str, tmp_path: Path) -> None:
    """Four engines claim at the same instant, many times over: each round, one task of
    the workstream is claimed, whatever the interleaving; other jobs' tasks all are."""
    workspace = Workspace(tmp_path, pg_url)
    workspace.configure()
    tasks = [{"id": f"s{i}", "workstream": "core"} for i in range(4)]
    tasks += [{"id": f"free{i}"} for i in range(4)]
    stores = [Store(pg_url) for _ in range(4)]
    for round_number in range(12):
        job = f"race{round_number}"
        workspace.submit(job_toml(job, tasks), f"{job}.toml")
        with stores[0].write() as session:  # ready, as the engine's readiness step leaves them
            rows = list(session.exec(select(Task).where(Task.job_id == job)))
            for row in rows:
                row.state = "QUEUED"
                session.add(row)
        start = threading.Barrier(len(stores))
        claimed: list[str] = []

        def claim(store: Store, order: list[Task], engine: str) -> None:
            wanted = [(t, Selected("sim", "sim", "test")) for t in order]
            start.wait()  # noqa: B023 - joined before the next round
            for made in dispatch.claim_batch(
                store, wanted, engine_id=engine, capacity=8, lease_s=30, now=time.time()
            ):
                claimed.append(made.task.key)  # noqa: B023

        threads = [  # each engine tries the tasks in its own order
            threading.Thread(target=claim, args=(store, rows[n:] + rows[:n], f"e{n}-{job}"))
            for n, store in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        by_scope = Counter("core" if "/s" in key else key for key in claimed)
        assert by_scope["core"] == 1, claimed
        assert sum(1 for key in claimed if "/free" in key) == 4, claimed
    for store in stores:
        store.dispose()
    workspace.close()

"""Does a reconcile tick stay cheap as finished work piles up?

    .venv/bin/python bench/tick.py [--ticks 40] [--profile]

Builds two SQLite databases by inserting rows directly: 1,000 and 10,000 tasks, each with
100 RUNNING (claimed by an engine record that is this very process, alive, with a fresh
lease, so recovery leaves them alone), 50 QUEUED (capacity is full, so nothing launches),
50 DRAFT waiting on running work, and the rest SUCCEEDED with executions and events.
Prints the median Engine.tick() time of each and the ratio (targets: ratio <= 2, median
<= 20 ms). Never asserts.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import tomli_w
from sqlalchemy import insert

from relay_engine.agents.runner import process_start_time
from relay_engine.loop.engine import Engine
from relay_engine.store.db import Store
from relay_engine.store.engines import this_host
from relay_engine.store.schema import EngineRecord, Event, Execution, Job, Task

RUNNING, QUEUED, DRAFT = 100, 50, 50
JOB_SIZE = 500
OWNER = "bench-owner"


def task_row(job_id: str, i: int, state: str, now: float) -> dict[str, object]:
    row: dict[str, object] = {
        "key": f"{job_id}/t{i:05d}",
        "job_id": job_id,
        "task_id": f"t{i:05d}",
        "title": f"task {i}",
        "input": "do the thing",
        "state": state,
        "priority": "P2",
        "dependencies": [],
        "execution_history": [],
        "attempt": 1 if state in ("SUCCEEDED", "RUNNING") else 0,
        "created_at": now + i * 1e-6,
        "updated_at": now,
        "spec_hash": "x",
    }
    if state == "SUCCEEDED":
        row.update(result_summary="done", started_at=now - 60, finished_at=now - 30)
    return row


def build(workspace: Path, total: int, now: float) -> Store:
    store = Store.for_workspace(workspace)
    states = (
        ["RUNNING"] * RUNNING
        + ["QUEUED"] * QUEUED
        + ["DRAFT"] * DRAFT
        + ["SUCCEEDED"] * (total - RUNNING - QUEUED - DRAFT)
    )
    tasks, executions, events, jobs = [], [], [], []
    running_ids: list[str] = []
    for i, state in enumerate(states):
        job_id = f"job{i // JOB_SIZE:03d}"
        if i % JOB_SIZE == 0:
            jobs.append({"id": job_id, "title": job_id, "state": "ACTIVE", "created_at": now})
        row = task_row(job_id, i, state, now)
        if state in ("RUNNING", "SUCCEEDED"):
            execution_id = uuid.uuid4().hex
            executions.append(
                {
                    "id": execution_id,
                    "job_id": job_id,
                    "task_key": row["key"],
                    "engine_id": OWNER,
                    "attempt": 1,
                    "argv": [],
                    "started_at": now - 60,
                    "ended_at": None if state == "RUNNING" else now - 30,
                    "outcome": None if state == "RUNNING" else "succeeded",
                }
            )
            if state == "RUNNING":
                row.update(execution_id=execution_id, lease_owner=OWNER, started_at=now - 60)
                row["lease_expires_at"] = now + 3600
                running_ids.append(str(row["key"]))
        if state == "DRAFT":
            row["dependencies"] = [running_ids[i % RUNNING].split("/")[1]]
            row["job_id"] = running_ids[i % RUNNING].split("/")[0]
            row["key"] = f"{row['job_id']}/{row['task_id']}"
        tasks.append(row)
        for kind in ("task.queued", "task.started", "task.succeeded"):
            events.append(
                {"at": now, "job_id": job_id, "task_key": row["key"], "kind": kind, "message": kind}
            )
    with store.write() as session:
        session.execute(insert(Job), jobs)
        for chunk in range(0, len(tasks), 2000):
            session.execute(insert(Task), tasks[chunk : chunk + 2000])
        session.execute(insert(Execution), executions)
        session.execute(insert(Event), events)
        session.add(
            EngineRecord(
                id=OWNER,
                host=this_host(),
                pid=os.getpid(),
                process_start=process_start_time(os.getpid()),
                started_at=now,
                heartbeat_at=now + 3600,
            )
        )
    return store


def measure(root: Path, total: int, ticks: int, profile: bool) -> float:
    workspace = root / f"ws{total}"
    workspace.mkdir()
    config = {
        "engine": {"max_concurrent_agents": RUNNING, "tick_seconds": 0.5},
        "agents": [{"id": "sim", "provider": "sim", "roles": ["implementer"]}],
    }
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    store = build(workspace, total, time.time())
    engine = Engine(workspace, store=store)
    engine.register()
    engine.tick()  # warm caches (statement compilation) once
    profiler = cProfile.Profile() if profile else None
    samples = []
    for _ in range(ticks):
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        engine.tick()
        samples.append(time.perf_counter() - start)
        if profiler:
            profiler.disable()
    if profiler:
        print(f"--- profile, {total} tasks ---")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    with store.read() as session:
        running = len(list(session.exec(Task.__table__.select().where(Task.state == "RUNNING"))))
    if running != RUNNING:
        print(f"WARNING: {RUNNING - running} running tasks were touched by the tick")
    engine.shutdown(release=True)
    store.dispose()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relay-tick-") as tmp:
        small = measure(Path(tmp), 1_000, args.ticks, args.profile)
        large = measure(Path(tmp), 10_000, args.ticks, args.profile)
    print(f"median tick,  1,000 tasks (100 running): {small * 1000:7.2f} ms")
    print(f"median tick, 10,000 tasks (100 running): {large * 1000:7.2f} ms  (target <= 20 ms)")
    print(f"ratio 10k/1k:                            {large / small:7.2f}  (target <= 2)")


if __name__ == "__main__":
    main()

"""Does dispatch slow down as the ready queue grows?

    .venv/bin/python bench/dispatch_queue.py [--done 300] [--capacity 8] [--runs 2]

(Not bench/queue.py: a script there would shadow the standard library's queue module for
every script in bench/.)

Builds two SQLite workspaces by inserting rows directly: 500 and 10,000 QUEUED tasks, all
ready, run by a `command` agent that is /bin/true (so the agents cost next to nothing and
the engine's own work shows). Runs a real Engine on each, with the same capacity, until
`--done` tasks have succeeded, and reports the throughput (tasks/s) of each, best of
`--runs`, and their ratio (target: 10,000-queue throughput >= 0.8 x 500-queue). Never
asserts.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

import tomli_w
from sqlalchemy import func, insert
from sqlmodel import select

from relay_engine.loop.engine import Engine
from relay_engine.store.db import Store
from relay_engine.store.schema import Job, Task

SIZES = (500, 10_000)


def write_config(workspace: Path, capacity: int, tick_seconds: float = 0.05) -> None:
    """A relay.toml whose one agent is /bin/true, ticking fast unless told (scale.py shares
    it)."""
    config = {
        "engine": {"max_concurrent_agents": capacity, "tick_seconds": tick_seconds},
        "agents": [
            {
                "id": "true",
                "provider": "command",
                "command": [shutil.which("true") or "/bin/true"],
                "roles": ["implementer"],
                # Explicit: the default is bwrap wherever it works, 7 ms of CPU per start
                # that has nothing to do with dispatch (engine_overhead.py measures it).
                "sandbox": "none",
            }
        ],
    }
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))


def insert_queued(store: Store, count: int, *, job: str = "bench") -> None:
    """One ACTIVE job with ``count`` ready QUEUED tasks, inserted directly."""
    now = time.time()
    rows = [
        {
            "key": f"{job}/t{i:05d}",
            "job_id": job,
            "task_id": f"t{i:05d}",
            "title": f"task {i}",
            "input": "do the thing",
            "state": "QUEUED",
            "priority": "P2",
            "dependencies": [],
            "external_deps": [],
            "execution_history": [],
            "created_at": now + i * 1e-6,
            "updated_at": now,
            "spec_hash": "x",
        }
        for i in range(count)
    ]
    with store.write(wakes=True) as session:  # as a submit does: engines with no work sleep
        session.add(Job(id=job, title=job, state="ACTIVE", created_at=now))
        session.execute(insert(Task), rows)


def write_workspace(root: Path, queued: int, capacity: int) -> Path:
    workspace = root / f"q{queued}"
    workspace.mkdir()
    write_config(workspace, capacity)
    store = Store.for_workspace(workspace)
    insert_queued(store, queued)
    store.dispose()
    return workspace


def succeeded(store: Store) -> int:
    with store.read() as session:
        query = select(func.count()).select_from(Task).where(Task.state == "SUCCEEDED")
        return int(session.exec(query).one())


def throughput(workspace: Path, done: int) -> float:
    """Tasks per second from the engine's start until ``done`` tasks succeeded."""
    store = Store.for_workspace(workspace)
    engine = Engine(workspace, store=store)
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(stop,), daemon=True)
    started = time.perf_counter()
    runner.start()
    while succeeded(store) < done:
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    stop.set()
    engine.wake()
    runner.join(60)
    store.dispose()
    return done / elapsed


def measure(root: Path, queued: int, done: int, capacity: int, runs: int) -> float:
    best = 0.0
    for run in range(runs):
        workspace = write_workspace(root / f"run{run}", queued, capacity)
        best = max(best, throughput(workspace, done))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--done", type=int, default=300)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relay-bench-queue-") as tmp:
        root = Path(tmp)
        for run in range(args.runs):
            (root / f"run{run}").mkdir()
        rates = {n: measure(root, n, args.done, args.capacity, args.runs) for n in SIZES}
    print(f"capacity={args.capacity} tasks measured={args.done} (best of {args.runs})")
    for n, rate in rates.items():
        print(f"{n:>6} queued: {rate:6.1f} tasks/s")
    small, big = rates[SIZES[0]], rates[SIZES[1]]
    print(f"ratio {SIZES[1]}/{SIZES[0]}: {big / small:.2f}  (target >= 0.8)")


if __name__ == "__main__":
    main()

"""Console under load: 5,000 tasks, 500 task state changes per second, and a 50,000-task run.

Prints, each against its target:
(1) the UI thread's CPU time to apply a snapshot, per task changed, against a bare
    DataTable applying the same changes (one ``update_cell`` per task), measured in the
    same run: ratio, target <= 1.5x. CPU time of the UI thread, not wall time, so other
    processes on a shared machine do not move the ratio;
(2) p95 from a key press to the cursor having moved, while the changes stream in
    (target <= 50 ms; wall time, so it is printed with the load average it was taken at);
(3) peak RSS of a console showing 50,000 tasks while 500 change per second, in a process
    of its own (target <= 400 MB).

Run: .venv/bin/python bench/console.py [--seconds 10] [--tasks 5000] [--rate 500]

``--scale`` measures instead how the console grows with the work it shows: the UI thread's
CPU per snapshot applied and the peak RSS of a console over ``--scale-tasks`` tasks
(2,000, 50 of them running) against one over a tenth of that (200, 5 running), each in a
process of its own, with the same changes per second: ratios, measured in the same run
(no absolute target: a shared machine moves absolute times, not much their ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert
from sqlmodel import col, update
from textual import events
from textual.app import App, ComposeResult
from textual.widgets import DataTable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relay_engine.contracts.config import default_config
from relay_engine.store.db import Store
from relay_engine.store.schema import Event, Execution, Job, Task
from relay_tui.app import RelayApp
from relay_tui.widgets.jobs import JobsTable

STATES = ("QUEUED", "RUNNING", "SUCCEEDED", "PARKED")
BATCHES_PER_SECOND = 10
APPLY_TARGET, LATENCY_TARGET_MS, RSS_TARGET_MB = 1.5, 50.0, 400.0


def seed(path: Path, tasks: int, running: int = 0) -> str:
    """``tasks`` draft tasks in one job; the first ``running`` of them running, each with
    its execution (what the Running agents pane shows)."""
    url = f"sqlite:///{path / 'bench.db'}"
    store = Store(url)
    with store.write() as session:
        session.add(Job(id="bench", title="bench"))
    for start in range(0, tasks, 5000):  # core inserts in chunks: seeding must not set the RSS
        rows = [
            {
                "key": f"bench/t{i:05d}",
                "job_id": "bench",
                "task_id": f"t{i:05d}",
                "title": f"task {i}",
                "input": "",
                "wave": 1 + i // 1000,
                "state": "DRAFT",
                "dependencies": [],
                "created_at": float(i),
            }
            for i in range(start, min(tasks, start + 5000))
        ]
        with store.write() as session:
            session.execute(insert(Task), rows)
    if running:
        now = time.time()
        runs = [
            {"id": f"ex{i:05d}", "job_id": "bench", "task_key": f"bench/t{i:05d}",
             "agent": "sim", "provider": "sim", "attempt": 1, "started_at": now - i}
            for i in range(running)
        ]  # fmt: skip
        with store.write() as session:
            session.execute(insert(Execution), runs)
            session.exec(  # type: ignore[call-overload]
                update(Task)
                .where(col(Task.key).in_([r["task_key"] for r in runs]))
                .values(state="RUNNING", agent="sim", provider="sim", attempt=1, started_at=now)
            )
            for run in runs:
                session.exec(  # type: ignore[call-overload]
                    update(Task)
                    .where(col(Task.key) == run["task_key"])
                    .values(execution_id=run["id"])
                )
    store.dispose()
    return url


def writer(
    url: str,
    tasks: int,
    rate: int,
    seconds: float,
    nudge: Callable[[], None],
    done: threading.Event,
) -> None:
    """Change ``rate`` task states per second, with one event each (as the engine does)."""
    store = Store(url)
    per_batch = rate // BATCHES_PER_SECOND
    start = time.monotonic()
    batch = 0
    while time.monotonic() - start < seconds:
        keys = [f"bench/t{(batch * per_batch + i) % tasks:05d}" for i in range(per_batch)]
        state = STATES[batch % len(STATES)]
        with store.write() as session:
            session.exec(update(Task).where(col(Task.key).in_(keys)).values(state=state))  # type: ignore[call-overload]
            session.add_all(
                Event(at=time.time(), job_id="bench", task_key=k, kind=f"task.{state.lower()}")
                for k in keys
            )
        nudge()
        batch += 1
        time.sleep(max(0.0, start + batch / BATCHES_PER_SECOND - time.monotonic()))
    store.dispose()
    done.set()


class Baseline(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable()


async def baseline(tasks: int, rate: int, seconds: float) -> list[float]:
    """CPU seconds per task changed, for a bare DataTable given the same changes."""
    app = Baseline()
    per_batch = rate // BATCHES_PER_SECOND
    per_task: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(DataTable)
        for key in ("task", "state", "agent", "try", "info"):
            table.add_column(key, key=key)
        for i in range(tasks):
            table.add_row(f"t{i:05d}", "draft", "", "0/3", "", key=f"bench/t{i:05d}")
        await pilot.pause()
        for batch in range(int(seconds * BATCHES_PER_SECOND)):
            state = STATES[batch % len(STATES)].lower()
            started = time.thread_time()
            for i in range(per_batch):
                table.update_cell(f"bench/t{(batch * per_batch + i) % tasks:05d}", "state", state)
            per_task.append((time.thread_time() - started) / per_batch)
            await pilot.pause(1 / BATCHES_PER_SECOND)
    return per_task


async def console(
    url: str,
    path: Path,
    args: argparse.Namespace,
    *,
    press_keys: bool = True,
    per_snapshot: list[float] | None = None,
) -> tuple[list[float], list[float]]:
    """CPU seconds per task changed for each snapshot, and key-press latencies (and, into
    ``per_snapshot``, the CPU seconds of each snapshot applied)."""
    app = RelayApp(path, db_url=url, config=default_config(), poll_interval=0.05)
    latencies: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        table = app.main_screen.query_one(JobsTable)
        loaded = len(app.applied)
        done = threading.Event()
        thread = threading.Thread(
            target=writer, args=(url, args.tasks, args.rate, args.seconds, app.feed.nudge, done)
        )
        thread.start()
        while not done.is_set():
            if press_keys:
                latencies.append(await key_latency(app, table))
            await asyncio.sleep(0.2)
        thread.join()
        await pilot.pause(0.5)
        applied = list(app.applied)[loaded:]
    if per_snapshot is not None:
        per_snapshot.extend(cpu for cpu, changed in applied if changed)
    return [cpu / changed for cpu, changed in applied if changed], latencies


async def key_latency(app: RelayApp, table: JobsTable) -> float:
    """Seconds from a key reaching the app (as the terminal driver posts it) to the move."""
    before = table.cursor_row
    started = time.perf_counter()
    app.post_message(events.Key("down", None))
    while table.cursor_row == before:
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 20 else max(values)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def big_run(args: argparse.Namespace) -> None:
    """In a process of its own: a console over ``--tasks`` tasks; prints its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        url = seed(path, args.tasks)
        asyncio.run(console(url, path, args, press_keys=False))
    print(f"{peak_rss_mb():.0f}")


def scale_one(args: argparse.Namespace) -> None:
    """In a process of its own: a console over ``--tasks`` tasks, ``--running`` of them
    running; prints the CPU of each snapshot applied (median, p95) and its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        url = seed(path, args.tasks, args.running)
        applies: list[float] = []
        asyncio.run(console(url, path, args, press_keys=False, per_snapshot=applies))
    print(json.dumps({
        "median_ms": statistics.median(applies) * 1000, "p95_ms": p95(applies) * 1000,
        "snapshots": len(applies), "rss_mb": peak_rss_mb(),
    }))  # fmt: skip


def scale(args: argparse.Namespace) -> None:
    """The console at ``--scale-tasks`` against a tenth of it, as ratios."""
    found = {}
    big = (args.scale_tasks, args.scale_running)
    small = (max(1, big[0] // 10), max(1, big[1] // 10))
    for tasks, running in (small, big):
        command = [sys.executable, __file__, "--scale-one", "--tasks", str(tasks)]
        command += ["--running", str(running), "--rate", str(args.rate)]
        command += ["--seconds", str(args.seconds)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        found[tasks] = json.loads(done.stdout.strip().splitlines()[-1])
        row = found[tasks]
        print(
            f"{tasks} tasks, {running} running: snapshot apply median {row['median_ms']:.2f} ms, "
            f"p95 {row['p95_ms']:.2f} ms over {row['snapshots']} snapshots; "
            f"peak RSS {row['rss_mb']:.0f} MB"
        )
    base, load = found[small[0]], found[big[0]]
    print(
        f"x{big[0] // small[0]} the tasks: apply median x{load['median_ms'] / base['median_ms']:.2f}, "
        f"p95 x{load['p95_ms'] / base['p95_ms']:.2f}, peak RSS x{load['rss_mb'] / base['rss_mb']:.2f} "
        f"({args.rate} state changes/s for {args.seconds:.0f} s; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--big", type=int, default=50_000, help="tasks in the RSS run")
    parser.add_argument("--rss-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scale", action="store_true", help="the console at 2,000 tasks vs 200")
    parser.add_argument("--scale-tasks", type=int, default=2000)
    parser.add_argument("--scale-running", type=int, default=50)
    parser.add_argument("--scale-one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--running", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_only:
        big_run(args)
        return
    if args.scale_one:
        scale_one(args)
        return
    if args.scale:
        scale(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        url = seed(path, args.tasks)
        base = asyncio.run(baseline(args.tasks, args.rate, args.seconds))
        applies, latencies = asyncio.run(console(url, path, args))
    load = os.getloadavg()[0]
    base_us, apply_us = statistics.median(base) * 1e6, statistics.median(applies) * 1e6
    ratio = apply_us / base_us
    print(f"tasks {args.tasks}, {args.rate} state changes/s for {args.seconds:.0f} s")
    print(
        f"batch apply (UI thread CPU per task changed): console median {apply_us:.1f} us over "
        f"{len(applies)} snapshots, bare DataTable {base_us:.1f} us -> ratio {ratio:.2f}x "
        f"(target <= {APPLY_TARGET}x)"
    )
    print(
        f"key press -> screen: p95 {p95(latencies) * 1000:.1f} ms, median "
        f"{statistics.median(latencies) * 1000:.1f} ms over {len(latencies)} presses "
        f"(target <= {LATENCY_TARGET_MS:.0f} ms; load average {load:.1f} on {os.cpu_count()} cores)"
    )
    command = [sys.executable, __file__, "--rss-only", "--tasks", str(args.big)]
    command += ["--rate", str(args.rate), "--seconds", str(min(args.seconds, 10.0))]
    rss = float(
        subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()[-1]
    )
    print(f"peak RSS with {args.big} tasks: {rss:.0f} MB (target <= {RSS_TARGET_MB:.0f} MB)")


if __name__ == "__main__":
    main()

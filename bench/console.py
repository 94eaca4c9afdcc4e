"""Console under load: 5,000 tasks, 500 task state changes per second for 10 seconds.

Prints (1) the time the console takes to apply each batch against a baseline (the same cell
updates applied to a bare DataTable) as a ratio, (2) p95 latency from a key press to the
screen reflecting it (target <= 100 ms) and (3) peak RSS (target <= 300 MB).

Run: .venv/bin/python bench/console.py [--seconds 10] [--tasks 5000] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from sqlmodel import col, update
from textual import events
from textual.app import App, ComposeResult
from textual.widgets import DataTable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relay_engine.config import default_config
from relay_engine.model import Event, Job, Task
from relay_engine.store import Store
from relay_tui.app import RelayApp
from relay_tui.widgets.panes import JobsTable

STATES = ("QUEUED", "RUNNING", "SUCCEEDED", "PARKED")
BATCHES_PER_SECOND = 10


def seed(path: Path, tasks: int) -> str:
    url = f"sqlite:///{path / 'bench.db'}"
    store = Store(url)
    with store.write() as session:
        session.add(Job(id="bench", title="bench"))
        session.add_all(
            Task(
                key=f"bench/t{i:05d}",
                job_id="bench",
                task_id=f"t{i:05d}",
                title=f"task {i}",
                wave=1 + i // 1000,
                state="DRAFT",
                created_at=float(i),
            )
            for i in range(tasks)
        )
    store.dispose()
    return url


def writer(
    url: str, tasks: int, rate: int, seconds: float, nudge: threading.Event, done: threading.Event
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
        nudge.set()
        batch += 1
        time.sleep(max(0.0, start + batch / BATCHES_PER_SECOND - time.monotonic()))
    store.dispose()
    done.set()


class Baseline(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable()


async def baseline(tasks: int, rate: int, seconds: float) -> list[float]:
    app = Baseline()
    per_batch = rate // BATCHES_PER_SECOND
    times: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(DataTable)
        for key in ("task", "state", "agent", "try", "info"):
            table.add_column(key, key=key)
        for i in range(tasks):
            table.add_row(f"t{i:05d}", "draft", "", "0/3", "", key=f"bench/t{i:05d}")
        await pilot.pause()
        for batch in range(int(seconds * BATCHES_PER_SECOND)):
            state = STATES[batch % len(STATES)].lower()
            started = time.perf_counter()
            for i in range(per_batch):
                table.update_cell(f"bench/t{(batch * per_batch + i) % tasks:05d}", "state", state)
            times.append(time.perf_counter() - started)
            await pilot.pause(1 / BATCHES_PER_SECOND)
    return times


async def console(
    url: str, path: Path, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    app = RelayApp(path, db_url=url, config=default_config(), poll_interval=0.05)
    latencies: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        table = app.main_screen.query_one(JobsTable)
        loaded = len(app.apply_seconds)
        done = threading.Event()
        thread = threading.Thread(
            target=writer, args=(url, args.tasks, args.rate, args.seconds, app.feed.nudge, done)
        )
        thread.start()
        while not done.is_set():
            before = table.cursor_row
            started = time.perf_counter()
            app.post_message(events.Key("down", None))  # as the terminal driver does
            while table.cursor_row == before:
                await asyncio.sleep(0.001)
            frames = app.screen._compositor  # noqa: F841 - rendering follows in the same idle
            await asyncio.sleep(0)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.2)
        thread.join()
        await pilot.pause(0.5)
        applies = app.apply_seconds[loaded:]
    return applies, latencies


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 20 else max(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        url = seed(path, args.tasks)
        base = asyncio.run(baseline(args.tasks, args.rate, args.seconds))
        applies, latencies = asyncio.run(console(url, path, args))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    base_ms, apply_ms = statistics.median(base) * 1000, statistics.median(applies) * 1000
    print(f"tasks {args.tasks}, {args.rate} state changes/s for {args.seconds:.0f} s")
    print(
        f"batch apply: console median {apply_ms:.2f} ms over {len(applies)} snapshots "
        f"(p95 {p95(applies) * 1000:.2f} ms); bare DataTable median {base_ms:.2f} ms "
        f"-> ratio {apply_ms / base_ms:.1f}x"
    )
    print(
        f"key press -> screen: p95 {p95(latencies) * 1000:.1f} ms over {len(latencies)} presses (target <= 100 ms)"
    )
    print(f"peak RSS: {rss_mb:.0f} MB (target <= 300 MB)")


if __name__ == "__main__":
    main()

"""The console's memory stays bounded under a busy feed: bursts keep a few of their
events, and rows changed out of view do not keep the snapshot of their change alive."""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

from console_helpers import attached_app, cursor_to, run_async, wait_loaded, wait_until
from sqlalchemy import insert
from sqlmodel import col, update
from textual.app import App, ComposeResult

from relay_engine.store.db import Store
from relay_engine.store.schema import Event, Job, Task
from relay_tui.data.snapshot import EventView, Snapshot
from relay_tui.render.events import KEPT_PER_BURST
from relay_tui.screens.main import event_preview
from relay_tui.widgets.events import EventList
from relay_tui.widgets.jobs import JobsTable

BURST = 5000


class EventsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EventList()


def started(index: int) -> EventView:
    key = f"bench/t{index:05d}"
    return EventView(index + 1, 100.0, "task.started", "info", f"{key} started", "bench", key)


@run_async
async def test_a_burst_of_5000_events_keeps_a_few_and_its_line_counts_them_all() -> None:
    app = EventsApp()
    async with app.run_test(size=(120, 20)) as pilot:
        log = app.query_one(EventList)
        for start in range(0, BURST, 1000):  # five snapshots of the same burst
            log.add_events([started(i) for i in range(start, start + 1000)], {})
            await pilot.pause()
        [entry] = log.entries
        assert len(entry.events) <= KEPT_PER_BURST
        line = str(log.get_option_at_index(0).prompt)
        assert "bench: 5000 tasks started: t00000, t00001" in line and "(+4994)" in line
        assert event_preview(entry).startswith("5000 task.started: bench/t00000, ")


def seed(path: Path, tasks: int) -> str:
    url = f"sqlite:///{path / 'busy.db'}"
    store = Store(url)
    with store.write() as session:
        session.add(Job(id="bench", title="bench"))
    rows = [
        {"key": f"bench/t{i:05d}", "job_id": "bench", "task_id": f"t{i:05d}",
         "title": f"task {i}", "input": "", "wave": 1, "state": "DRAFT",
         "dependencies": [], "created_at": float(i)}
        for i in range(tasks)
    ]  # fmt: skip
    with store.write() as session:
        session.execute(insert(Task), rows)
    store.dispose()
    return url


def change(url: str, keys: list[str], state: str) -> None:
    store = Store(url)
    with store.write() as session:
        session.exec(update(Task).where(col(Task.key).in_(keys)).values(state=state))  # type: ignore[call-overload]
        session.add_all(
            Event(at=time.time(), job_id="bench", task_key=k, kind=f"task.{state.lower()}")
            for k in keys
        )
    store.dispose()


@run_async
async def test_rows_changed_out_of_view_do_not_keep_old_snapshots_alive(tmp_path: Path) -> None:
    url = seed(tmp_path, 200)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        seen: list[weakref.ref[Snapshot]] = []
        for round_, state in enumerate(("QUEUED", "PARKED", "QUEUED")):
            keys = [f"bench/t{i:05d}" for i in range(150 + 10 * round_, 160 + 10 * round_)]
            change(url, keys, state)
            app.feed.nudge()
            await wait_until(pilot, lambda k=keys[-1], s=state: _shown(app, k) == s.lower())
            assert app.snapshot is not None
            seen.append(weakref.ref(app.snapshot))
        await pilot.pause()
        gc.collect()
        assert [ref() is None for ref in seen[:-1]] == [True, True]
        await cursor_to(pilot, "bench/t00155")
        table = app.main_screen.query_one(JobsTable)
        row = table.get_row("bench/t00155")
        assert "queued" in " ".join(str(cell) for cell in row)


def _shown(app: object, key: str) -> str | None:
    snapshot = getattr(app, "snapshot", None)
    task = snapshot.tasks.get(key) if snapshot else None
    return task.state.lower() if task else None

"""Helpers shared by the console tests (imported by name: tests/tui is on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from textual import events
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable

from relay_engine.contracts.config import default_config
from relay_tui.app import RelayApp
from relay_tui.demo.sample import frozen_clock
from relay_tui.screens.main import PANES
from relay_tui.widgets.live_table import LiveTable


def attached_app(path: Path, url: str) -> RelayApp:
    """The console attached to a fixed database: no engine, frozen time, no blinking."""
    return RelayApp(path, db_url=url, clock=frozen_clock, blink=False, config=default_config())


async def wait_until(
    pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 10.0
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the console")
        await pilot.pause(0.05)


def tables_settled(app: RelayApp) -> bool:
    """DataTables size their columns on idle; a screenshot must wait for that."""
    return not any(
        table._require_update_dimensions  # no public API tells "column widths are final"
        for screen in app.screen_stack
        for table in screen.query(DataTable)
    )


async def settle(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, RelayApp)
    await pilot.pause()
    await wait_until(pilot, lambda: tables_settled(app))
    await pilot.pause()


async def wait_loaded(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, RelayApp)
    await wait_until(pilot, lambda: app.snapshot is not None)
    await settle(pilot)


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test in a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def runner(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return runner


LoadingScreen = TypeVar("LoadingScreen", bound=Screen[Any])


async def opened(pilot: Pilot[None], kind: type[LoadingScreen], *keys: str) -> LoadingScreen:
    """Press ``keys``, then wait until a ``kind`` screen is on top and its data has loaded
    (the screens that read in a worker set ``loaded``); the screen is read again on every
    poll, since it may be pushed a frame after the key."""
    await pilot.press(*keys)

    def ready() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, kind) and bool(screen.loaded.is_set())

    await wait_until(pilot, ready)
    screen = pilot.app.screen
    assert isinstance(screen, kind)
    return screen


async def open_row(
    pilot: Pilot[None], key: str, kind: type[LoadingScreen], pane: str = "jobs"
) -> LoadingScreen:
    """Open the row ``key`` of ``pane`` with enter, as an operator does."""
    await cursor_to(pilot, key, pane)
    return await opened(pilot, kind, "enter")


async def cursor_to(pilot: Pilot[None], key: str, pane: str = "jobs") -> None:
    """Move the cursor of ``pane`` onto the row ``key`` with the keys an operator presses."""
    app = pilot.app
    assert isinstance(app, RelayApp)
    table = app.main_screen.query_one(f"#{pane}", LiveTable)
    await wait_until(pilot, lambda: key in table.row_keys)
    number = str(1 + [name for name, _title in PANES].index(pane))
    for _ in range(3):  # a filter box may hold the focus (and take the digit): escape first
        if table.has_focus:
            break
        await type_keys(pilot, "escape", number)
        await pilot.pause(0.1)
    assert table.has_focus, f"{pane} did not take the focus ({app.screen.focused!r} has it)"
    for _ in range(2 * len(table.row_keys) + 2):
        if table.cursor_key == key:
            await pilot.pause()
            return
        before = table.cursor_row
        rows = table.row_keys
        if key not in rows:
            break
        for _attempt in range(3):  # a key sent while a screen closes goes to that screen
            await type_keys(pilot, "down" if rows.index(key) > before else "up")
            with contextlib.suppress(AssertionError):
                await wait_until(pilot, lambda b=before: table.cursor_row != b, timeout=2.0)
                break
    raise AssertionError(f"could not move the cursor of {pane} to {key}")


async def type_keys(pilot: Pilot[None], *keys: str, gap: float = 0.01) -> None:
    """Keys as a fast typist sends them: through the driver, ``gap`` seconds apart.

    ``pilot.press`` waits until the process is idle after every key; with a live engine in
    the same process it never is, and each key would cost its full time-out.
    """
    for key in keys:
        send_keys(pilot, key)
        await asyncio.sleep(gap)


def send_keys(pilot: Pilot[None], *keys: str) -> None:
    """Keys queued through the driver in one go, none waiting for the one before."""
    app = pilot.app
    assert app._driver is not None
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else (" " if key == "space" else None))
        event.set_sender(app)
        app._driver.send_message(event)


def finish_then_apply(url: str, key: str) -> None:
    """Another process marks ``key`` succeeded, then an engine elsewhere applies the waiting
    commands: a retry of that task is refused, as happens when the state moves first."""
    from relay_engine.ops import commands
    from relay_engine.store.db import Store
    from relay_engine.store.schema import Task
    from relay_tui.demo.sample import NOW

    store = Store(url)
    with store.write() as session:
        task = session.get(Task, key)
        assert task is not None
        task.state = "SUCCEEDED"
    commands.apply_pending(store, "engine-elsewhere", NOW)
    store.dispose()

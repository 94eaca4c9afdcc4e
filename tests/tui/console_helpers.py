"""Helpers shared by the console tests (imported by name: tests/tui is on sys.path)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from relay_engine.config import default_config
from relay_tui.app import RelayApp
from relay_tui.sample import frozen_clock


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

"""500 random keys on every screen of a live console: nothing may raise or end the app."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from console_helpers import cursor_to, run_async, type_keys, wait_until
from live_helpers import churn_tasks, live_app, live_workspace, quit_app, submit
from test_live_keys import SEED, back_to_main
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input

from relay_tui.app import RelayApp
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.widgets.jobs import JobsTable
from relay_tui.widgets.live_table import LiveTable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

KEYS = (
    *"crpagCsoedvwynjkG12345xb",
    "enter", "slash", "escape", "tab", "shift+tab", "up", "down", "home", "end",
    "pageup", "pagedown", "backspace", "question_mark", "space", "left", "right",
)  # fmt: skip
"""Every key the console binds, plus typing; q, ctrl+c and ctrl+p (which can quit) are left out."""
PRESSES = 500


async def open_screen(pilot: Pilot[None], app: RelayApp, kind: type[Screen[None]]) -> None:
    await back_to_main(pilot, app)
    # A filter or a saved view (v) typed at random could hide the row: escape clears the
    # one of the pane it is pressed on, so on the jobs pane. The first escape closes a
    # search box left open on the events pane, which would take the "1" as text.
    await type_keys(pilot, "escape", "1", "escape")
    if kind is MainScreen:
        return
    row = "churn/t00" if kind is DetailScreen else "job:churn"
    jobs = app.main_screen.query_one(JobsTable)
    if row not in jobs.row_keys and jobs.fold_done:  # keys cancelled or finished the job:
        await type_keys(pilot, "f")  # it folded to one line, as finished jobs do
    try:
        await cursor_to(pilot, row)
    except AssertionError as error:
        main = app.main_screen
        jobs = main.query_one("#jobs", LiveTable)
        filter_text = main.query_one("#filter", Input).value
        raise AssertionError(
            f"seed {SEED}: {error}; the jobs pane has {len(jobs.row_keys)} rows "
            f"(first {list(jobs.row_keys)[:4]}), filter {filter_text!r}, "
            f"toasts {[n.message for n in app._notifications][-5:]}"
        ) from None
    await type_keys(pilot, "enter")
    try:
        await wait_until(pilot, lambda: isinstance(app.screen, kind))
    except AssertionError:
        main = app.main_screen
        raise AssertionError(
            f"seed {SEED}: enter on {row} left {app.screen!r}; focus {main.focused!r}, "
            f"target {app.current_target()}, toasts {[n.message for n in app._notifications]}"
        ) from None


@run_async
async def test_500_random_keys_on_every_screen(tmp_path: Path) -> None:
    workspace = live_workspace(tmp_path)
    submit(workspace, "churn", churn_tasks(30, SEED), wave_gate="operator")
    app = live_app(workspace)
    rng = random.Random(SEED)
    reopened: list[float] = []
    # Toasts hidden (run_test's default): drawing them made this test 200 s instead of 133;
    # the tmux bursts (test_tmux_slow) and the live-key tests press keys with toasts drawn.
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None and bool(app.snapshot.tasks))
        for kind, size in (
            (MainScreen, (80, 24)),
            (DetailScreen, (120, 36)),
            (JobScreen, (160, 48)),
        ):
            await pilot.resize_terminal(*size)
            await open_screen(pilot, app, kind)
            for _ in range(PRESSES // 25):
                await type_keys(pilot, *(rng.choice(KEYS) for _ in range(25)), gap=0.05)
                await pilot.pause(0.05)
                assert app.return_code is None, f"seed {SEED}: the console ended"
                if not isinstance(app.screen, kind):
                    started = time.monotonic()
                    await open_screen(pilot, app, kind)
                    reopened.append(time.monotonic() - started)
        assert app._exception is None
        print(f"reopened {len(reopened)} times, {sum(reopened):.1f} s")
        await quit_app(pilot, app)
    assert app.return_code == 0

"""Pilot tests: keys in, database rows out (attached to a fixed database, no engine)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from console_helpers import (
    attached_app,
    cursor_to,
    run_async,
    send_keys,
    type_keys,
    wait_loaded,
    wait_until,
)
from sqlmodel import select
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.screen import Screen

from relay_engine.contracts.config import default_config
from relay_engine.store.db import Store
from relay_engine.store.schema import Command, Task
from relay_tui.app import RelayApp
from relay_tui.data.feed import FeedReader
from relay_tui.data.projection import Projection
from relay_tui.data.snapshot import Snapshot
from relay_tui.demo.sample import NOW, frozen_clock, write_sample
from relay_tui.messages import SnapshotLoaded
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import PANES
from relay_tui.screens.pin import PinScreen
from relay_tui.screens.replan import ReplanScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.jobs import JobsTable


def commands(app: RelayApp) -> list[tuple[str, dict]]:
    with app.store.read() as session:
        return [
            (c.kind, c.payload or {}) for c in session.exec(select(Command).order_by(Command.id))
        ]


async def select_row(pilot: Pilot[None], key: str) -> None:
    await wait_loaded(pilot)
    await cursor_to(pilot, key)


async def select_task(pilot: Pilot[None], key: str) -> None:
    await wait_loaded(pilot)
    await cursor_to(pilot, key)
    assert isinstance(pilot.app, RelayApp)
    assert pilot.app.current_target().task_key == key


OPENINGS: tuple[tuple[str, str, type[Screen[Any]], str], ...] = (
    ("search/docs", "c", ConfirmScreen, "n"),
    ("search/docs", "p", ReplanScreen, "escape"),
    ("search/docs", "a", PinScreen, "escape"),
    ("billing/reports", "g", ConfirmScreen, "escape"),
    ("billing/reports", "C", ConfirmScreen, "n"),
    ("search/docs", "question_mark", HelpScreen, "escape"),
    ("search/docs", "enter", DetailScreen, "escape"),
    ("job:search", "enter", JobScreen, "escape"),
    ("search/docs", "u", UsageScreen, "escape"),
    ("search/docs", "ctrl+p", CommandPalette, "escape"),
)
"""Each screen the main screen opens: from which row, with which key, closed how."""


@run_async
async def test_every_modal_opens_and_closes(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        for row, key, screen_type, close in OPENINGS:
            await select_row(pilot, row)
            await pilot.press(key)
            await wait_until(pilot, lambda t=screen_type: isinstance(pilot.app.screen, t))
            await pilot.press(close)
            await wait_until(pilot, lambda: pilot.app.screen is sample_app.main_screen)
        assert commands(sample_app) == []


@pytest.mark.parametrize(
    ("opening", "gone"),
    [
        pytest.param(opening, gone, id=f"{opening[2].__name__}-{opening[1]}-{gone}")
        for opening in OPENINGS
        for gone in ("popped", "quit")
        if not (gone == "popped" and opening[2] is CommandPalette)  # it closes only itself
    ],
)
def test_a_screen_closed_while_it_mounts_ends_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    opening: tuple[str, str, type[Screen[Any]], str],
    gone: str,
) -> None:
    """The console quitting (the palette's Quit stopping the engine) or popping the screen
    while it mounts: random keys in tmux crashed the console on a dialog whose mount
    handler found its buttons gone."""
    row, key, screen_type, _close = opening
    app = attached_app(tmp_path, write_sample(tmp_path))
    push = app.push_screen

    def push_then_lose(screen: Screen[Any], *args: Any, **kwargs: Any) -> Any:
        pushed = push(screen, *args, **kwargs)
        if isinstance(screen, screen_type):
            app.pop_screen() if gone == "popped" else app.exit()
        return pushed

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await select_row(pilot, row)
            monkeypatch.setattr(app, "push_screen", push_then_lose)
            await pilot.press(key)
            await pilot.pause(0.3)
            if gone == "popped":
                assert app.screen is app.main_screen
                assert app.return_code is None

    asyncio.run(drive())
    assert app.return_code in (None, 0), f"the console ended with {app.return_code}"
    assert app._exception is None, app._exception


@run_async
async def test_modals_send_their_commands(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await select_task(pilot, "billing/reports")
        await pilot.press("p", *"by region", "enter")
        await pilot.press("g", "y")
        await select_task(pilot, "search/api")
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PinScreen))
        await pilot.press("down", "enter")
        await pilot.press("c", "y")
        await wait_until(pilot, lambda: len(commands(sample_app)) == 4)
    assert commands(sample_app) == [
        ("replan", {"job": "billing", "guidance": "by region"}),
        ("approve", {"job": "billing"}),
        ("pin", {"task": "search/api", "agent": "sim-codex"}),  # gemini-b cannot log in
        ("cancel", {"task": "search/api"}),
    ]


@run_async
async def test_retry_only_offered_for_failed_tasks(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await select_task(pilot, "search/docs")
        await pilot.press("r")
        await select_task(pilot, "search/fixtures")
        await pilot.press("r")
        await wait_until(pilot, lambda: len(commands(sample_app)) == 1)
    assert commands(sample_app) == [("retry", {"task": "search/fixtures"})]


@run_async
async def test_filter_by_state_and_text(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        everything = table.row_keys
        await pilot.press("slash", *"failed")
        await wait_until(pilot, lambda: table.row_keys != everything)
        failed = ["search/fixtures", "i18n/extract", "mobile/assess-1"]
        assert [k for k in table.row_keys if "/" in k] == failed
        # While the box holds the focus, the cursor row's preview stays under the rows.
        preview = sample_app.main_screen.query_one("#jobs-preview")
        assert not table.has_focus and preview.region.height > 0
        await pilot.press("enter")
        assert [k for k in table.row_keys if "/" in k] == failed
        await pilot.press("slash")
        await pilot.press("escape")
        await wait_until(pilot, lambda: table.row_keys == everything)
        await pilot.press("slash", *"search/ui")
        await wait_until(pilot, lambda: [k for k in table.row_keys if "/" in k] == ["search/ui"])


@run_async
async def test_escape_clears_the_filter_of_the_pane_it_is_pressed_on(sample_app: RelayApp) -> None:
    """Searching the events pane, then going back to the jobs pane: escape there clears the
    task filter (it used to clear only the event search, leaving rows hidden for good)."""
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        everything = table.row_keys
        await pilot.press("slash", *"failed", "enter")
        await wait_until(pilot, lambda: table.row_keys != everything)
        await pilot.press("5", "slash", *"merged", "escape")  # search the events, then clear it
        await pilot.press("1", "escape")
        await wait_until(pilot, lambda: table.row_keys == everything)


def shown_panes(app: RelayApp) -> set[str]:
    main = app.main_screen
    return {name for name, _title in PANES if main.query_one(f"#{name}-pane").display}


@run_async
async def test_resizing_keeps_the_selection_and_picks_a_layout(sample_app: RelayApp) -> None:
    everything = {name for name, _title in PANES}
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await select_task(pilot, "search/ui")
        table = sample_app.main_screen.query_one(JobsTable)
        for size, layout, shown in (
            ((80, 24), "single", {"jobs"}),
            ((140, 45), "columns", {"jobs", "running", "providers"}),
            ((120, 36), "columns", {"jobs", "running", "providers"}),
            ((160, 48), "grid", everything),
        ):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert sample_app.main_screen.layout_name == layout
            assert shown_panes(sample_app) == shown
            assert table.cursor_key == "search/ui"
            assert sample_app.current_target().task_key == "search/ui"


@run_async
async def test_number_keys_and_tab_show_panes_where_the_layout_hides_them(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        main = sample_app.main_screen
        await pilot.press("tab")
        assert shown_panes(sample_app) == {"running"}
        await pilot.press("shift+tab")
        assert shown_panes(sample_app) == {"jobs"}
        await pilot.press("4")
        assert shown_panes(sample_app) == {"planner"}
        assert main.focused is main.query_one("#planner")
        await pilot.resize_terminal(140, 45)
        await pilot.pause()
        assert shown_panes(sample_app) == {"jobs", "running", "planner"}
        await pilot.press("5")
        assert shown_panes(sample_app) == {"jobs", "running", "events"}
        await pilot.press("1")
        assert main.focused is main.query_one("#jobs")


@run_async
async def test_keymap_from_config_remaps_by_binding_id(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    config = default_config().model_copy(update={"keymap": {"cancel": "delete"}})
    app = RelayApp(tmp_path, db_url=url, clock=frozen_clock, blink=False, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await select_task(pilot, "search/docs")
        await pilot.press("c")
        await pilot.pause()
        assert app.screen is app.main_screen
        await pilot.press("delete")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))


@run_async
async def test_console_follows_changes_written_by_others(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        store = Store(url)
        with store.write() as session:
            task = session.get(Task, "search/api")
            assert task is not None
            task.state = "QUEUED"
            from relay_engine.store.events import record_event

            record_event(session, "task.queued", "api queued", now=NOW, task_key="search/api")
        app.feed.nudge()
        await wait_until(
            pilot,
            lambda: app.snapshot is not None and app.snapshot.tasks["search/api"].state == "QUEUED",
        )
        table = app.main_screen.query_one(JobsTable)
        assert table.rebuilds == 1  # the first load; the change was patched in place
        store.dispose()


def test_projection_reloads_only_what_events_name(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    store = Store(url)
    projection = Projection(store)
    first = projection.load()
    assert first.first and len(first.tasks) == 35
    with store.write() as session:
        task = session.get(Task, "search/e2e")
        assert task is not None
        task.title = "renamed without an event"
        other = session.get(Task, "search/api")
        assert other is not None
        other.state = "QUEUED"
        from relay_engine.store.events import record_event

        record_event(session, "task.queued", "api queued", now=NOW, task_key="search/api")
    second = projection.load()
    assert second.changed_tasks == {"search/api"}
    assert second.previous_states == {"search/api": "DRAFT"}
    assert not second.structure_changed
    assert [e.kind for e in second.new_events] == ["task.queued"]
    store.dispose()


@run_async
async def test_config_reload_and_invalid_config_show_toasts(sample_app: RelayApp) -> None:
    from relay_engine.store.events import record_event

    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        with sample_app.store.write() as session:
            record_event(session, "config.reloaded", "relay.toml reloaded: 3 agents", now=NOW)
            record_event(
                session,
                "config.invalid",
                "relay.toml not reloaded: agents.0.provider is required",
                now=NOW,
                level="error",
            )
        sample_app.feed.nudge()

        def toasts() -> dict[str, str]:
            # Textual has no public list of the toasts it is showing
            return {str(n.title): n.severity for n in sample_app._notifications}

        await wait_until(pilot, lambda: len(toasts()) == 2)
    assert toasts() == {"config.reloaded": "information", "config.invalid": "error"}


@run_async
async def test_closing_a_screen_before_its_reads_finish_is_harmless(sample_app: RelayApp) -> None:
    """enter then escape at once: the worker's answer arrives for a screen that is gone."""
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        for row in ("job:search", "search/schema", "job:billing", "search/docs"):
            await cursor_to(pilot, row)
            for _ in range(5):
                await type_keys(pilot, "enter", "escape", gap=0.15)
            await pilot.pause(0.5)
            assert sample_app.return_code is None
            if sample_app.screen is not sample_app.main_screen:  # the last enter won the race
                await pilot.press("escape")
            assert sample_app.screen is sample_app.main_screen


@run_async
async def test_a_number_key_right_after_a_screen_opens_goes_back_without_a_crash(
    sample_app: RelayApp,
) -> None:
    """u then 2 as one burst: the number key pops a screen still mounting (random keys in
    tmux found the console crashing on Usage's own mount, its tables already gone)."""
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        for keys in (("u", "2"), ("u", "x", "2"), ("u", "t", "3"), ("u", "b", "1")):
            for _ in range(5):
                send_keys(pilot, *keys)
                await pilot.pause(0.3)  # the burst lands
                # and its pop waits for the screen's mount, which a loaded machine may not
                # finish within any fixed pause (one CI-like run of the suite failed here)
                await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)
            assert sample_app.return_code is None


@run_async
async def test_a_tick_or_a_snapshot_landing_after_the_screens_closed_is_harmless(
    sample_app: RelayApp,
) -> None:
    """The once-a-second tick and a snapshot read just before quitting can both be handled
    after the app has closed its screens (a fresh-clone CI run met the tick there)."""
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        snapshot = sample_app.snapshot
    assert not sample_app.screen_stack and snapshot is not None
    sample_app._tick()
    sample_app._snapshot_loaded(SnapshotLoaded(snapshot))
    assert sample_app.snapshot is snapshot


def test_the_feed_reads_on_when_the_console_never_says_it_painted(tmp_path: Path) -> None:
    """Textual drops an after-refresh callback whose screen closed before it painted (keys
    in bursts, in tmux): the reader waited for that word forever, and the console showed the
    same snapshot from then on while the engine ran on."""
    delivered: list[Snapshot] = []
    feed = FeedReader(
        Store(write_sample(tmp_path)),
        deliver=delivered.append,  # and never feed.painted(): the word that got lost
        failed=lambda error: None,
        poll_interval=0.1,
        lease_seconds=90,
        clock=frozen_clock,
    )
    feed.start()
    try:
        deadline = time.monotonic() + 10
        while len(delivered) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        feed.stop()
    assert len(delivered) >= 2

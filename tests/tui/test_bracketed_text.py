"""The console shows text relay did not write as written, and never passes its terminal
controls on: Textual's ``DataTable`` and ``Static`` read ``[...]`` in a plain string as
markup, so ``[bold]`` would vanish and ``[/usr/bin/claude]``, a closing tag matching
nothing, would raise; and Textual writes an ``ESC`` it is given to the terminal, which
obeys it. Each pane and screen that shows such text is read here from what it drew."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

from console_helpers import (
    attached_app,
    cursor_to,
    open_row,
    opened,
    run_async,
    wait_loaded,
    wait_until,
)
from helpers import BRACKETED, ESCAPES, ESCAPES_SHOWN, Workspace, seed_bracketed_text
from textual.pilot import Pilot
from textual.screen import Screen

from relay_engine.core.states import TaskState
from relay_engine.store.db import Store
from relay_engine.store.events import record_event
from relay_engine.store.schema import Task
from relay_tui.app import RelayApp
from relay_tui.screens.ask import AskScreen, ScopeScreen
from relay_tui.screens.budget import BudgetScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.pin import PinScreen


def drawn(app: RelayApp) -> str:
    """The text of what the console drew, one string (a cell's text is never split)."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg))).replace("\xa0", " ")


def seeded_app(tmp_path: Path, words: str = BRACKETED) -> tuple[RelayApp, Store]:
    """The console attached to a workspace seeded by :func:`seed_bracketed_text`."""
    workspace = Workspace(tmp_path / "ws")
    workspace.path.mkdir()
    workspace.configure()
    store = workspace.store()
    seed_bracketed_text(store, workspace.path, words)
    return attached_app(workspace.path, str(store.url)), store


@run_async
async def test_every_pane_and_screen_shows_bracketed_text_as_written(tmp_path: Path) -> None:
    app, _store = seeded_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_loaded(pilot)
        main = drawn(app)
        for field in ("title", "event"):
            assert f"{field} {BRACKETED}" in main, field
        await opened(pilot, DetailScreen, "1", "j", "enter")
        detail = drawn(app)
        assert f"task {BRACKETED}" in detail and f"error {BRACKETED}" in detail
        await pilot.press("escape")
        await pilot.press("6", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, AskScreen))
        await pilot.pause(0.2)
        ask = drawn(app)
        assert f"ask {BRACKETED}" in ask and f"rule {BRACKETED}" in ask
        await opened_dialog(pilot, ScopeScreen, "A")
        assert f"Allow always: ask {BRACKETED}"[:60] in drawn(app)
        await pilot.press("escape", "escape", "3")
        assert f"fix {BRACKETED}" in drawn(app)
        await pilot.press("1")
        await open_row(pilot, "job:j", JobScreen)
        await pilot.pause(0.2)
        assert f"title {BRACKETED}" in drawn(app)
        assert app.is_running


@run_async
async def test_toasts_and_a_dialogs_echo_show_bracketed_text_as_written(tmp_path: Path) -> None:
    """Textual's ``notify`` reads its message as markup too: a toast quoting a task's error
    in an agent's words or a planner's rejection ended the console; and the budget dialog
    quotes what the operator typed."""
    app, store = seeded_app(tmp_path)  # its feed starts with run_test
    with store.write() as session:
        session.add(Task(key="j/u", job_id="j", task_id="u", state=TaskState.RUNNING))
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await wait_loaded(pilot)
        with store.write() as session:
            task = session.get(Task, "j/u")
            assert task is not None
            task.state, task.error = TaskState.FAILED, f"failed {BRACKETED}"
            session.add(task)
            record_event(session, "plan.rejected", f"rejected {BRACKETED}", now=time.time(),
                         job_id="j", level="warning")  # fmt: skip
        app.feed.nudge()
        said = [f"j/u failed: failed {BRACKETED}", f"rejected {BRACKETED}"]
        await wait_until(pilot, lambda: all(s in toast_messages(app) for s in said))
        await pilot.pause(0.3)
        shown = [" ".join(str(toast.render()).split()) for toast in app.screen.query("Toast")]
        assert all(any(s in toast for toast in shown) for s in said), shown
        app.clear_notifications()
        await cursor_to(pilot, "job:j")
        await opened_dialog(pilot, BudgetScreen, "b")
        await pilot.press(*"[/x] [bold]", "enter")
        await pilot.pause(0.2)
        assert "“[/x] [bold]” is not an amount" in drawn(app)
        assert app.is_running


def toast_messages(app: RelayApp) -> list[str]:
    return [n.message for n in app._notifications]


async def opened_dialog(pilot: Pilot[None], kind: type[Screen[Any]], key: str) -> None:
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, kind))
    await pilot.pause(0.1)


@run_async
async def test_what_the_operator_types_and_a_clis_fix_in_the_pin_list_show_as_written(
    tmp_path: Path,
) -> None:
    """A filter or a search typed with ``[`` in it is shown in the pane's title, and the pin
    dialog lists each agent with its CLI's fix: Textual reads titles and options as markup."""
    app, _store = seeded_app(tmp_path)
    typed = "[/x]"
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1", "slash", *typed)
        await pilot.pause(0.2)
        assert f"⧩ {typed}" in drawn(app)
        await pilot.press("escape", "escape", "5", "slash", *typed)
        await pilot.pause(0.2)
        assert f"⧩ {typed}" in drawn(app)
        await pilot.press("escape", "escape", "1")
        await opened(pilot, DetailScreen, "j", "enter")
        await pilot.press("slash", *typed)
        await pilot.pause(0.2)
        assert f"search: {typed}" in drawn(app)
        while app.screen is not app.main_screen:
            await pilot.press("escape")
        await cursor_to(pilot, "j/t")
        await opened_dialog(pilot, PinScreen, "a")
        assert "fix cannot read [/usr/bin/claude]" in drawn(app)  # the dialog wraps the rest
        assert app.is_running


@run_async
async def test_no_control_character_reaches_the_terminal(tmp_path: Path) -> None:
    """Titles, errors, asks, a CLI's fix and events holding escape sequences are drawn
    without their control characters: the terminal would obey them (wipe the panes, write
    the clipboard)."""
    app, _store = seeded_app(tmp_path, ESCAPES)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_loaded(pilot)
        main = drawn(app)
        await opened(pilot, DetailScreen, "1", "j", "enter")
        detail = drawn(app)
        await pilot.press("escape", "6", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, AskScreen))
        await pilot.pause(0.2)
        ask = drawn(app)
        assert f"event {ESCAPES_SHOWN}" in main and f"ask {ESCAPES_SHOWN}" in main
        assert f"error {ESCAPES_SHOWN}" in detail and f"ask {ESCAPES_SHOWN}" in ask
        for shown in (main, detail, ask):
            assert not re.search(r"[\x00-\x1f\x7f-\x9f]", shown)

"""The console shows text relay did not write as written: Textual's ``DataTable`` and
``Static`` read ``[...]`` in a plain string as markup, so ``[bold]`` would vanish and
``[/usr/bin/claude]``, a closing tag matching nothing, would raise. Each pane and screen
that shows such text is read here from what it drew."""

from __future__ import annotations

import html
import re
from pathlib import Path

from console_helpers import (
    attached_app,
    open_row,
    opened,
    run_async,
    wait_loaded,
    wait_until,
)
from helpers import BRACKETED, Workspace, seed_bracketed_text

from relay_tui.app import RelayApp
from relay_tui.screens.ask import AskScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen


def drawn(app: RelayApp) -> str:
    """The text of what the console drew, one string (a cell's text is never split)."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg))).replace("\xa0", " ")


@run_async
async def test_every_pane_and_screen_shows_bracketed_text_as_written(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    workspace.path.mkdir()
    workspace.configure()
    store = workspace.store()
    seed_bracketed_text(store, workspace.path)
    app = attached_app(workspace.path, str(store.url))
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
        await pilot.press("escape", "3")
        assert f"fix {BRACKETED}" in drawn(app)
        await pilot.press("1")
        await open_row(pilot, "job:j", JobScreen)
        await pilot.pause(0.2)
        assert f"title {BRACKETED}" in drawn(app)
        assert app.is_running

"""The command palette under fast typing: page moves while the list is being rebuilt."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from console_helpers import attached_app, run_async, type_keys, wait_loaded
from textual.screen import Screen

from relay_tui.actions.palette import SafePalette
from relay_tui.demo.sample import write_sample


@run_async
async def test_a_page_move_typed_in_one_burst_with_the_search_does_not_crash(
    tmp_path: Path,
) -> None:
    """Issue 21.1: ``ec``, PageDown z z PageDown with no pause between keys raised
    ``KeyError: 0`` in OptionList._move_page and ended the console."""
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        await type_keys(pilot, "ctrl+p", "e", "c", "pagedown", "z", "z", "pagedown", gap=0)
        await pilot.pause(0.5)
        assert app._exception is None
        assert isinstance(app.screen, SafePalette)


@pytest.mark.parametrize("seed", [1, 2])
@run_async
async def test_random_bursts_in_the_palette(tmp_path: Path, seed: int) -> None:
    print(f"seed {seed}")
    keys = [*"ecazqmu", "pagedown", "pageup", "up", "down", "backspace", "home", "end"]
    rng = random.Random(seed)
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        for _ in range(4):
            await type_keys(pilot, "ctrl+p", *(rng.choice(keys) for _ in range(30)), gap=0)
            await pilot.pause(0.3)
            await type_keys(pilot, "escape", "escape", gap=0.05)
            await pilot.pause(0.2)
            assert app._exception is None, f"seed {seed}"


@run_async
async def test_the_theme_palette_and_two_enters_in_a_burst_do_not_crash(tmp_path: Path) -> None:
    """Found by the tmux key bursts: the palette's Theme command opens a palette of its own
    (it had the page-move crash too), and a second enter in the same burst dismissed the
    palette again, popping the main screen (ScreenStackError)."""
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        await type_keys(pilot, "ctrl+p", *"theme", gap=0.05)
        await pilot.pause(0.6)
        await type_keys(pilot, "enter", gap=0)
        await pilot.pause(0.6)
        await type_keys(pilot, "n", "o", "pagedown", "pageup", "pagedown", "enter", "enter", gap=0)
        await pilot.pause(0.6)
        assert app._exception is None
        await type_keys(pilot, "ctrl+p", *"usage", gap=0.05)
        await pilot.pause(0.6)
        await type_keys(pilot, "enter", "enter", "enter", gap=0)
        await pilot.pause(0.6)
        assert app._exception is None and len(app.screen_stack) >= 1
        assert app.screen_stack[0] is app.main_screen


@run_async
async def test_ctrl_p_with_a_palette_still_attached_does_not_crash(tmp_path: Path) -> None:
    """A tmux burst (seed 49119) ended the console with ``DuplicateIds``: ctrl+p came while
    a palette was attached but not the current screen, so a second one with its id was
    pushed. Here a screen covers the open palette, as one being removed is not current
    either."""
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        await type_keys(pilot, "ctrl+p")
        await pilot.pause(0.2)
        palette = app.screen
        await app.push_screen(Screen())
        await type_keys(pilot, "ctrl+p", "ctrl+p")
        await pilot.pause(0.3)
        assert app._exception is None and app.return_code is None
        app.pop_screen()
        await pilot.pause(0.2)
        assert app.screen is palette
        for _ in range(6):  # closed and reopened in bursts
            await type_keys(pilot, "escape", "ctrl+p", "y", "escape", "ctrl+p", gap=0)
        await pilot.pause(0.5)
        assert app._exception is None and app.return_code is None


@run_async
async def test_a_page_move_in_the_burst_that_picks_a_command_does_not_crash(
    tmp_path: Path,
) -> None:
    """A fresh-clone CI burst (seed 2300 at 120x36) ended the console with ``NoMatches:
    CommandList``: a page move reached a palette that enter had just closed and whose list
    was already gone."""
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        for _ in range(3):
            await type_keys(pilot, "ctrl+p", *"help", gap=0.05)
            await pilot.pause(0.4)
            await type_keys(pilot, "enter", "pagedown", "pageup", "pagedown", gap=0)
            await pilot.pause(0.4)
            assert app._exception is None and app.return_code is None
            await type_keys(pilot, "escape", gap=0)
            await pilot.pause(0.2)
        palette = SafePalette()
        await app.push_screen(palette)
        await pilot.pause(0.2)
        await palette.dismiss()
        await pilot.pause(0.2)
        palette._action_command_list("page_down")  # what a page move queued before does
        palette._action_command_list("cursor_down")
        await pilot.pause(0.3)
        assert app._exception is None and app.return_code is None


@run_async
async def test_the_palettes_keys_command_landing_after_quit_ends_cleanly(tmp_path: Path) -> None:
    """A fresh-clone CI burst (seed 59439 at 80x24) picked the palette's Quit and then its
    Keys command: the help panel's mount ran after ``exit()`` had detached every screen,
    and a clean quit became a crash (``MountError``) with exit status 1."""
    app = attached_app(tmp_path, write_sample(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        app.exit()
        app.call_later(app.action_show_help_panel)
        app.call_later(app.action_hide_help_panel)
        app.call_later(app.pop_screen)  # the last screen: ScreenStackError
        app.call_later(lambda: app.screen.query_one("#a-pane-gone"))
        await asyncio.sleep(0.2)
    assert app._exception is None and app.return_code == 0

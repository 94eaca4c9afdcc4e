"""SVG snapshots of every screen and modal, from a fixed mid-run state and a frozen clock.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at
the SVGs under tests/tui/__snapshots__/ before committing them.
"""

from __future__ import annotations

from console_helpers import cursor_to, settle, wait_loaded, wait_until
from textual.pilot import Pilot

from relay_tui.app import RelayApp
from relay_tui.screens.detail import DetailScreen


async def select(pilot: Pilot[None], key: str) -> None:
    await wait_loaded(pilot)
    await cursor_to(pilot, key)
    await settle(pilot)


def test_console_80x24(snap_compare, sample_app: RelayApp) -> None:
    assert snap_compare(sample_app, terminal_size=(80, 24), run_before=wait_loaded)


def test_console_160x48(snap_compare, sample_app: RelayApp) -> None:
    assert snap_compare(sample_app, terminal_size=(160, 48), run_before=wait_loaded)


def test_planner_waves(snap_compare, sample_app: RelayApp) -> None:
    """Billing: round 1 superseded by a manual replan (round 2), wave 2 held at the gate."""

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_loaded(pilot)
        await pilot.press("tab", "tab", "tab")
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(80, 24), run_before=run_before)


def test_empty_state(snap_compare, empty_app: RelayApp) -> None:
    assert snap_compare(empty_app, terminal_size=(100, 30), run_before=wait_loaded)


def test_detail_screen(snap_compare, sample_app: RelayApp) -> None:
    async def open_detail(pilot: Pilot[None]) -> None:
        await select(pilot, "search/docs")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, DetailScreen))
        screen = pilot.app.screen
        assert isinstance(screen, DetailScreen)
        await wait_until(pilot, lambda: screen.loaded.is_set() and screen.tail_ready.is_set())
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=open_detail)


def test_help_screen(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await wait_loaded(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(100, 36), run_before=run_before)


def test_cancel_modal(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await select(pilot, "search/docs")
        await pilot.press("c")
        await settle(pilot)

    assert snap_compare(sample_app, run_before=run_before)


def test_replan_modal(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await select(pilot, "billing/reports")
        await pilot.press("p")
        await pilot.press(*"split by region")
        await settle(pilot)

    assert snap_compare(sample_app, run_before=run_before)


def test_pin_modal(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await select(pilot, "search/api")
        await pilot.press("a")
        await settle(pilot)

    assert snap_compare(sample_app, run_before=run_before)


def test_approve_modal(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await select(pilot, "billing/reports")
        await pilot.press("g")
        await settle(pilot)

    assert snap_compare(sample_app, run_before=run_before)


def test_filter(snap_compare, sample_app: RelayApp) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await wait_loaded(pilot)
        await pilot.press("slash", *"failed")
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(100, 30), run_before=run_before)

"""SVG snapshots of every screen and modal, from a fixed mid-run state and a frozen clock.

The main screen, the task detail and the job view are taken at 80x24, 120x36 and 160x48,
the three sizes the console is used at (one pane at a time, two columns, the full grid).
Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at
the SVGs under tests/tui/__snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from console_helpers import cursor_to, finish_then_apply, settle, wait_loaded, wait_until
from textual.pilot import Pilot

from relay_tui.app import RelayApp
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen

SIZES = [(80, 24), (120, 36), (160, 48)]
Steps = Callable[[Pilot[None]], Awaitable[None]]


def pressing(*keys: str, row: str | None = None, pane: str = "jobs") -> Steps:
    """Move the cursor onto ``row`` of ``pane`` with the arrow keys, then press ``keys``."""

    async def steps(pilot: Pilot[None]) -> None:
        await wait_loaded(pilot)
        if row:
            await cursor_to(pilot, row, pane)
        if keys:
            await pilot.press(*keys)
        await settled_screen(pilot)

    return steps


async def settled_screen(pilot: Pilot[None]) -> None:
    screen = pilot.app.screen
    if isinstance(screen, DetailScreen):
        await wait_until(pilot, lambda: screen.loaded.is_set() and screen.tail_ready.is_set())
        await wait_until(pilot, screen.diff_ready.is_set)
    if isinstance(screen, JobScreen):
        await wait_until(pilot, screen.loaded.is_set)
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_console(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    assert snap_compare(sample_app, terminal_size=size, run_before=pressing(row="search/docs"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_detail_screen(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    """Codex's stream parsed: its reasoning, a command, a message, a file change, a failure."""
    steps = pressing("enter", row="search/docs")
    assert snap_compare(sample_app, terminal_size=size, run_before=steps)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_job_view(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    """The search job's graph by wave, the critical path in heavy lines, its branch."""
    steps = pressing("enter", row="job:search")
    assert snap_compare(sample_app, terminal_size=size, run_before=steps)


def test_diff_view(snap_compare, sample_app: RelayApp) -> None:
    """schema's branch against the commit it was cut from, highlighted."""
    steps = pressing("enter", "d", row="search/schema")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_raw_output(snap_compare, sample_app: RelayApp) -> None:
    steps = pressing("enter", "v", row="search/docs")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_error_toast(snap_compare, sample_app: RelayApp) -> None:
    """A retry the engine refuses: the toast gives the whole reason."""

    async def steps(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, RelayApp)
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/fixtures")
        await pilot.press("r")
        await wait_until(
            pilot, lambda: app.snapshot is not None and app.snapshot.fleet.commands_waiting == 1
        )
        finish_then_apply(app.store.url, "search/fixtures")
        app.clear_notifications()
        await wait_until(pilot, lambda: any(n.severity == "error" for n in app._notifications))
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


@pytest.mark.parametrize(
    ("name", "row", "keys"),
    [
        pytest.param("cancel", "search/docs", ("c",), id="cancel"),
        pytest.param("replan", "search/api", ("p", *"split by region"), id="replan"),
        pytest.param("pin", "search/api", ("a",), id="pin"),
        pytest.param("approve", "billing/reports", ("g",), id="approve"),
        pytest.param("cancel_job", "job:billing", ("C",), id="cancel_job"),
        pytest.param("help", None, ("question_mark",), id="help"),
        pytest.param("merge", "job:greet", ("m",), id="merge"),
        pytest.param("merge_unapproved", "job:login", ("m",), id="merge_unapproved"),
        pytest.param("close_pr", "job:login", ("x",), id="close_pr"),
        pytest.param("budget", "job:docs-site", ("b",), id="budget"),
    ],
)
def test_modal(
    snap_compare, sample_app: RelayApp, name: str, row: str | None, keys: tuple[str, ...]
) -> None:
    size = (100, 36) if name == "help" else (80, 24)
    assert snap_compare(sample_app, terminal_size=size, run_before=pressing(*keys, row=row))


def test_agent_reset(snap_compare, sample_app: RelayApp) -> None:
    """gemini-b failed its login: the dialog names the agent, its failure and what reset does."""
    steps = pressing("R", row="agent:gemini-b", pane="providers")
    assert snap_compare(sample_app, terminal_size=(100, 30), run_before=steps)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_usage_screen(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    """Budgets first (docs-site spent its dollar), spend by job, agent and provider, a chart."""
    assert snap_compare(sample_app, terminal_size=size, run_before=pressing("u"))


def test_planner_waves(snap_compare, sample_app: RelayApp) -> None:
    """Billing: round 1 superseded by a manual replan (round 2), wave 2 held at the gate."""
    assert snap_compare(sample_app, terminal_size=(80, 24), run_before=pressing("4", "down"))


def test_empty_state(snap_compare, empty_app: RelayApp) -> None:
    assert snap_compare(empty_app, terminal_size=(100, 30), run_before=wait_loaded)


def test_filter(snap_compare, sample_app: RelayApp) -> None:
    assert snap_compare(
        sample_app, terminal_size=(100, 30), run_before=pressing("slash", *"failed")
    )


def test_event_search(snap_compare, sample_app: RelayApp) -> None:
    steps = pressing("5", "slash", *"billing", "enter")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)

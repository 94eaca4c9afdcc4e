"""SVG snapshots of every screen and modal, from a fixed mid-run state and a frozen clock.

The main screen, the task detail and the job view are taken at 80x24, 120x36 and 160x48,
the three sizes the console is used at (one pane at a time, two columns, the full grid).
Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at
the SVGs under tests/tui/__snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from console_helpers import cursor_to, finish_then_apply, settle, wait_loaded, wait_until
from textual.pilot import Pilot

from relay_tui.app import RelayApp
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.usage import UsageScreen

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
    if isinstance(screen, (JobScreen, UsageScreen)):  # both read in a worker
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


# -- the cockpit (issue 21) and needs you (issue 19) ------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_running_agents(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    """What each agent does now, its tokens and cost so far, idle, elapsed against its
    timeout; search/ui's engine went silent, so its row says so and its clock stopped."""
    steps = pressing("2", row="ex-rotate-1", pane="running")
    assert snap_compare(sample_app, terminal_size=size, run_before=steps)


def commands_waiting(app: RelayApp) -> int:
    return app.snapshot.fleet.commands_waiting if app.snapshot else 0


def test_header_at_80_columns(snap_compare, sample_app: RelayApp) -> None:
    """Commands waiting, a gone engine and the asks survive the narrowest header."""
    retried = pressing("r", row="search/fixtures")

    async def steps(pilot: Pilot[None]) -> None:
        await retried(pilot)
        # The retry waits for an engine; the header says so once the next snapshot is read.
        await wait_until(pilot, lambda: commands_waiting(sample_app) > 0)
        await settle(pilot)

    assert snap_compare(sample_app, terminal_size=(80, 24), run_before=steps)


def test_unfolded_jobs(snap_compare, sample_app: RelayApp) -> None:
    """f shows the tasks of finished jobs (the merged onboarding job folds by default)."""
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=pressing("f"))


def test_saved_view(snap_compare, sample_app: RelayApp) -> None:
    """v: the :running view, named in the pane's title while it filters."""
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=pressing("v"))


def test_events_with_a_cursor(snap_compare, sample_app: RelayApp) -> None:
    """The event list has a cursor (enter opens its task); a cancel's three blocked tasks
    are one line."""
    steps = pressing("5", *["up"] * 4)  # past gate.held, task.swapped and an ask: the cancel
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_needs_you(snap_compare, sample_app: RelayApp, size: tuple[int, int]) -> None:
    """Two asks, oldest first: a question and a command, each with the agent's last words."""
    steps = pressing("6", row="ask:7", pane="needs")
    assert snap_compare(sample_app, terminal_size=size, run_before=steps)


@pytest.mark.parametrize(
    ("name", "row", "pane", "keys"),
    [
        pytest.param("ask", "ask:7", "needs", ("enter",), id="ask"),
        pytest.param("always", "ask:7", "needs", ("A",), id="always"),
        pytest.param("deny", "ask:7", "needs", ("n",), id="deny"),
        pytest.param("question", "ask:8", "needs", ("enter",), id="question"),
        pytest.param("takeover", "api-keys/rotate", "jobs", ("T",), id="takeover"),
        pytest.param("handback", "api-keys/audit", "jobs", ("T",), id="handback"),
        pytest.param("say", "search/docs", "jobs", ("S",), id="say"),
    ],
)
def test_needs_you_modal(
    snap_compare, sample_app: RelayApp, name: str, row: str, pane: str, keys: tuple[str, ...]
) -> None:
    size = (100, 30)
    assert snap_compare(
        sample_app, terminal_size=size, run_before=pressing(*keys, row=row, pane=pane)
    )


def test_held_task(snap_compare, sample_app: RelayApp) -> None:
    """A held task in the jobs table: by whom and since when, in its note and preview."""
    steps = pressing(row="api-keys/audit")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_take_over_line(snap_compare, sample_app: RelayApp) -> None:
    """Outside tmux: the exact line that opens the agent's CLI on the held task."""
    from relay_engine.agents.takeover import TakeOverLine
    from relay_tui.screens.takeover import TakeOverScreen

    async def steps(pilot: Pilot[None]) -> None:
        await wait_loaded(pilot)
        line = TakeOverLine(
            Path("/srv/relay/.relay/worktrees/api-keys/rotate"),
            ("claude", "--resume", "6a1f0c2e-9d3b-4f7a-8c21-5e0b7d9a4c13"),
            Path("/srv/relay/.relay/takeover/api-keys/rotate.sh"),
        )
        pilot.app.push_screen(TakeOverScreen("api-keys/rotate", line, "not inside tmux"))
        await settled_screen(pilot)

    assert snap_compare(sample_app, terminal_size=(100, 30), run_before=steps)


# -- what waits (issues 19 and 20) ----------------------------------------------------------
def test_blocked_job(snap_compare, sample_app: RelayApp) -> None:
    """i18n is BLOCKED on a task that failed for good (⊗, its note says which); the operator
    dropped one of its tasks (⊖); under it, mobile's wave 2 waits behind a held gate (the
    last row, reached with end: no scrolling history decides what is in view)."""
    steps = pressing("end")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_task_wait_in_detail(snap_compare, sample_app: RelayApp) -> None:
    """A task behind a wave gate: what it waits for and the command that opens the gate."""
    steps = pressing("enter", row="billing/reports")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_gate_held_job_view(snap_compare, sample_app: RelayApp) -> None:
    """mobile's wave 2 is held shut: the assessment of wave 1 failed (gate.held)."""
    steps = pressing("enter", row="job:mobile")
    assert snap_compare(sample_app, terminal_size=(120, 36), run_before=steps)


def test_planner_gate_held(snap_compare, sample_app: RelayApp) -> None:
    """The planner's last row: mobile's wave 2, its gate held; the preview names the way out."""
    steps = pressing(row="wave:mobile:2", pane="planner")
    assert snap_compare(sample_app, terminal_size=(80, 24), run_before=steps)


def test_quota_gauges(snap_compare, sample_app: RelayApp) -> None:
    """Each account's windows against the 95% watermark: claude's five hours hold new work."""
    steps = pressing(row="quota:claude:five_hour", pane="providers")
    assert snap_compare(sample_app, terminal_size=(100, 30), run_before=steps)

"""What the engine says waits, shown in the console (issues 19 and 20): a BLOCKED job and a
DROPPED task, the wait lines of tasks and jobs (what, until when, released by which
command), a wave gate held by an assessment that failed, quota gauges per account, and a
swapped task in the events. All on the fixed sample (:mod:`relay_tui.demo.sample_waits`).
"""

from __future__ import annotations

from console_helpers import cursor_to, open_row, opened, run_async, settle, wait_loaded
from textual.widgets import Static

from relay_tui.app import RelayApp
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.widgets.events import EventList
from relay_tui.widgets.jobs import JobsTable
from relay_tui.widgets.planner import PlannerTable
from relay_tui.widgets.providers import ProvidersTable


def text_of(app: RelayApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


def cells(table: JobsTable | PlannerTable | ProvidersTable, key: str) -> list[str]:
    return [str(getattr(value, "plain", value)) for value in table.get_row(key)]


@run_async
async def test_a_blocked_job_and_a_dropped_task_say_so(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        job = cells(table, "job:i18n")
        assert job[0].startswith("⊗ i18n") and job[1] == "blocked"
        assert job[-1] == "blocked: task i18n/extract failed"
        dropped = cells(table, "i18n/rtl")
        assert "⊖ rtl" in dropped[0] and dropped[1] == "dropped"
        assert dropped[-1].startswith("dropped:")
        await cursor_to(pilot, "job:i18n")
        await settle(pilot)
        preview = text_of(sample_app, "#jobs-preview")
        assert "waits for you: task i18n/extract failed: relay retry i18n/extract" in preview


@run_async
async def test_a_gated_task_says_what_releases_it_in_its_note_and_detail(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        assert cells(table, "billing/reports")[-1].startswith("waits for approval of wave 2")
        await cursor_to(pilot, "billing/reports")
        await settle(pilot)
        assert "relay approve billing" in text_of(sample_app, "#jobs-preview")
        await opened(pilot, DetailScreen, "enter")
        summary = text_of(sample_app, "#detail-summary")
        assert "waits for approval of wave 2: relay approve billing" in summary


@run_async
async def test_a_held_gate_shows_in_the_planner_and_the_job_view(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        planner = sample_app.main_screen.query_one(PlannerTable)
        held = cells(planner, "wave:mobile:2")
        assert held[1] == "gate held" and "relay approve mobile" in held[-1]
        jobs = sample_app.main_screen.query_one(JobsTable)
        assert "relay approve mobile" in cells(jobs, "wave:mobile:2")[-1]
        await open_row(pilot, "job:mobile", JobScreen)
        waits = text_of(sample_app, "#job-waits")
        assert "task mobile/screens waits for approval of wave 2 (its gate's assessment" in waits
        assert "relay approve mobile, or relay replan mobile" in waits


@run_async
async def test_quota_gauges_show_each_window_against_its_watermark(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(ProvidersTable)
        five = cells(table, "quota:claude:five_hour")
        assert five[0] == "└ claude five-hour" and five[1] == "used █████ 97%/95%"
        assert (five[2], five[3]) == ("09:23", "23m")
        assert cells(table, "quota:codex:primary")[1] == "used ███░░ 62%/95%"
        keys = table.row_keys  # after every provider and agent: the gauges scroll out first
        assert (
            keys.index("agent:sim-gemini")
            < keys.index("quota:")
            < keys.index("quota:codex:primary")
        )
        await cursor_to(pilot, "quota:claude:five_hour", pane="providers")
        await settle(pilot)
        preview = text_of(sample_app, "#providers-preview")
        assert "claude at 97% of its five-hour window until 09:23" in preview


@run_async
async def test_a_swapped_task_reads_as_one_event(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        events = sample_app.main_screen.query_one(EventList)
        swapped = [e for e in events.entries if e.first.kind == "task.swapped"]
        assert len(swapped) == 1 and swapped[0].task_key == "api-keys/notify"
        assert "moved off sim-claude" in swapped[0].first.message

"""Merge, close, budget, agent reset and Usage: real keys against the fixed sample (no engine).

Each dialog must name the row that was under the cursor, say what will happen, and send
exactly the command the operator confirmed; keys that have nothing to act on send nothing.
"""

from __future__ import annotations

from console_helpers import cursor_to, opened, run_async, wait_loaded, wait_until
from sqlmodel import select
from textual.pilot import Pilot

from relay_engine.ops import commands as engine_commands
from relay_engine.store.db import Store
from relay_engine.store.schema import Command, Job
from relay_tui.app import RelayApp
from relay_tui.demo.sample import NOW
from relay_tui.screens.budget import BudgetScreen
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.usage import UsageScreen


def sent(app: RelayApp) -> list[tuple[str, dict]]:
    with app.store.read() as session:
        rows = session.exec(select(Command).order_by(Command.id))
        return [(c.kind, c.payload or {}) for c in rows]


def question(app: RelayApp) -> str:
    screen = app.screen
    assert isinstance(screen, ConfirmScreen), screen
    return screen.question


async def dialog(pilot: Pilot[None], kind: type) -> None:
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, kind))


@run_async
async def test_merge_asks_with_what_goes_where_and_forces_only_after_a_second_yes(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "job:greet")
        await pilot.press("m")
        await dialog(pilot, ConfirmScreen)
        assert sample_app.screen.target == "job:greet"  # type: ignore[attr-defined]
        text = question(sample_app)
        assert "merge relay/greet @ 9b8c7d6e5f4a into main on GitHub" in text
        assert "review 1: approve at the current head" in text
        await pilot.press("y")
        await cursor_to(pilot, "job:login")  # REVIEWING: its review asked for changes
        await pilot.press("m")
        await dialog(pilot, ConfirmScreen)
        assert "Not approved" in question(sample_app) and "review 2: changes" in question(
            sample_app
        )
        await pilot.press("y")
        await wait_until(pilot, lambda: "Really merge relay/login" in question(sample_app))
        await pilot.press("n")  # changed their mind at the second question: nothing sent
        await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)
        await pilot.press("m", "y")
        await wait_until(pilot, lambda: "Really" in question(sample_app))
        await pilot.press("y")
        await wait_until(pilot, lambda: len(sent(sample_app)) == 2)
    assert sent(sample_app) == [
        ("merge", {"job": "greet", "force": False}),
        ("merge", {"job": "login", "force": True}),
    ]


@run_async
async def test_close_budget_and_reset_send_what_their_dialogs_say(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "job:greet")
        await pilot.press("x")
        await dialog(pilot, ConfirmScreen)
        assert "cancel unfinished work" in question(sample_app)
        await pilot.press("y")
        await cursor_to(pilot, "job:docs-site")
        await pilot.press("b")
        await dialog(pilot, BudgetScreen)
        screen = sample_app.screen
        assert isinstance(screen, BudgetScreen) and screen.target == "job:docs-site"
        await pilot.press(*"two", "enter")
        assert sample_app.screen is screen  # not a number: said so, still open
        assert "not an amount" in str(screen.query_one("#dollars-error").render())
        await pilot.press("backspace", "backspace", "backspace", *"2.5", "enter", "enter")
        await cursor_to(pilot, "agent:codex-c", pane="providers")
        await pilot.press("R")
        await dialog(pilot, ConfirmScreen)
        assert sample_app.screen.target == "agent:codex-c"  # type: ignore[attr-defined]
        assert "no network" in question(sample_app)
        await pilot.press("y")
        await wait_until(pilot, lambda: len(sent(sample_app)) == 3)
    assert sent(sample_app) == [
        ("close", {"job": "greet"}),
        ("budget", {"job": "docs-site", "add_usd": 2.5}),
        ("agent.reset", {"agent": "codex-c"}),
    ]


@run_async
async def test_keys_with_nothing_to_act_on_warn_and_send_nothing(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "job:search")  # no pull request yet
        for key in ("m", "x", "R"):
            await pilot.press(key)
            await pilot.pause()
            assert sample_app.screen is sample_app.main_screen, key
        await cursor_to(pilot, "agent:sim-codex", pane="providers")  # ready: nothing to reset
        await pilot.press("R")
        await pilot.pause()
        assert sample_app.screen is sample_app.main_screen
        warnings = [n.message for n in sample_app._notifications if n.severity == "warning"]
        assert any("no pull request yet" in w for w in warnings)
        assert any("Nothing to reset for sim-codex: it is ready" in w for w in warnings)
    assert sent(sample_app) == []


@run_async
async def test_usage_screen_shows_rollups_and_raises_the_focused_budget(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        screen = await opened(pilot, UsageScreen, "u")
        await pilot.pause()
        jobs = screen.query_one("#usage-job")
        assert [str(jobs.get_row_at(i)[0]) for i in range(jobs.row_count)][:2] == [  # type: ignore[attr-defined]
            "login",
            "search",
        ]  # highest cost first
        assert str(jobs.get_row_at(0)[1]) == "~$1.36"  # type: ignore[attr-defined]
        await pilot.press("down", "b")  # budgets: billing, then the exhausted docs-site
        await dialog(pilot, BudgetScreen)
        assert sample_app.screen.target == "job:docs-site"  # type: ignore[attr-defined]
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: len(sent(sample_app)) == 1)
        await pilot.press("escape")
        await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)
    assert sent(sample_app) == [("budget", {"job": "docs-site", "add_usd": 1.0})]


@run_async
async def test_a_refused_merge_is_an_error_toast_with_the_engines_reason(
    sample_app: RelayApp,
) -> None:
    """The force merge is stored; before an engine applies it the job went back to work."""
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "job:login")
        await pilot.press("m", "y")
        await wait_until(pilot, lambda: "Really" in question(sample_app))
        await pilot.press("y")
        await wait_until(pilot, lambda: len(sent(sample_app)) == 1)
        store = Store(sample_app.store.url)
        with store.write() as session:
            job = session.get(Job, "login")
            assert job is not None
            job.state = "ACTIVE"  # a fix task started meanwhile
        engine_commands.apply_pending(store, "engine-elsewhere", NOW)
        store.dispose()
        await wait_until(
            pilot,
            lambda: any(
                n.severity == "error" and "still working (ACTIVE)" in n.message
                for n in sample_app._notifications
            ),
        )

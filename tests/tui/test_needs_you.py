"""Issue 19, the console's half: what agents wait on the operator for, answered from the
Needs-you pane; taking a task over, handing it back, saying something to its agent.

Against the fixed sample (two open asks: a command of the search troubleshooter's, and a
question of api-keys/store's; api-keys/audit held by ana@laptop). The commands the keys
send are read back from the database, as an engine would read them.
"""

from __future__ import annotations

from pathlib import Path

from console_helpers import cursor_to, open_row, run_async, wait_loaded, wait_until
from test_console import commands

from relay_engine.store.db import Store
from relay_engine.store.schema import Ask, Event
from relay_tui.app import RelayApp
from relay_tui.demo.sample import NOW, write_sample
from relay_tui.demo.sample_needs import LONG_COMMAND
from relay_tui.screens.ask import AskScreen, ScopeScreen
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.takeover import HandBackScreen
from relay_tui.screens.text import TextScreen
from relay_tui.widgets.jobs import JobsTable
from relay_tui.widgets.needs import NeedsTable


def answers(app: RelayApp) -> list[dict]:
    return [payload for kind, payload in commands(app) if kind == "answer"]


def without_by(payload: dict) -> dict:
    assert "@" in payload.pop("by")  # who answered, as relay answer records it
    return payload


@run_async
async def test_the_pane_lists_asks_oldest_first_and_the_header_counts_them(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(NeedsTable)
        assert table.row_keys == ["ask:8", "ask:7"]  # asked 95 s and 25 s ago
        assert "⚑ 2 waiting on you" in str(sample_app.main_screen.query_one("#header").render())
        assert "Bash pytest -q tests/test_ranking.py" in str(table.get_cell("ask:7", "wants"))
        assert "Which store" in str(table.get_cell("ask:8", "wants"))
        assert "The loader drops" in str(table.get_cell("ask:7", "context"))


@run_async
async def test_allow_once_always_with_a_scope_and_deny_with_a_message(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "ask:7", pane="needs")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(answers(sample_app)) == 1)
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, ScopeScreen))
        scopes = [str(o.prompt) for o in sample_app.screen.query_one("#scopes").options]
        assert "allow Bash(pytest:*) for every task of job search" in scopes[1]
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: len(answers(sample_app)) == 2)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, TextScreen))
        await pilot.press(*"use the fixture", "enter")
        await wait_until(pilot, lambda: len(answers(sample_app)) == 3)
    assert [without_by(a) for a in answers(sample_app)] == [
        {"ask": 7, "answer": "allow"},
        {"ask": 7, "answer": "allow", "always": "job"},
        {"ask": 7, "answer": "deny", "text": "use the fixture"},
    ]


@run_async
async def test_enter_reads_the_whole_input_and_a_question_is_answered_in_words(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "ask:7", pane="needs")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, AskScreen))
        shown = str(sample_app.screen.query_one("#ask-input Static").render())
        assert shown.replace("\n", "") == LONG_COMMAND  # whole, however long
        await pilot.press("escape")
        await cursor_to(pilot, "ask:8", pane="needs")
        await pilot.press("y")  # a question is not allowed: it is answered
        await wait_until(pilot, lambda: isinstance(sample_app.screen, AskScreen))
        await pilot.press(*"PostgreSQL", "enter")
        await wait_until(pilot, lambda: len(answers(sample_app)) == 1)
    assert [without_by(a) for a in answers(sample_app)] == [
        {"ask": 8, "answer": "answer", "text": "PostgreSQL"}
    ]


class CountingBells(RelayApp):
    bells = 0

    def bell(self) -> None:
        self.bells += 1


@run_async
async def test_a_new_ask_rings_the_bell_once(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = CountingBells(tmp_path, db_url=url, clock=lambda: NOW, blink=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        assert app.bells == 0  # the asks open at start are not news
        store = Store(url)
        with store.write() as session:
            session.add(Ask(id=9, job_id="search", task_key="search/ui", execution_id="ex-ui-2",
                            agent="sim-gemini", tool="Bash", tool_input={"command": "make"},
                            summary="Bash make", asked_at=NOW))  # fmt: skip
            session.add(Event(at=NOW, job_id="search", task_key="search/ui",
                              kind="agent.needs_input", message="search/ui asks: Bash make"))  # fmt: skip
        store.dispose()
        app.feed.nudge()
        table = app.main_screen.query_one(NeedsTable)
        await wait_until(pilot, lambda: "ask:9" in table.row_keys)
        for _ in range(3):
            app.feed.nudge()
            await pilot.pause(0.2)
        assert app.bells == 1
        assert any("search/ui: waiting on you: Bash make" in n.message for n in app._notifications)


@run_async
async def test_take_over_asks_first_and_sends_the_command(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "api-keys/rotate")
        await pilot.press("T")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, ConfirmScreen))
        assert "headless run is stopped" in sample_app.screen.question
        await pilot.press("y")
        await wait_until(pilot, lambda: any(k == "takeover" for k, _ in commands(sample_app)))
    (payload,) = [p for k, p in commands(sample_app) if k == "takeover"]
    assert payload["task"] == "api-keys/rotate" and "@" in payload["by"]


@run_async
async def test_a_held_task_is_handed_back_with_words_or_done(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        note = str(table.get_cell("api-keys/audit", "info"))
        assert note.startswith("held by ana@laptop since 08:48 (12m)")
        await cursor_to(pilot, "api-keys/audit")
        await pilot.press("T")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, HandBackScreen))
        await pilot.press(*"finish the audit", "enter")
        await wait_until(pilot, lambda: any(k == "handback" for k, _ in commands(sample_app)))
        await pilot.press("T")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, HandBackScreen))
        await pilot.press("ctrl+d")  # a job without git: nothing to merge, the task succeeds
        await wait_until(pilot, lambda: sum(k == "handback" for k, _ in commands(sample_app)) == 2)
    assert [p for k, p in commands(sample_app) if k == "handback"] == [
        {"task": "api-keys/audit", "done": False, "text": "finish the audit"},
        {"task": "api-keys/audit", "done": True},
    ]


@run_async
async def test_a_held_task_says_so_in_the_detail_and_the_job_view(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        screen = await open_row(pilot, "api-keys/audit", DetailScreen)
        assert "held by ana@laptop since 08:48" in str(screen.query_one("#detail-summary").render())
        await pilot.press("escape")
        screen = await open_row(pilot, "job:api-keys", JobScreen)
        assert "audit: held by ana@laptop" in str(screen.query_one("#job-held").render())
        assert "✎ audit" in str(screen.query_one("#job-graph").render())


@run_async
async def test_say_sends_words_to_a_task(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/docs")
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, TextScreen))
        assert "reads it now" in str(sample_app.screen.question)
        await pilot.press(*"mention the limits", "enter")
        await wait_until(pilot, lambda: any(k == "say" for k, _ in commands(sample_app)))
    assert [p for k, p in commands(sample_app) if k == "say"] == [
        {"task": "search/docs", "text": "mention the limits"}
    ]

"""Issue 21, "relay-tui as a fleet operator's cockpit": each defect a new user met, pressed
again with Pilot against the fixed sample database (no engine, frozen clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import (
    attached_app,
    cursor_to,
    open_row,
    opened,
    run_async,
    settle,
    wait_loaded,
    wait_until,
)
from textual.widgets import Static

from relay_engine.contracts.amounts import parse_dollars
from relay_engine.contracts.config import RelayConfig, default_config
from relay_engine.contracts.time_format import limit_words
from relay_engine.store.db import Store
from relay_engine.store.read_model.jobs import BudgetView, JobView
from relay_engine.store.read_model.spend import NO_SPEND, SpendView
from relay_engine.store.schema import AgentRecord, AgentStatus, Event, Execution, Job, Plan, Task
from relay_tui.app import RelayApp
from relay_tui.demo.sample import NOW, frozen_clock, write_sample
from relay_tui.render.spend import budget_words, money
from relay_tui.render.words import english
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.pin import PinScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.events import EventList
from relay_tui.widgets.jobs import JobsTable, dollars
from relay_tui.widgets.keybar import KeyBar
from relay_tui.widgets.providers import ProvidersTable
from relay_tui.widgets.running import RunningTable


def toasts(app: RelayApp) -> list[str]:
    return [n.message for n in app._notifications]


def text_of(app: RelayApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


def write(url: str, *rows: object) -> None:
    store = Store(url)
    with store.write() as session:
        session.add_all(rows)
    store.dispose()


# -- 4: Usage at 80x24 ------------------------------------------------------------------
@run_async
async def test_usage_at_80x24_reaches_every_table(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        screen = await opened(pilot, UsageScreen, "u")
        await settle(pilot)
        provider = screen.query_one("#usage-provider")
        assert not screen.region.contains_region(provider.region)  # below the fold at first
        await pilot.press("end")
        await wait_until(pilot, lambda: screen.region.contains_region(provider.region))
        assert screen.focused is provider
        await pilot.press("home")
        await wait_until(pilot, lambda: screen.focused.id == "usage-budgets")
        for _ in range(30):  # the cursor runs on from table to table
            if screen.focused is provider:
                break
            await pilot.press("j")
        assert screen.focused is provider
        await pilot.press("pageup")
        await wait_until(pilot, lambda: not screen.region.contains_region(provider.region))


# -- 5: a run whose engine is gone --------------------------------------------------------
@run_async
async def test_a_run_whose_engine_is_gone_does_not_look_alive(tmp_path: Path) -> None:
    """The sample's search/ui runs on an engine silent for 200 s: its row says so and its
    clock stands still; the header counts it lost instead of working."""
    url = write_sample(tmp_path)
    now = [NOW]
    app = RelayApp(tmp_path, db_url=url, clock=lambda: now[0], blink=False, config=default_config())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        table = app.main_screen.query_one(RunningTable)

        def cell(run: str, column: str) -> str:
            return str(table.get_cell(run, column))

        assert "engine gone 3m ago" in cell("ex-ui-2", "step")
        assert cell("ex-ui-2", "elapsed") == "1:52"
        assert "1 agent lost with its engine" in text_of(app, "#header")
        now[0] += 90
        await wait_until(pilot, lambda: "engine gone 4m ago" in cell("ex-ui-2", "step"))
        assert cell("ex-ui-2", "elapsed") == "1:52"  # stopped where the engine was lost
        assert cell("ex-docs-1", "elapsed").startswith("3:05")  # a live one moves on


# -- 6: maximize, then escape -------------------------------------------------------------
@run_async
async def test_maximize_from_the_palette_then_escape_gives_the_columns_back(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        widths = [c.width for c in table.columns.values()]
        await pilot.press("ctrl+p", *"maximize")
        await wait_until(pilot, lambda: maximize_offered(sample_app))
        await pilot.press("enter")
        await wait_until(pilot, lambda: sample_app.screen.maximized is table)
        await settle(pilot)
        assert [c.width for c in table.columns.values()] != widths
        await pilot.press("escape")
        await wait_until(pilot, lambda: sample_app.screen.maximized is None)
        await settle(pilot)
        await wait_until(pilot, lambda: [c.width for c in table.columns.values()] == widths)


def maximize_offered(app: RelayApp) -> bool:
    from textual.command import CommandList

    lists = app.screen.query(CommandList)
    return bool(lists) and any("Maximize" in str(o.prompt) for o in lists.first().options)


# -- 7: events re-wrap --------------------------------------------------------------------
@run_async
async def test_event_lines_wrap_again_when_the_pane_narrows(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    words = " ".join(f"word{n}" for n in range(25))
    write(
        url, Event(at=NOW, job_id="search", kind="config.warning", level="warning", message=words)
    )
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        events = app.main_screen.query_one(EventList)
        await wait_until(pilot, lambda: events.option_count > 0)

        def shown() -> str:
            return " ".join(strip.text for strip in events.render_lines(events.region.reset_offset))

        await pilot.press("5", "end")
        await settle(pilot)
        assert "word24" in shown()
        await pilot.resize_terminal(120, 48)
        await settle(pilot)
        await pilot.press("5", "end")
        await settle(pilot)
        assert "word0" in shown() and "word24" in shown()  # nothing clipped at the edge


# -- 8: a keymap that takes another binding's key -------------------------------------------
@run_async
async def test_a_keymap_entry_taking_another_key_is_refused_and_said(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    config = RelayConfig(agents=default_config().agents, keymap={"cancel": "x"})  # x: Close PR
    app = RelayApp(tmp_path, db_url=url, clock=frozen_clock, blink=False, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        refusal = next(m for m in toasts(app) if "refused" in m)
        assert 'cancel = "x" refused: x is already Close PR (close-pr)' in refusal
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        keys = {row[2]: row[0] for row in app.screen.key_rows}
        assert (keys["cancel"], keys["close-pr"]) == ("c", "x")


# -- 9: searching a task's output ---------------------------------------------------------
@run_async
async def test_an_output_search_shows_itself_and_escape_clears_it(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/docs")
        await pilot.press("enter")
        screen = sample_app.screen
        await wait_until(
            pilot, lambda: isinstance(screen, DetailScreen) and screen.tail_ready.is_set()
        )
        output = screen.query_one("#output")
        await pilot.press("slash", *"lint", "enter")
        await wait_until(pilot, lambda: "search: lint" in str(output.border_title or ""))
        assert "esc clears" in str(output.border_title)
        await pilot.press("escape")  # clears the search, stays on the task
        await wait_until(pilot, lambda: "search" not in str(output.border_title or ""))
        assert sample_app.screen is screen and screen.query_text == ""
        await pilot.press("escape")
        await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)


# -- 10: the preview is whole ------------------------------------------------------------
@run_async
async def test_the_preview_shows_the_whole_note(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    reason = "exit 1: " + " ".join(f"part{n}" for n in range(60)) + " END"
    store = Store(url)
    with store.write() as session:
        task = session.get(Task, "search/fixtures")
        assert task is not None
        task.error = reason
    store.dispose()
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/fixtures")
        await settle(pilot)
        preview = app.main_screen.query_one("#jobs-preview")
        assert preview.region.height > 2 and "END" in str(preview.render())


# -- 11: a planner round held by its budget ------------------------------------------------
@run_async
async def test_a_planner_round_held_by_its_budget_says_why(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    write(
        url,
        Job(id="costly", title="Costly", mode="autonomous", budget_usd=0.006, created_at=NOW - 10),
        Plan(id=9, job_id="costly", round=3, trigger="wave", status="PLANNING"),
        Execution(id="ex-costly-1", job_id="costly", plan_id=1, agent="sim-gemini",
                  provider="gemini", started_at=NOW - 100, ended_at=NOW - 90, cost_usd=0.007),
    )  # fmt: skip
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        planner = app.main_screen.query_one("#planner")
        await wait_until(pilot, lambda: "plan:9" in planner.row_keys)
        note = str(planner.get_row("plan:9")[-1])
        assert "held: budget exhausted: $0.007 of $0.006 — b raises it" in note


@run_async
async def test_the_job_view_names_the_engine_running_a_planner(tmp_path: Path) -> None:
    from relay_engine.store.schema import EngineRecord

    url = write_sample(tmp_path)
    write(
        url,
        EngineRecord(id="eng-p", host="plan-host", pid=7, heartbeat_at=NOW - 1),
        Execution(id="ex-plan-live", job_id="billing", plan_id=2, agent="sim-gemini",
                  provider="gemini", started_at=NOW - 30, engine_id="eng-p"),
    )  # fmt: skip
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        screen = await open_row(pilot, "job:billing", JobScreen)
        facts = str(screen.query_one("#job-engines").render())
        assert "eng-p plan-host pid 7 · live" in facts and "no engine" not in facts


# -- 12: money ------------------------------------------------------------------------------
def test_sub_cent_amounts_are_shown_as_they_are() -> None:
    spent = SpendView(cost_usd=0.007, executions=1)
    job = JobView(id="j", title="j", state="ACTIVE", mode="manual", wave_gate="auto",
                  approved_wave=0, priority="P2", created_at=0.0, budget_usd=0.006, spend=spent,
                  budget=BudgetView("exhausted", "budget exhausted: $0.01 of $0.01", 1.17))  # fmt: skip
    assert budget_words(job) == "budget exhausted: $0.007 of $0.006"
    assert (money(0.007), money(0.0123), money(0.09), money(1.234), money(0.0004)) == (
        "$0.007", "$0.012", "$0.09", "$1.23", "<$0.001",
    )  # fmt: skip
    assert dollars(SpendView(input_tokens=900, output_tokens=20)) == "$?"  # never "920 tok"
    assert dollars(NO_SPEND) == ""


@pytest.mark.parametrize("typed", ["1e308", "1e3", "inf", "nan", "-5", "0", "50000", "5.123456"])
def test_a_budget_raise_refuses_amounts_that_are_not_plain_dollars(typed: str) -> None:
    assert isinstance(parse_dollars(typed), str), typed


def test_a_budget_raise_takes_plain_dollars() -> None:
    assert [parse_dollars(v) for v in ("5", "$2.50", "1,000", ".25")] == [5.0, 2.5, 1000.0, 0.25]


# -- 13: a Claude limit -------------------------------------------------------------------
def test_a_claude_limit_reads_as_a_time() -> None:
    text = limit_words(f"Claude AI usage limit reached|{int(NOW) + 3900}", NOW)
    assert text == "Claude AI usage limit reached; resets 10:05 (in 1h05m)"
    assert "|" not in limit_words(f"limit|{int(NOW) + 90000}", NOW)  # a later day: its date


@run_async
async def test_no_raw_limit_epoch_reaches_the_screen(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    raw = f"Claude AI usage limit reached|{int(NOW) + 1380}"
    store = Store(url)
    with store.write() as session:
        task = session.get(Task, "search/crawler")
        assert task is not None
        task.error = raw
        session.add(Event(at=NOW, job_id="search", task_key="search/crawler",
                          kind="task.parked", level="warning", message=f"crawler parked: {raw}"))  # fmt: skip
    store.dispose()
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/crawler")
        await settle(pilot)
        preview = str(app.main_screen.query_one("#jobs-preview").render())
        assert "resets 09:23" in preview and "|17" not in preview
        events = app.main_screen.query_one(EventList)
        assert not any("|17" in str(o.prompt) for o in events.options)


# -- 14: the pin dialog ---------------------------------------------------------------------
@run_async
async def test_the_pin_dialog_says_which_agents_cannot_work(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    write(
        url,
        AgentRecord(id="ghost", provider="claude", roles=["implementer"]),
        AgentStatus(agent_id="ghost", provider="claude", status="cli-missing",
                    reason="claude: command not found", fix="install claude", since=NOW - 60),
    )  # fmt: skip
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/api")
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, PinScreen))
        options = app.screen.query_one("#agents").options
        ghost = next(o for o in options if o.id == "ghost")
        assert "claude: ok" not in str(ghost.prompt) and "install claude" in str(ghost.prompt)
        assert ghost.disabled
        # Each agent counts its own runs: ghost shares claude with agents that work, runs none.
        snapshot = app.snapshot
        assert snapshot is not None
        busy = {run.agent for run in snapshot.runs if snapshot.run_alive(run)}
        assert busy and "ghost" not in busy
        for option in options:
            count = sum(1 for r in snapshot.runs if r.agent == option.id and snapshot.run_alive(r))
            shown = str(option.prompt)
            assert (f"{count} running" in shown) if count else ("running" not in shown), shown


# -- 15: wave rows ------------------------------------------------------------------------
@run_async
async def test_the_cursor_passes_over_wave_rows(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(JobsTable)
        await cursor_to(pilot, "job:search")
        await pilot.press("down")
        await wait_until(pilot, lambda: table.cursor_key == "search/schema")
        await cursor_to(pilot, "search/api")
        await pilot.press("up")
        await wait_until(pilot, lambda: table.cursor_key == "search/fixtures.troubleshoot")
        for _ in range(40):
            await pilot.press("down")
            assert not (table.cursor_key or "").startswith("wave:")


# -- 16: 80 columns -------------------------------------------------------------------------
@run_async
async def test_at_80_columns_help_quit_commands_and_gone_engines_stay(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/fixtures")
        await pilot.press("r")  # a command no engine applies: it waits
        await wait_until(pilot, lambda: "1 cmd waiting" in text_of(app, "#header"))
        header = text_of(app, "#header")
        assert "1 gone" in header and "on you" in header and len(header) <= 80
        keys = str(app.main_screen.query_one(KeyBar).render())
        assert keys.rstrip().endswith("? Help  q Quit") and "searc▏" not in keys
        assert len(keys) <= 80


# -- 18: events lead somewhere ------------------------------------------------------------
@run_async
async def test_an_event_takes_the_cursor_and_keys_act_on_its_task(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("5")
        events = sample_app.main_screen.query_one(EventList)
        await wait_until(pilot, lambda: events.has_focus and events.option_count > 0)
        index = next(i for i, key in enumerate(events._shown) if
                     (events.entry(key) or events).task_key == "search/docs")  # fmt: skip
        events.highlighted = index
        await pilot.pause()
        assert sample_app.current_target().task_key == "search/docs"
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, ConfirmScreen))
        assert sample_app.screen.target == "search/docs"
        await pilot.press("n")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, DetailScreen))
        assert sample_app.screen.key == "search/docs"


# -- 19: g on a job without a gate ----------------------------------------------------------
@run_async
async def test_approve_on_a_job_without_a_gate_says_so(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/api")
        await pilot.press("g")
        await wait_until(pilot, lambda: any("has no wave gate" in m for m in toasts(sample_app)))
        keys = str(sample_app.main_screen.query_one(KeyBar).render())
        assert "Approve" not in keys  # offered for a gated job only
        await cursor_to(pilot, "billing/reports")
        await wait_until(
            pilot, lambda: "Approve" in str(sample_app.main_screen.query_one(KeyBar).render())
        )


# -- 20: rows appearing above the cursor ---------------------------------------------------
@run_async
async def test_a_job_appearing_above_keeps_the_cursor_on_its_line(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        # A row in the top half of the pane: one near the bottom may be snapped to the last
        # line by a resize a loaded box delivers late (which is not what this test is about).
        await cursor_to(pilot, "search/docs")
        table = app.main_screen.query_one(JobsTable)
        line = table.cursor_row - round(table.scroll_y)
        assert 0 < line < table.size.height // 2
        write(
            url,
            Job(id="hotfix", title="Hotfix", priority="P0", created_at=NOW - 6000),
            Task(key="hotfix/a", job_id="hotfix", task_id="a", title="a", input="",
                 created_at=NOW - 6000, updated_at=NOW),
            Event(at=NOW, job_id="hotfix", kind="job.submitted", message="job hotfix submitted"),
        )  # fmt: skip
        app.feed.nudge()
        await wait_until(pilot, lambda: "job:hotfix" in table.row_keys)
        await settle(pilot)
        assert table.cursor_key == "search/docs"
        # The view settles on the line once the new rows are laid out (a loaded box may draw
        # the rows a frame before it scrolls).
        await wait_until(pilot, lambda: table.cursor_row - round(table.scroll_y) == line)


# -- 21: one cause, one line ----------------------------------------------------------------
@run_async
async def test_a_cancel_that_blocks_many_tasks_is_one_event_line(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        events = sample_app.main_screen.query_one(EventList)
        await wait_until(pilot, lambda: events.option_count > 0)
        lines = [str(o.prompt) for o in events.options]
        burst = [line for line in lines if "3 tasks blocked" in line]
        assert burst == [
            next(line for line in lines if "cancelled api-keys/legacy → 3 tasks blocked" in line)
        ]
        assert "export, cleanup, docs" in burst[0]
        assert sum("blocked by api-keys/legacy" in line for line in lines) == 0


# -- 22: words ------------------------------------------------------------------------------
def test_engine_sentences_read_as_english() -> None:
    assert english("job j: budget raised; 1 parked tasks resumed") == (
        "job j: budget raised; 1 parked task resumed"
    )
    assert english("review asked for changes 1 times (max_review_rounds)") == (
        "review asked for changes once (max_review_rounds)"
    )
    assert english("3 task(s) and 1 agent(s)") == "3 tasks and 1 agent"


@run_async
async def test_a_finished_job_without_git_does_not_promise_a_review(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    write(url, Job(id="plain", title="Plain", state="SUCCEEDED", created_at=NOW - 9000))
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        screen = await open_row(pilot, "job:plain", JobScreen)
        review = str(screen.query_one("#job-review").render())
        assert "runs when the work is done" not in review and "no git branch" in review


@run_async
async def test_confirmations_count_in_words(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "job:api-keys")
        await pilot.press("C")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, ConfirmScreen))
        assert "4 unfinished tasks are cancelled" in sample_app.screen.question
        assert "(s)" not in sample_app.screen.question


# -- 23: number keys everywhere; providers whole at 150x34 ---------------------------------
@run_async
async def test_number_keys_and_u_work_from_the_detail_and_job_screens(
    sample_app: RelayApp,
) -> None:
    async with sample_app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await cursor_to(pilot, "search/docs")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, DetailScreen))
        await pilot.press("2")
        await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)
        assert sample_app.main_screen.active == "running"
        await cursor_to(pilot, "job:search")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, JobScreen))
        await pilot.press("u")
        await wait_until(pilot, lambda: isinstance(sample_app.screen, UsageScreen))
        await pilot.press("6")
        await wait_until(pilot, lambda: sample_app.screen is sample_app.main_screen)
        assert sample_app.main_screen.active == "needs"


@run_async
async def test_every_provider_row_shows_at_150x34(sample_app: RelayApp) -> None:
    async with sample_app.run_test(size=(150, 34)) as pilot:
        await wait_loaded(pilot)
        table = sample_app.main_screen.query_one(ProvidersTable)
        await settle(pilot)
        assert table.row_count == 12  # 3 providers, 5 agents, then the quota windows
        assert table.row_keys[7] == "agent:sim-gemini"
        assert table.scrollable_content_region.height >= 8 + 1  # the column labels too


@run_async
async def test_sorting_applies_the_snapshot_again_without_doubling_events(
    sample_app: RelayApp,
) -> None:
    """Found by the tmux key bursts: ``s`` applies the current snapshot again, and its events
    were added twice (DuplicateID ended the console)."""
    async with sample_app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        events = sample_app.main_screen.query_one(EventList)
        count = events.option_count
        await pilot.press("s", "s")
        await pilot.pause(0.3)
        assert sample_app._exception is None and events.option_count == count

"""Real keys against a live engine while rows appear, move and disappear under the cursor.

A key acts on the cursor row of the focused pane at the moment of the key. These tests read
that row the way the operator sees it (the focused table's cursor, through DataTable's own
API), press the key, and check what the console opened or sent.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest
from console_helpers import cursor_to, run_async, type_keys, wait_until
from live_helpers import churn_tasks, live_app, live_workspace, quit_app, submit
from sqlmodel import col, select
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList

from relay_engine.store.schema import Command, Task
from relay_tui.app import RelayApp
from relay_tui.screens.base import Dialog
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.pin import PinScreen
from relay_tui.screens.replan import ReplanScreen
from relay_tui.widgets.events import EventList

pytestmark = pytest.mark.timeout(240)

NAV_KEYS = ("down", "up", "j", "k", "down", "j", "home", "end", "G")
PANE_KEYS = ("1", "2", "4", "tab")
"""Each round starts on the next of these (jobs, running, planner, the pane after): a random
pick could leave a pane with too few rounds to check (seed 4606 gave jobs one)."""
ACTION_KEYS = ("c", "a", "p", "enter", "r")
SEED = int(os.environ.get("RELAY_TEST_SEED", time.time_ns() % 10_000))


def cursor_row(app: RelayApp) -> tuple[str | None, str | None]:
    """(pane, row key) under the focused cursor, read with DataTable's (and OptionList's)
    public API."""
    focused = app.main_screen.focused
    if isinstance(focused, OptionList):
        index = focused.highlighted
        option = focused.get_option_at_index(index) if index is not None else None
        return focused.id, option.id if option else None
    if not isinstance(focused, DataTable) or focused.row_count == 0:
        return (focused.id if focused else None), None
    row_key, _ = focused.coordinate_to_cell_key(focused.cursor_coordinate)
    return focused.id, row_key.value


def expected_task_and_job(
    app: RelayApp, pane: str | None, key: str | None
) -> tuple[str | None, str | None]:
    if key is None or pane in (None, "providers"):
        return None, None
    if pane == "events":  # an event stands for its task, a burst of several for its job
        entry = app.main_screen.query_one(EventList).entry(key)
        if entry is None:
            return None, None
        task = entry.task_key
        return task, entry.job_id or (task.partition("/")[0] if task else None)
    if pane == "running":
        run = app.snapshot.run(key) if app.snapshot else None
        return (run.task_key, run.job_id) if run else (None, None)
    kind, _, rest = key.partition(":")
    if kind == "job":
        return None, rest
    if kind == "wave":
        return None, rest.rpartition(":")[0]
    if kind == "plan":
        plan = next((p for p in app.snapshot.plans if str(p.id) == rest), None)
        return None, plan.job_id if plan else None
    return key, key.partition("/")[0]


def retry_commands(app: RelayApp) -> list[str]:
    with app.store.read() as session:
        rows = session.exec(
            select(Command).where(Command.kind == "retry").order_by(col(Command.id))
        )
        return [str((row.payload or {}).get("task")) for row in rows]


async def back_to_main(pilot: Pilot[None], app: RelayApp) -> None:
    for _ in range(10):
        if app.screen is app.main_screen:
            return
        await type_keys(pilot, "escape")
        await pilot.pause(0.05)
    raise AssertionError(f"stuck on {app.screen!r}")


def check_opened(app: RelayApp, action: str, task: str | None, job: str | None) -> bool:
    """What the key opened names the row that was under the cursor; True when it opened one."""
    screen = app.screen
    if isinstance(screen, Dialog):
        if isinstance(screen, ReplanScreen):
            assert job is not None and screen.target == f"job:{job}", (screen.target, job)
        else:
            assert isinstance(screen, ConfirmScreen | PinScreen), screen
            assert task is not None and screen.target == task, (action, screen.target, task)
        return True
    if isinstance(screen, DetailScreen):
        assert screen.key == task, (screen.key, task)
        return True
    if isinstance(screen, JobScreen):
        assert task is None and screen.job_id == job, (screen.job_id, job)
        return True
    return False


async def one_round(
    pilot: Pilot[None], app: RelayApp, rng: random.Random, pane_key: str
) -> tuple[bool, str]:
    await pilot.press(pane_key)
    for _ in range(rng.randint(0, 4)):
        await pilot.press(rng.choice(NAV_KEYS))
        if rng.random() < 0.5:
            await asyncio.sleep(rng.uniform(0.0, 0.25))
    pane, key = cursor_row(app)
    task, job = expected_task_and_job(app, pane, key)
    action = rng.choice(ACTION_KEYS)
    retries_before = retry_commands(app)
    await pilot.press(action)
    await pilot.pause()
    table = app.main_screen.query_one(f"#{pane}") if pane else None
    vanished = (
        key is not None
        and isinstance(table, DataTable)
        and key not in app.main_screen.query_one(f"#{pane}").row_keys
    )  # type: ignore[attr-defined]
    opened = False
    if not vanished:
        opened = check_opened(app, action, task, job)
        if action == "r":
            await asyncio.sleep(0.1)
            sent = retry_commands(app)[len(retries_before) :]
            assert sent in ([], [task]), (sent, task)
    await back_to_main(pilot, app)
    return opened, pane or ""


@pytest.mark.slow
@run_async
async def test_keys_act_on_the_focused_cursor_row_while_rows_churn(tmp_path: Path) -> None:
    workspace = live_workspace(tmp_path)
    submit(workspace, "churn", churn_tasks(40, SEED))
    submit(workspace, "more", churn_tasks(25, SEED + 1))
    app = live_app(workspace)
    rng = random.Random(SEED)
    opened_in: dict[str, int] = {}
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None and bool(app.snapshot.runs))
        for number in range(45):
            opened, pane = await one_round(pilot, app, rng, PANE_KEYS[number % len(PANE_KEYS)])
            if opened:
                opened_in[pane] = opened_in.get(pane, 0) + 1
        await quit_app(pilot, app)
    # Most rounds press a key that opens something; enough of them must have been checked.
    assert sum(opened_in.values()) >= 8, f"seed {SEED}: too few checked rounds {opened_in}"
    assert opened_in.get("jobs", 0) >= 2, f"seed {SEED}: too few jobs-pane rounds {opened_in}"


@run_async
async def test_a_row_appearing_in_another_pane_does_not_become_the_target(tmp_path: Path) -> None:
    """The reported bug: cursor on a finished task, an agent starts, c named the new row."""
    workspace = live_workspace(tmp_path)
    submit(workspace, "first", [{"id": "done", "input": "x", "sim": {"duration": 0.1, "lines": 1}}])
    app = live_app(workspace)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_until(
            pilot,
            lambda: (
                app.snapshot is not None
                and app.snapshot.tasks.get("first/done") is not None
                and app.snapshot.tasks["first/done"].state == "SUCCEEDED"
                and not app.snapshot.runs
            ),
            timeout=30,
        )
        await cursor_to(pilot, "first/done")
        long_task = {"id": "late", "input": "x", "sim": {"duration": 20.0, "lines": 20}}
        submit(workspace, "second", [long_task])
        running = app.main_screen.query_one("#running", DataTable)
        await wait_until(pilot, lambda: running.row_count == 1, timeout=30)
        await pilot.pause()
        assert cursor_row(app) == ("jobs", "first/done")
        await pilot.press("c")
        assert app.screen is app.main_screen  # a succeeded task: a warning, no dialog
        await pilot.press("a")
        assert isinstance(app.screen, PinScreen) and app.screen.target == "first/done"
        await pilot.press("escape", "enter")
        assert isinstance(app.screen, DetailScreen) and app.screen.key == "first/done"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        assert app.current_target().task_key == "first/done"
        await quit_app(pilot, app)


@run_async
async def test_double_enter_in_every_dialog_sends_once_and_never_crashes(tmp_path: Path) -> None:
    workspace = live_workspace(tmp_path)
    long = {"duration": 30.0, "lines": 30}
    tasks = [
        {"id": "run1", "input": "x", "sim": long},
        {"id": "run2", "input": "x", "sim": long},
        {"id": "wait", "input": "x", "depends_on": ["run1"], "sim": long},
    ]
    submit(workspace, "dd", tasks, wave_gate="operator")
    app = live_app(workspace)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_until(
            pilot, lambda: bool(app.snapshot and len(app.snapshot.runs) == 2), timeout=30
        )
        steps = (
            (None, ("q", "enter", "enter"), None),  # quit asks (agents run): enter is No
            ("dd/run2", ("c", "y", "enter"), "cancel"),  # y answers; the enter lands on main
            ("dd/wait", ("a", "enter", "enter"), "pin"),
            ("dd/wait", ("g", "tab", "enter", "enter"), "approve"),
            ("job:dd", ("C", "n", "enter"), None),
            ("dd/wait", ("p", *"split it", "enter", "enter"), "replan"),
            # last: cancelling run1 drops wait, which needs it
            ("dd/run1", ("c", "tab", "enter", "enter"), "cancel"),  # tab to Yes, enter enter
        )
        for row, keys, kind in steps:
            await back_to_main(pilot, app)
            if row is not None:
                await cursor_to(pilot, row)
            before = kinds(app)
            await pilot.press(*keys)
            if kind:  # sent from a worker: on a loaded machine later than any fixed pause
                sent = len(before) + 1
                await wait_until(pilot, lambda: len(kinds(app)) >= sent, timeout=15)  # noqa: B023
            await pilot.pause(0.3)  # time for a second, duplicate command to show
            assert app.return_code is None, f"{keys} ended the console"
            added = kinds(app)[len(before) :]
            assert added == ([kind] if kind else []), (keys, added)
        await quit_app(pilot, app)
    assert app.return_code == 0


def kinds(app: RelayApp) -> list[str]:
    with app.store.read() as session:
        return [row.kind for row in session.exec(select(Command).order_by(col(Command.id)))]


@run_async
async def test_retry_unblocks_dependents_on_screen_within_one_refresh(tmp_path: Path) -> None:
    workspace = live_workspace(tmp_path)
    tasks = [
        {
            "id": "docs",
            "input": "x",
            "max_attempts": 1,
            "sim": {"duration": 0.2, "fail_attempts": 1},
        },
        {"id": "ui", "input": "x", "depends_on": ["docs"], "sim": {"duration": 5.0, "lines": 5}},
        {"id": "review", "input": "x", "depends_on": ["ui"], "sim": {"duration": 5.0, "lines": 5}},
        # keeps the job active, so the retry reactivates nothing that would reload every row
        {"id": "busy", "input": "x", "sim": {"duration": 60.0, "lines": 60}},
    ]
    submit(workspace, "rb", tasks)
    app = live_app(workspace)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:

        def blocked(key: str) -> bool:
            task = app.snapshot.tasks.get(key) if app.snapshot else None
            return task is not None and task.blocked_by is not None

        await wait_until(pilot, lambda: blocked("rb/ui") and blocked("rb/review"), timeout=30)
        await cursor_to(pilot, "rb/docs")
        await pilot.press("r")
        seen_retried = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            snapshot = app.snapshot
            assert snapshot is not None
            if snapshot.tasks["rb/docs"].state != "FAILED":
                seen_retried = True
                # the same snapshot that shows the retry shows its dependents unblocked
                assert not blocked("rb/ui") and not blocked("rb/review")
                table = app.main_screen.query_one("#jobs")
                note = str(table.get_cell("rb/ui", "info"))  # type: ignore[attr-defined]
                assert "blocked" not in note
                break
            await asyncio.sleep(0.01)
        assert seen_retried
        await quit_app(pilot, app)


@run_async
async def test_detail_follows_a_500_line_output_to_its_end(tmp_path: Path) -> None:
    workspace = live_workspace(tmp_path)
    task = {"id": "long", "input": "x", "agent": "codex-b", "sim": {"duration": 4.0, "lines": 500}}
    submit(workspace, "out", [task])
    app = live_app(workspace)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await cursor_to(pilot, "out/long")
        await wait_until(
            pilot, lambda: app.snapshot.tasks["out/long"].state == "RUNNING", timeout=30
        )  # type: ignore[union-attr]
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        log = screen.query_one("#output")

        def finished() -> bool:
            with app.store.read() as session:
                row = session.get(Task, "out/long")
                return row is not None and row.state == "SUCCEEDED"

        await wait_until(pilot, finished, timeout=60)
        await wait_until(
            pilot, lambda: any("step 500/500" in line.text for line in log.lines), timeout=10
        )  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        assert log.scroll_y == log.max_scroll_y  # type: ignore[attr-defined]
        texts = [line.text for line in log.lines]  # type: ignore[attr-defined]
        assert sum("step " in text for text in texts) == 500  # appended once each, none lost
        assert "step 500/500" in texts[-2] + texts[-1]
        await quit_app(pilot, app)

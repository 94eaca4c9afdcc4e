"""Pilot tests against the real embedded engine and real sim agent processes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from console_helpers import cursor_to, run_async, wait_until
from sqlmodel import col, select
from textual.pilot import Pilot

from relay_engine.contracts.config import load_config
from relay_engine.contracts.job_file import load_job_file
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution, Task
from relay_tui.app import RelayApp
from relay_tui.screens.confirm import ConfirmScreen

pytest.importorskip("relay_engine.loop.engine", reason="needs relay_engine/loop/engine.py")
pytestmark = pytest.mark.timeout(90)

RELAY_TOML = """\
[engine]
max_concurrent_agents = 2
tick_seconds = 0.1
cancel_grace_seconds = 1.0

[[agents]]
id = "sim"
provider = "sim"
roles = ["implementer"]
"""


def workspace(tmp_path: Path, tasks: str) -> Path:
    (tmp_path / "relay.toml").write_text(RELAY_TOML, encoding="utf-8")
    job = tmp_path / "job.toml"
    job.write_text('[job]\nid = "j"\ntitle = "console test"\n\n' + tasks, encoding="utf-8")
    store = Store.for_workspace(tmp_path)
    submit_job(store, load_job_file(job), now=time.time())
    store.dispose()
    return tmp_path


def embedded_app(path: Path, *, demo: bool = False) -> RelayApp:
    return RelayApp(path, config=load_config(path), blink=False, demo=demo, poll_interval=0.2)


def task_row(app: RelayApp, key: str) -> Task:
    with app.store.read() as session:
        task = session.get(Task, key)
        assert task is not None
        return task


def process_groups(app: RelayApp, key: str) -> list[int]:
    with app.store.read() as session:
        rows = session.exec(select(Execution).where(col(Execution.task_key) == key))
        return [row.pgid or row.pid for row in rows if row.pgid or row.pid]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def wait_state(pilot: Pilot[None], app: RelayApp, key: str, *states: str) -> None:
    await wait_until(pilot, lambda: task_row(app, key).state in states, timeout=30)


async def select_task(pilot: Pilot[None], app: RelayApp, key: str) -> None:
    await wait_until(pilot, lambda: app.snapshot is not None and key in app.snapshot.tasks)
    await pilot.pause()
    await cursor_to(pilot, key)
    assert app.current_target().task_key == key


async def wait_exit(app: RelayApp, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while app.return_code is None:
        assert time.monotonic() < deadline, "the console did not exit"
        await asyncio.sleep(0.05)


LONG = '[[tasks]]\nid = "long"\ninput = "x"\nsim = { duration = 60.0, lines = 60 }\n'


@run_async
async def test_cancel_kills_the_running_agent(tmp_path: Path) -> None:
    app = embedded_app(workspace(tmp_path, LONG))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_state(pilot, app, "j/long", "RUNNING")
        await wait_until(pilot, lambda: bool(process_groups(app, "j/long")))
        groups = process_groups(app, "j/long")
        await select_task(pilot, app, "j/long")
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_state(pilot, app, "j/long", "CANCELLED")
        await wait_until(pilot, lambda: not any(group_alive(g) for g in groups), timeout=15)
        await pilot.press("q")
        await wait_exit(app)


@run_async
async def test_retry_queues_a_failed_task_again(tmp_path: Path) -> None:
    tasks = (
        '[[tasks]]\nid = "flaky"\ninput = "x"\nmax_attempts = 1\n'
        "sim = { duration = 2.0, lines = 2, fail_attempts = 1, exit_code = 1 }\n"
    )
    app = embedded_app(workspace(tmp_path, tasks))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_state(pilot, app, "j/flaky", "FAILED")
        await select_task(pilot, app, "j/flaky")
        await wait_until(
            pilot,
            lambda: app.snapshot is not None and app.snapshot.tasks["j/flaky"].state == "FAILED",
        )
        await pilot.press("r")
        await wait_state(pilot, app, "j/flaky", "QUEUED", "RUNNING", "SUCCEEDED")
        retried = task_row(app, "j/flaky")
        assert retried.max_attempts >= 2
        await pilot.press("q")
        await wait_until(
            pilot,
            lambda: (
                isinstance(app.screen, ConfirmScreen)
                or task_row(app, "j/flaky").state in {"FAILED", "SUCCEEDED"}
            ),
        )
        if isinstance(app.screen, ConfirmScreen):
            await pilot.press("y")
        else:
            await pilot.press("q")
        await wait_exit(app)


@run_async
async def test_quit_with_agents_running_asks_then_releases_them(tmp_path: Path) -> None:
    app = embedded_app(workspace(tmp_path, LONG))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_state(pilot, app, "j/long", "RUNNING")
        await wait_until(pilot, lambda: bool(process_groups(app, "j/long")))
        groups = process_groups(app, "j/long")
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.main_screen)
        assert task_row(app, "j/long").state == "RUNNING"
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_exit(app)
    task = task_row(app, "j/long")
    assert task.state == "QUEUED"
    assert not any(group_alive(g) for g in groups)


@run_async
async def test_demo_quits_without_asking_and_leaves_no_agents(tmp_path: Path) -> None:
    from relay_tui.demo.workspace import make_demo_workspace

    app = embedded_app(make_demo_workspace(tmp_path / "demo"), demo=True)

    def running_keys() -> list[str]:
        runs = app.snapshot.runs if app.snapshot else ()
        return [run.task_key for run in runs if run.task_key]

    async with app.run_test(size=(160, 48)) as pilot:
        # an execution shows as running before its process id is recorded: wait for both
        await wait_until(
            pilot, lambda: any(process_groups(app, key) for key in running_keys()), timeout=10
        )
        keys = running_keys()
        await pilot.press("q")
        await wait_exit(app)
    groups = [g for key in keys for g in process_groups(app, key)]
    assert groups
    assert not any(group_alive(g) for g in groups)

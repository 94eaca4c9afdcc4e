"""Issue 21.5 with a real engine: an attached console, the engine ``kill -9``ed. Its runs
must stop looking alive once its lease is over (their clocks stop, the rows say the engine
is gone, the header counts them lost, not working)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from console_helpers import run_async, wait_until
from helpers import Workspace, job_toml, sim, stop_process, tasks, wait_for

from relay_engine.contracts.config import load_config
from relay_tui.app import RelayApp
from relay_tui.widgets.running import RunningTable


@pytest.mark.slow
@run_async
async def test_runs_of_a_killed_engine_stop_looking_alive(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    ws.configure(lease=3.0, heartbeat=0.5)
    ws.submit(job_toml("j", [{"id": f"t{n}", "sim": sim(120, lines=120)} for n in range(2)]))
    engine = ws.popen("run")
    try:
        wait_for(lambda: sum(t.state == "RUNNING" for t in tasks(ws.store()).values()) == 2, 60)
        url = f"sqlite:///{ws.path / '.relay' / 'relay.db'}"
        app = RelayApp(ws.path, db_url=url, config=load_config(ws.path), poll_interval=0.2)
        async with app.run_test(size=(160, 48)) as pilot:
            table = app.main_screen.query_one(RunningTable)
            await wait_until(pilot, lambda: table.row_count == 2, timeout=30)
            header = lambda: str(app.main_screen.query_one("#header").render())  # noqa: E731
            assert "agents 2/" in header()
            os.kill(engine.pid, signal.SIGKILL)
            await wait_until(pilot, lambda: "2 agents lost with their engine" in header(), 30)
            assert "engine: none running" in header() and "agents 2/" not in header()
            rows = [table.get_row(key) for key in table.row_keys]
            assert all("engine gone" in str(table.get_cell(k, "step")) for k in table.row_keys)
            frozen = [str(table.get_cell(k, "elapsed")) for k in table.row_keys]
            time.sleep(2.5)
            await pilot.pause(1.5)
            assert [str(table.get_cell(k, "elapsed")) for k in table.row_keys] == frozen
            assert rows
    finally:
        stop_process(engine)

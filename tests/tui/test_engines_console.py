"""Engines in the console: the header counts live and gone engines, and the job view says
which engines hold the job's work and whether they are still there."""

from __future__ import annotations

from pathlib import Path

from console_helpers import (
    attached_app,
    open_row,
    run_async,
    wait_loaded,
)
from test_console_errors import header

from relay_engine.store.db import Store
from relay_engine.store.schema import EngineRecord, Task
from relay_tui.demo.sample import NOW, write_sample
from relay_tui.screens.job import JobScreen


def _add_engines(url: str) -> None:
    """A live engine running search/docs, one gone silent (SIGKILLed, say) still holding
    search/ui, and one that stopped cleanly."""
    store = Store(url)
    with store.write() as session:
        session.add_all(
            [
                EngineRecord(id="run-live", host="alpha", pid=11, heartbeat_at=NOW - 2),
                EngineRecord(
                    id="run-idle", host="alpha", pid=12, heartbeat_at=NOW - 9, asleep_since=NOW - 30
                ),
                EngineRecord(id="run-lost", host="beta", pid=22, heartbeat_at=NOW - 600),
                EngineRecord(id="run-done", host="beta", pid=33, stopped_at=NOW - 60),
            ]
        )
        for key, owner in (("search/docs", "run-live"), ("search/ui", "run-lost")):
            task = session.get(Task, key)
            assert task is not None
            task.lease_owner = owner
            session.add(task)
    store.dispose()


@run_async
async def test_header_counts_gone_engines_and_the_job_view_names_them(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    _add_engines(url)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        # a clean stop is not news; the sample's own silent engine is the second
        # one live engine sleeps between heartbeats: no work, not a hang
        assert "2 engines alive, 1 asleep (hb 0:02) · 2 engines gone" in header(app)
        await open_row(pilot, "job:search", JobScreen)
        facts = str(app.screen.query_one("#job-engines").render())
        lines = facts.splitlines()
        assert lines[0] == "run-live alpha pid 11 · live · hb 2s · 1 running"
        assert lines[1] == "run-lost beta pid 22 · gone (silent) · hb 10m · 1 running"
        assert "run-done" not in facts

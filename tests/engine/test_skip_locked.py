"""Claims never wait on rows another session holds.

Another session (an operator's script, a stuck migration, an engine mid-claim) holds
``SELECT … FOR UPDATE`` on job a's queued task rows. The engine has free slots: job a's
rows are passed over, not waited for, and the slots they would have taken go to the next
candidates in the same tick -- job b's task starts at once instead of when the lock goes.
Counted in ticks and events, never in wall time.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from helpers import Workspace, events, job_toml, psycopg_conninfo, sim, tasks
from sqlalchemy.engine import make_url

from relay_engine.loop.readiness import promote_ready

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


@pytest.fixture
def pg_workspace(tmp_path, pg_url: str) -> Workspace:  # type: ignore[no-untyped-def]
    ws = Workspace(tmp_path / "ws", pg_url)
    ws.path.mkdir()
    ws.configure(capacity=2, lease=30.0, heartbeat=0.5, tick=0.05)
    return ws


def test_rows_another_session_holds_are_skipped_and_their_slots_refilled(
    pg_workspace: Workspace,
) -> None:
    workspace = pg_workspace
    first = [{"id": f"a{i}", "sim": sim(5.0), "priority": "P0"} for i in range(4)]
    workspace.submit(job_toml("a", first), name="a.toml")
    workspace.submit(job_toml("b", [{"id": "b0", "sim": sim(5.0), "priority": "P3"}]), "b.toml")
    store = workspace.store()
    promote_ready(store, time.time())
    assert {t.state for t in tasks(store).values()} == {"QUEUED"}
    url = make_url(workspace.db_url or "")
    locker = psycopg.connect(psycopg_conninfo(workspace.db_url or "", url.database or ""))
    engine = workspace.engine()
    try:
        held = locker.execute(
            "SELECT key FROM relay_task WHERE job_id = 'a' AND state = 'QUEUED' FOR UPDATE"
        ).fetchall()
        assert len(held) == 4
        engine.register()
        ticks = 0
        while ticks < 2 and tasks(store)["b/b0"].state != "RUNNING":
            engine.tick()
            ticks += 1
        started = [e.task_key for e in events(store, "task.started")]
        assert started == ["b/b0"], f"after {ticks} ticks: {started}"
        assert {tasks(store)[f"a/a{i}"].state for i in range(4)} == {"QUEUED"}
        locker.rollback()  # the lock goes: job a's tasks take the free slot on the next tick
        engine.tick()
        assert len(events(store, "task.started")) == 2
    finally:
        locker.close()
        engine.shutdown(release=True)

"""No lock can freeze the fleet: an engine paused for 20 s while it holds the claim lock.

The pause is real: the engine stops itself (SIGSTOP) at the ``claim-locked`` crash point,
inside its claim transaction. On PostgreSQL the server ends that idle transaction, and the
other engines keep dispatching; on SQLite, whose writers are serialised by the file lock,
they say "database busy, retrying" and carry on when the lock is free. Either way ``relay
status`` answers at once from a read-only snapshot.
"""

from __future__ import annotations

import signal
import subprocess
import time

import psutil
import pytest
from helpers import (
    Workspace,
    count_by_task,
    executions,
    job_toml,
    sim,
    stop_process,
    tasks,
    wait_for,
)

PAUSE_S = 20.0
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    try:
        return psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def test_an_engine_paused_holding_the_claim_lock_does_not_freeze_the_fleet(
    workspace: Workspace,
) -> None:
    on_postgres = workspace.db_url is not None
    workspace.configure(capacity=3, lease=60.0, heartbeat=0.5, tick=0.1)
    count = 90
    workspace.submit(
        job_toml("fleet", [{"id": f"t{i:03d}", "sim": sim(0.4)} for i in range(count)])
    )
    store = workspace.store()
    armed = {"RELAY_CRASH_AT": "claim-locked:stop:once"}
    paused = workspace.popen("run", "--quiet", log_name="paused.log", env=armed)
    others: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(lambda: stopped(paused), timeout=60, what="the armed engine to pause itself")
        assert "crash point claim-locked: stop" in (workspace.path / "paused.log").read_text()
        paused_at = time.time()
        others = [workspace.popen("run", "--quiet", log_name=f"e{n}.log") for n in (1, 2)]

        # Read-only: it neither waits for the held lock nor fails with "database busy".
        status = workspace.cli("status", "--json", timeout=60)
        assert status.returncode == 0, status.stderr
        assert "t000" in status.stdout

        time.sleep(max(PAUSE_S - (time.time() - paused_at), 0))
        assert stopped(paused) and all(p.poll() is None for p in others)
        during = [
            e for e in executions(store) if e.started_at and paused_at < e.started_at < time.time()
        ]
        logs = "".join((workspace.path / f"e{n}.log").read_text() for n in (1, 2))
        if on_postgres:
            # The server ended the paused transaction; the others kept dispatching.
            assert len(during) >= 10, f"only {len(during)} starts while one engine was paused"
        else:
            assert "database busy, retrying" in logs

        paused.send_signal(signal.SIGCONT)
        wait_for(
            lambda: all(t.state == "SUCCEEDED" for t in tasks(store).values()),
            timeout=180,
            what="every task to succeed",
        )
        assert paused.poll() is None  # resumed and carried on
    finally:
        if stopped(paused):
            paused.send_signal(signal.SIGCONT)
        for proc in [paused, *others]:
            stop_process(proc)
    logs = "".join(
        (workspace.path / name).read_text() for name in ("paused.log", "e1.log", "e2.log")
    )
    assert "Traceback" not in logs, logs
    succeeded = count_by_task(e for e in executions(store) if e.outcome == "succeeded")
    assert len(succeeded) == count and set(succeeded.values()) == {1}

"""An engine whose fleet only waits sleeps between heartbeats, and wakes when a wait ends.

A fleet that waits on the operator (a job blocked on a failed task) or on the clock (a task
parked until its provider's reset) used to cost each engine its housekeeping reads every
tick. These engines tick every 50 ms; one that ticks only a few times in seconds of waiting
slept, and one that acts within seconds of a reset while its heartbeat is half a minute
away woke for it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from helpers import (
    Workspace,
    engine_records,
    executions,
    job_toml,
    jobs,
    running_engine,
    sim,
    task_state,
    tasks,
    wait_for,
)
from test_limits_engine import limit_message, rate_limit_until, sim_agent, submit_now

from relay_engine.core.schedules import next_slot
from relay_engine.core.states import TaskState
from relay_engine.loop.engine import Engine
from relay_engine.loop.outlook import Outlook, read_outlook
from relay_engine.ops.schedules import stored_rule
from relay_engine.store.schema import Job, ProviderLimit, PullRequest, Schedule, Task


def ticks_over(engine: Engine, seconds: float) -> int:
    before = len(engine.ticks)
    time.sleep(seconds)
    return len(engine.ticks) - before


def test_a_fleet_blocked_on_the_operator_sleeps_and_a_retry_wakes_it(
    workspace: Workspace,
) -> None:
    workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0)
    failing = {"id": "a", "max_attempts": 1, "sim": sim(0.05, fail_attempts=1)}
    after = {"id": "b", "dependencies": ["a"], "sim": sim(0.05)}
    workspace.submit(job_toml("stuck", [failing, after]))
    engine = workspace.engine()
    store = workspace.store()
    with running_engine(engine):
        wait_for(lambda: jobs(store)["stuck"].state == "BLOCKED", what="the job to block")
        wait_for(lambda: engine.hears_wake_ups, timeout=15, what="the engine to listen")
        waiting = ticks_over(engine, 2.0)
        assert workspace.cli("retry", "stuck/a").returncode == 0
        wait_for(lambda: task_state(store, "stuck/b") == "SUCCEEDED", timeout=10, what="b")
    assert waiting <= 4, waiting  # forty at the tick interval


@pytest.mark.slow
def test_an_engine_asleep_wakes_for_a_providers_reset_before_its_heartbeat(
    workspace: Workspace,
) -> None:
    agent = sim_agent("solo", "claude", ["implementer"])
    workspace.configure(capacity=1, tick=0.05, heartbeat=30.0, lease=130.0, agents=[agent])
    until = rate_limit_until("claude")
    limited = sim(
        0.05, rate_limit={"message": limit_message("claude", until), "until_epoch": until}
    )
    submit_now(workspace, job_toml("lim", [{"id": "hit", "max_attempts": 1, "sim": limited}]))
    engine = workspace.engine()
    store = workspace.store()
    with running_engine(engine):
        parked = wait_for(
            lambda: (t := tasks(store)["lim/hit"]).state == "PARKED" and t, what="hit parked"
        )
        wait_for(lambda: engine.hears_wake_ups, timeout=15, what="the engine to listen")
        reset = parked.not_before
        assert reset is not None and reset - time.time() > 3, "setup too slow for the check"
        waiting = ticks_over(engine, reset - time.time() - 1.0)
        wait_for(lambda: task_state(store, "lim/hit") == "SUCCEEDED", timeout=20, what="a rerun")
    rerun = max(executions(store), key=lambda e: e.started_at or 0.0)
    assert waiting <= 3, waiting  # at the tick interval: one every 50 ms
    assert reset <= (rerun.started_at or 0.0) < reset + 5  # not at the heartbeat, 30 s on


def test_the_outlook_is_the_first_timed_wait_still_to_come(workspace: Workspace) -> None:
    store = workspace.store()
    now = time.time()
    decided = now + 10 * 86_400  # its slots up to ten days on are decided
    schedule = Schedule(id="nightly", cron="0 3 * * *", cursor_at=decided)
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.add(Task(key="j/t", job_id="j", task_id="t", state=TaskState.PARKED,
                         not_before=now + 50))  # fmt: skip
        session.add(ProviderLimit(provider="claude", status="limited", reset_at=now + 40))
        session.add(ProviderLimit(provider="codex", status="limited", reset_at=now - 5))
        session.add(PullRequest(job_id="j", published=True, last_checked_at=now - 5))
        session.add(schedule)
    with store.read() as session:
        assert read_outlook(session, now, check_seconds=15) == Outlook(False, now + 10)
        assert read_outlook(session, now, check_seconds=100) == Outlook(False, now + 40)
        assert read_outlook(session, now + 45, check_seconds=100) == Outlook(False, now + 50)
        nightly = next_slot(stored_rule(schedule), decided).at
        assert datetime.fromtimestamp(nightly, UTC).hour == 3 and nightly > decided
        assert read_outlook(session, now + 200, check_seconds=100) == Outlook(False, nightly)
    with store.write() as session:
        session.add(Task(key="j/u", job_id="j", task_id="u", state=TaskState.QUEUED))
    with store.read() as session:
        assert read_outlook(session, now, check_seconds=15) == Outlook(True, None)


def test_a_clock_set_back_neither_stops_heartbeats_nor_lengthens_a_sleep(
    sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wall clock jumps an hour back (a VM restored, a clock fixed by hand): an engine
    that slept until its next heartbeat would sleep the hour, and one that heartbeats only
    a heartbeat interval after the last would fall silent for it, its leases lapsing."""
    monkeypatch.setattr(Engine, "hears_wake_ups", property(lambda self: True))
    sqlite_workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0)
    now = [time.time()]
    engine = sqlite_workspace.engine(clock=lambda: now[0])
    engine.tick()
    assert engine._quiet and 0.9 <= engine._sleep_seconds() <= 1.0
    now[0] -= 3600
    assert engine._sleep_seconds() <= 1.0
    engine.tick()
    (record,) = engine_records(sqlite_workspace.store())
    assert record.heartbeat_at == now[0]
    engine.shutdown(release=True)

"""Engines that die, stall or share a database: work is recovered and never done twice."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter

import pytest
from helpers import (
    Workspace,
    count_by_task,
    engine_records,
    events,
    executions,
    job_toml,
    occupancy_by_events,
    pid_gone,
    run_until_idle,
    sim,
    stop_process,
    tasks,
    wait_for,
)

from relay_engine.core.recovery import owner_is_gone
from relay_engine.store.db import Store
from relay_engine.store.engines import owner_facts, register_engine, this_host
from relay_engine.store.schema import EngineRecord, Execution, Task


def running_keys(store: Store) -> list[str]:
    return [key for key, task in tasks(store).items() if task.state == "RUNNING"]


@pytest.mark.slow
def test_killed_engine_orphans_are_recovered_and_nothing_succeeds_twice(
    workspace: Workspace,
) -> None:
    workspace.configure(capacity=4)
    first_wave = [{"id": f"a{i}", "sim": sim(1.5, lines=3)} for i in range(4)]
    later = [{"id": f"b{i}", "depends_on": [f"a{i % 4}"], "sim": sim(0.1)} for i in range(8)]
    workspace.submit(job_toml("crash", first_wave + later))
    store = workspace.store()

    first = workspace.popen("run", "--quiet", log_name="first.log")
    try:
        wait_for(lambda: len(running_keys(store)) >= 2, timeout=30, what="tasks to run")
        orphans = [e for e in executions(store) if e.ended_at is None and e.pid]
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        stop_process(first)
    dead = next(r for r in engine_records(store) if r.pid == first.pid)
    assert dead.stopped_at is None

    second = workspace.cli("run", "--until-idle", "--quiet", timeout=90)
    assert second.returncode == 0, second.stdout + second.stderr

    report = workspace.status()
    assert [j["state"] for j in report["jobs"]] == ["SUCCEEDED"]
    assert {t["state"] for t in report["tasks"]} == {"SUCCEEDED"}
    recovered = events(store, "task.recovered")
    assert recovered, "the dead engine's running tasks were not recovered"
    assert all(dead.id in e.message and "orphaned" in e.message for e in recovered)
    assert {e.task_key for e in recovered} >= {e.task_key for e in orphans}
    assert all(pid_gone(e.pid) for e in orphans if e.pid)

    succeeded_events = count_by_task(events(store, "task.succeeded"))
    assert set(succeeded_events.values()) == {1}
    assert len(succeeded_events) == 12
    succeeded_runs = count_by_task(e for e in executions(store) if e.outcome == "succeeded")
    assert succeeded_runs == succeeded_events


@pytest.mark.slow
def test_two_engines_share_one_workspace_without_doing_work_twice(workspace: Workspace) -> None:
    capacity = 3
    workspace.configure(capacity=capacity)
    definitions = [
        {
            "id": f"t{i:02d}",
            "sim": sim(0.15),
            **({"depends_on": [f"t{i - 5:02d}"]} if i >= 5 else {}),
        }
        for i in range(20)
    ]
    workspace.submit(job_toml("pair", definitions))
    store = workspace.store()

    engines = [
        workspace.popen("run", "--until-idle", "--quiet", log_name=f"e{n}.log") for n in (1, 2)
    ]
    try:
        codes = [proc.wait(90) for proc in engines]
    finally:
        for proc in engines:
            stop_process(proc)

    report = workspace.status()
    assert [j["state"] for j in report["jobs"]] == ["SUCCEEDED"]
    logs = [(workspace.path / f"e{n}.log").read_text() for n in (1, 2)]
    assert codes == [0, 0], logs
    assert "Traceback" not in "".join(logs), logs
    runs = executions(store)
    assert Counter(e.outcome for e in runs) == Counter({"succeeded": 20})
    assert set(count_by_task(events(store, "task.succeeded")).values()) == {1}
    assert max(occupancy_by_events(events(store)).values()) <= 2 * capacity  # slots add up


def _claim_for(
    store: Store, key: str, *, owner: str, heartbeat_at: float, lease_expires_at: float
) -> None:
    """Make ``key`` look RUNNING under an engine on another host."""
    now = time.time()
    execution_id = uuid.uuid4().hex
    with store.write() as session:
        session.add(
            EngineRecord(
                id=owner,
                host="elsewhere.example",
                pid=4_000_000,
                started_at=now - 600,
                heartbeat_at=heartbeat_at,
            )
        )
        task = session.get(Task, key)
        assert task is not None
        task.state, task.attempt, task.started_at = "RUNNING", 1, now - 60
        task.execution_id, task.lease_owner = execution_id, owner
        task.lease_expires_at = lease_expires_at
        session.add(task)
        session.add(
            Execution(
                id=execution_id,
                job_id=task.job_id,
                task_key=key,
                engine_id=owner,
                attempt=1,
                started_at=now - 60,
            )
        )


def test_expired_leases_and_silent_remote_engines_are_recovered(workspace: Workspace) -> None:
    workspace.configure(lease=1.0, heartbeat=0.2)
    names = ("stalled", "silent", "healthy")
    workspace.submit(job_toml("lease", [{"id": n, "sim": sim(0.05)} for n in names]))
    store = workspace.store()
    now = time.time()
    _claim_for(
        store, "lease/stalled", owner="run-stalled", heartbeat_at=now + 60, lease_expires_at=now - 5
    )
    _claim_for(
        store, "lease/silent", owner="run-silent", heartbeat_at=now - 30, lease_expires_at=now + 60
    )
    _claim_for(
        store,
        "lease/healthy",
        owner="run-healthy",
        heartbeat_at=now + 60,
        lease_expires_at=now + 60,
    )
    engine = workspace.engine()
    engine.register()
    try:
        # Two of the claims' engines count as live: the engines take turns at recovery.
        deadline = time.monotonic() + 10
        while not engine.did_chores and time.monotonic() < deadline:
            engine.tick()
            time.sleep(0.05)
        reasons = {e.task_key: e.message for e in events(store, "task.recovered")}
        assert set(reasons) == {"lease/stalled", "lease/silent"}
        assert reasons["lease/stalled"].startswith("lease/stalled: lease expired; queued again")
        assert "run-silent on elsewhere.example silent for" in reasons["lease/silent"]
        healthy = tasks(store)["lease/healthy"]
        assert (healthy.state, healthy.lease_owner) == ("RUNNING", "run-healthy")
    finally:
        engine.shutdown(release=True)

    with store.write() as session:
        owner = session.get(EngineRecord, "run-healthy")
        assert owner is not None
        owner.heartbeat_at = time.time() - 30
        session.add(owner)
    assert run_until_idle(workspace.engine()) is True
    final = tasks(store)
    assert {t.state for t in final.values()} == {"SUCCEEDED"}
    # A lost runner is not the task's fault: attempts refunded, recoveries counted instead.
    assert {k: t.attempt for k, t in final.items()} == {f"lease/{n}": 1 for n in names}
    assert {k: t.recoveries for k, t in final.items()} == {f"lease/{n}": 1 for n in names}
    assert all(e.ended_at is not None for e in executions(store))


def test_a_live_engine_is_not_taken_for_dead_when_the_clock_moves(workspace: Workspace) -> None:
    """Its wall-clock start read again after the clock was set (or the kernel's whole-second
    boot time stepped) differs from the one it registered: its work stays its own."""
    store = workspace.store()
    register_engine(store, "run-live", role="run", now=time.time())
    with store.write() as session:
        record = session.get(EngineRecord, "run-live")
        assert record is not None and record.start_ticks is not None
        record.process_start = (record.process_start or 0) - 1.0000003
        session.add(record)
    with store.read() as session:
        facts = owner_facts(session, ["run-live"], this_host())
    assert facts["run-live"].process_alive is True
    assert owner_is_gone(facts["run-live"], my_host=this_host(), now=time.time(), ttl=90) is None

"""The engine end to end: real sim agent processes, a real database, the engine in a thread."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import (
    Workspace,
    count_by_task,
    events,
    executions,
    job_toml,
    jobs,
    kill_quietly,
    max_overlap,
    occupancy_by_events,
    pid_gone,
    run_until_idle,
    running_engine,
    sim,
    task_state,
    wait_for,
)

from relay_engine.loop.engine import Engine
from relay_engine.ops.commands import CancelTask, RetryTask
from relay_engine.store.schema import Job

WORKSTREAMS = ("api", "ui", "data")


def three_stream_dag(count: int = 30, seed: int = 7) -> list[dict[str, Any]]:
    """A random DAG: most tasks in one of three workstreams, some free, mixed priorities."""
    rng = random.Random(seed)
    defs: list[dict[str, Any]] = []
    for i in range(count):
        task: dict[str, Any] = {
            "id": f"t{i:02d}",
            "priority": rng.choice(["P0", "P1", "P2", "P3"]),
            "sim": sim(duration=rng.choice([0.05, 0.1, 0.15])),
        }
        if i % 5 != 4:
            task["workstream"] = WORKSTREAMS[i % 3]
        if i >= 3:
            task["depends_on"] = sorted({f"t{d:02d}" for d in rng.sample(range(i), k=min(i, 2))})
        defs.append(task)
    return defs


@pytest.mark.slow
def test_dag_runs_to_success_respecting_dependencies_capacity_and_workstreams(
    workspace: Workspace,
) -> None:
    capacity = 3
    workspace.configure(capacity=capacity)
    definitions = three_stream_dag()
    workspace.submit(job_toml("dag", definitions))
    store = workspace.store()

    assert run_until_idle(workspace.engine(), timeout=90) is True

    report = workspace.status()
    assert [j["state"] for j in report["jobs"]] == ["SUCCEEDED"]
    assert len(report["tasks"]) == 30
    assert {t["state"] for t in report["tasks"]} == {"SUCCEEDED"}

    runs = executions(store)
    assert Counter(e.outcome for e in runs) == Counter({"succeeded": 30})
    by_task = {e.task_key: e for e in runs}
    deps = {f"dag/{d['id']}": d.get("depends_on", []) for d in definitions}
    for key, dependencies in deps.items():
        for dep in dependencies:
            assert by_task[key].started_at >= by_task[f"dag/{dep}"].ended_at, (key, dep)
    assert max_overlap((e.started_at, e.ended_at) for e in runs) <= capacity
    streams = {f"dag/{d['id']}": d.get("workstream") for d in definitions}
    for stream in WORKSTREAMS:
        intervals = [(e.started_at, e.ended_at) for e in runs if streams[e.task_key] == stream]
        assert max_overlap(intervals) == 1, stream

    log = events(store)
    position = {(e.kind, e.task_key): i for i, e in enumerate(log)}
    for key, dependencies in deps.items():
        for dep in dependencies:
            assert position[("task.started", key)] > position[("task.succeeded", f"dag/{dep}")]
    assert max(occupancy_by_events(log).values()) <= capacity
    assert all(v == 1 for v in occupancy_by_events(log, streams.get).values() if v)


def test_priority_decides_dispatch_order_at_capacity_one(workspace: Workspace) -> None:
    workspace.configure(capacity=1)
    order = ["P3", "P1", "P0", "P2", "P3", "P0"]
    definitions = [
        {"id": f"{p.lower()}-{i}", "priority": p, "sim": sim(0.05)} for i, p in enumerate(order)
    ]
    workspace.submit(job_toml("prio", definitions))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    started = [e.task_key.split("/")[1] for e in events(store, "task.started")]
    assert started == ["p0-2", "p0-5", "p1-1", "p2-3", "p3-0", "p3-4"]


def test_work_an_exit_queues_goes_ahead_of_the_rows_dispatch_kept(workspace: Workspace) -> None:
    """Dispatch chooses from rows it read a few rounds ago (see ``KEPT_PAGES``), but not
    past work queued since: the dependent an exit released starts next, before the lower
    priority tasks the engine read when it claimed the first."""
    workspace.configure(capacity=1, tick=60.0, lease=150.0)
    later = [{"id": f"c{i:02d}", "priority": "P2", "sim": sim(0.01)} for i in range(20)]
    definitions = [
        {"id": "a", "priority": "P0", "sim": sim(0.01)},
        {"id": "b", "priority": "P0", "depends_on": ["a"], "sim": sim(0.01)},
        *later,
    ]
    workspace.submit(job_toml("kept", definitions))
    store = workspace.store()

    assert run_until_idle(workspace.engine(), timeout=60) is True

    started = [e.task_key.split("/")[1] for e in events(store, "task.started")]
    assert started == ["a", "b", *(d["id"] for d in later)]


def test_a_task_whose_agent_is_busy_keeps_its_place_among_the_rows_dispatch_kept(
    workspace: Workspace,
) -> None:
    """The tester's second task waits while the one tester agent works; when the tester is
    free again it is next, ahead of the implementers' lower priority tasks the engine had
    already read (a task told to wait stays among the kept rows, in its place)."""
    agents = [
        {"id": "tester", "provider": "sim", "roles": ["tester"], "max_concurrent": 1},
        {"id": "coder", "provider": "sim", "roles": ["implementer"], "max_concurrent": 1},
    ]
    workspace.configure(capacity=2, tick=60.0, lease=150.0, agents=agents)
    tests = [{"id": f"t{i}", "role": "tester", "priority": "P0", "sim": sim(0.3)} for i in (1, 2)]
    code = [{"id": f"c{i:02d}", "priority": "P2", "sim": sim(0.05)} for i in range(24)]
    workspace.submit(job_toml("busy", [*tests, *code]))
    store = workspace.store()

    assert run_until_idle(workspace.engine(), timeout=60) is True

    runs = {e.task_key.split("/")[1]: e for e in executions(store)}
    later = [key for key, run in runs.items() if run.started_at >= runs["t1"].ended_at]
    assert runs["t2"].started_at == min(runs[key].started_at for key in later)
    assert runs["t2"].started_at - runs["t1"].ended_at < 1.0  # not at the next full tick


def test_a_run_until_idle_ends_once_its_last_agent_ends_not_a_tick_interval_later(
    workspace: Workspace,
) -> None:
    """`relay run --until-idle` in a script: the job's end is seen as soon as its last agent
    ends, without the minute-long tick interval's wait (twice: settle the job, then see
    that nothing is left). Without that, this run would take two minutes."""
    workspace.configure(capacity=1, tick=60.0, lease=150.0)
    definitions = [
        {"id": "a", "sim": sim(0.05)},
        {"id": "b", "depends_on": ["a"], "sim": sim(0.05)},
    ]
    workspace.submit(job_toml("chain", definitions))

    assert run_until_idle(workspace.engine(), timeout=30) is True

    assert [j["state"] for j in workspace.status()["jobs"]] == ["SUCCEEDED"]


def test_an_engine_whose_work_is_all_done_does_not_read_for_each_chore(
    workspace: Workspace,
) -> None:
    """An engine left running for the next submit: its full ticks find nothing to do
    with one read, not one per chore (a dozen, every tick, all day). Work arriving
    is still seen at the next tick."""
    workspace.configure(heartbeat=60.0, lease=300.0)  # no heartbeat due in the measured tick
    workspace.submit(job_toml("done", [{"id": "a", "sim": sim(0.01)}]))
    assert run_until_idle(workspace.engine()) is True
    store = workspace.store()
    engine = Engine(workspace.path, store=store)
    engine.tick()  # registers, and starts hearing wake-ups
    wait_for(lambda: engine.hears_wake_ups, timeout=10, what="the wake-up watcher")
    engine.tick()  # dozes off: the asleep mark, written once on the change, is not a chore
    before = store.stats.statements
    assert engine.tick() is False
    idle = store.stats.statements - before
    assert engine.did_chores and idle <= 10, idle  # 32 when every chore read for itself

    workspace.submit(job_toml("next", [{"id": "b", "sim": sim(0.01)}]))
    assert engine.tick() is True
    assert task_state(store, "next/b") == "RUNNING"
    engine.shutdown(release=True)


def test_failures_retry_then_fail_and_block_dependents(workspace: Workspace) -> None:
    definitions = [
        {"id": "flaky", "sim": sim(0.05, fail_attempts=1)},
        {"id": "broken", "max_attempts": 2, "sim": sim(0.05, fail_attempts=5)},
        {"id": "exit-one", "max_attempts": 1, "sim": sim(0.05, exit_code=1)},
        {"id": "after-broken", "depends_on": ["broken"], "sim": sim(0.05)},
        {"id": "after-after", "depends_on": ["after-broken", "flaky"], "sim": sim(0.05)},
        {"id": "after-flaky", "depends_on": ["flaky"], "sim": sim(0.05)},
    ]
    workspace.submit(job_toml("fail", definitions, troubleshoot=False))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is False

    report = workspace.status()
    (job,) = report["jobs"]
    assert (job["state"], job["error"]) == ("BLOCKED", None)  # it never fails by itself
    assert job["blocked_by"].startswith("broken failed (and 1 more): exit 1: sim error")
    assert "relay retry fail/broken, relay drop fail/broken, relay replan fail" in job["blocked_by"]
    state = {t["id"]: t for t in report["tasks"]}
    assert (state["flaky"]["state"], state["flaky"]["attempt"]) == ("SUCCEEDED", 2)
    assert state["after-flaky"]["state"] == "SUCCEEDED"
    assert (state["broken"]["state"], state["broken"]["attempt"]) == ("FAILED", 2)
    assert "simulated failure" in state["broken"]["error"]
    assert (state["exit-one"]["state"], state["exit-one"]["attempt"]) == ("FAILED", 1)
    assert state["exit-one"]["error"].startswith("exit 1")
    for blocked in ("after-broken", "after-after"):
        assert (state[blocked]["state"], state[blocked]["blocked_by"]) == ("DRAFT", "broken")

    assert count_by_task(executions(store)) == Counter(
        {"fail/flaky": 2, "fail/broken": 2, "fail/exit-one": 1, "fail/after-flaky": 1}
    )
    assert count_by_task(events(store, "task.retrying")) == Counter(
        {"fail/flaky": 1, "fail/broken": 1}
    )

    # Retrying the blocker unblocks its dependents, each with an event of its own, so a
    # console that reloads only the rows events name shows them unblocked at once.
    from relay_engine.ops import commands

    store.enqueue_command("retry", {"task": "fail/broken"})
    commands.apply_pending(store, "test", now=1.0)
    unblocked = sorted(e.task_key for e in events(store, "task.unblocked"))
    assert unblocked == ["fail/after-after", "fail/after-broken"]
    state = {t["id"]: t for t in workspace.status()["tasks"]}
    assert state["after-broken"]["blocked_by"] is None


def test_cancel_kills_the_whole_process_group_and_retry_runs_it_again(
    workspace: Workspace, tmp_path: Path
) -> None:
    grandchild_file = tmp_path / "grandchild.pid"
    script = sim(duration=1.0, lines=2, spawn_grandchild=True)
    script["grandchild_pid_file"] = str(grandchild_file)
    workspace.submit(job_toml("cx", [{"id": "long", "sim": script}, {"id": "other"}]))
    store = workspace.store()
    engine = workspace.engine()
    key = "cx/long"
    pids: list[int] = []
    try:
        with running_engine(engine):
            wait_for(grandchild_file.exists, what="the grandchild to start")
            wait_for(lambda: task_state(store, key) == "RUNNING", what="long to run")
            pids.append(int(grandchild_file.read_text()))
            agent_pid = next(e.pid for e in executions(store) if e.task_key == key)
            grandchild_file.unlink()

            engine.submit(CancelTask(task=key))

            wait_for(lambda: task_state(store, key) == "CANCELLED", what="the cancel")
            wait_for(lambda: pid_gone(pids[0]) and pid_gone(agent_pid), what="processes to die")

            engine.submit(RetryTask(task=key))
            wait_for(lambda: task_state(store, key) == "SUCCEEDED", timeout=30, what="retry")
            if grandchild_file.exists():
                pids.append(int(grandchild_file.read_text()))
    finally:
        for pid in pids:
            kill_quietly(pid)

    kinds = [e.kind for e in events(store) if e.task_key == key]
    assert kinds.index("task.cancelled") < kinds.index("task.retried") < len(kinds)
    after_retry = kinds[kinds.index("task.retried") :]
    assert after_retry[:3] == ["task.retried", "task.started", "task.succeeded"]
    assert Counter(e.outcome for e in executions(store) if e.task_key == key) == Counter(
        {"cancelled": 1, "succeeded": 1}
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_an_agent_spewing_100mb_of_binary_leaves_engine_memory_bounded(
    sqlite_workspace: Workspace,
) -> None:
    workspace = sqlite_workspace
    script = sim(duration=0.05, output_bytes=100_000_000, binary=True)
    workspace.submit(job_toml("spew", [{"id": "noisy", "sim": script}]))
    engine = workspace.engine()
    me = psutil.Process()
    baseline = me.memory_info().rss
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        ok = run_until_idle(engine, timeout=150)
    finally:
        done.set()
        sampler.join(2)

    assert ok is True
    assert task_state(engine.store, "spew/noisy") == "SUCCEEDED"
    assert jobs(engine.store)["spew"].state == "SUCCEEDED"
    growth_mb = (peak[0] - baseline) / 1e6
    assert growth_mb < 100, f"engine RSS grew by {growth_mb:.0f} MB"
    stdout = Path(next(iter(executions(engine.store))).artifact_dir or "") / "stdout.txt"
    kept = 16 << 20  # [engine] max_artifact_bytes: the start and the end, the middle cut
    assert kept < stdout.stat().st_size < kept + 200
    with open(stdout, "rb") as fh:
        fh.seek(kept // 2)
        marker = fh.read(100)
    assert marker.startswith(b"\n[relay: ") and b" bytes cut here: " in marker


def test_a_job_left_active_by_a_dead_engine_is_settled_by_the_next(workspace: Workspace) -> None:
    workspace.submit(job_toml("orphan-job", [{"id": "only", "sim": sim(0.05)}]))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True
    with store.write() as session:  # as if the engine died between the task and the job
        job = session.get(Job, "orphan-job")
        assert job is not None
        job.state = "ACTIVE"
        session.add(job)

    assert run_until_idle(workspace.engine()) is True
    assert jobs(store)["orphan-job"].state == "SUCCEEDED"


def test_a_claim_starts_its_task_and_where_the_agent_runs_follows_within_a_second(
    workspace: Workspace,
) -> None:
    """The claim writes RUNNING and task.started; the spawn has no write of its own, and
    the pid, command line and folder reach the execution's row with the output the engine
    saves every second, long before the agent exits. The exit then writes the rest."""
    workspace.submit(job_toml("slow", [{"id": "t", "sim": sim(duration=4.0, lines=4)}]))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: task_state(store, "slow/t") == "RUNNING", timeout=20, what="RUNNING")
        (started,) = events(store, "task.started")
        (run,) = executions(store)
        assert run.started_at is not None and run.ended_at is None
        recorded = wait_for(
            lambda: next((r for r in executions(store) if r.pid is not None), None),
            timeout=5,
            what="the spawn on the execution's row",
        )
        assert recorded.ended_at is None  # written while the agent still runs
        assert recorded.argv and recorded.cwd and recorded.pgid == recorded.pid
        assert started.data == {"agent": run.agent, "provider": run.provider, "execution": run.id}
        wait_for(lambda: task_state(store, "slow/t") == "SUCCEEDED", timeout=30, what="done")
    (finished,) = executions(store)
    assert (finished.pid, finished.outcome) == (recorded.pid, "succeeded")

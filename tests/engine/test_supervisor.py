"""No agent outlives its task: whatever an agent starts dies at its exit, cancel, timeout and
with its engine -- even a daemon that left the agent's process group with ``setsid``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers import (
    EngineThread,
    Workspace,
    cli_env,
    executions,
    job_toml,
    pid_gone,
    run_until_idle,
    sim,
    stop_process,
    task_state,
    tasks,
    wait_for,
)

from relay_engine.agents.runner import (
    LaunchSpec,
    kill_execution,
    launch,
    read_record,
    recorded_group,
    tagged_processes,
)

DAEMONS = ["group", "setsid"]


def daemon_script(pid_file: Path, mode: str, duration: float) -> dict[str, object]:
    return sim(duration, spawn_daemon=mode, daemon_pid_file=str(pid_file))


def spec_for(tmp_path: Path, script: dict[str, object], name: str) -> LaunchSpec:
    execution_id = (
        f"{name}-{uuid.uuid4().hex[:12]}"  # unique, as a sweep of one must not hit another
    )
    artifacts = tmp_path / "artifacts" / execution_id
    env = {**os.environ, "RELAY_SIM_SCRIPT": json.dumps(script), "RELAY_TASK": "j/t"}
    return LaunchSpec(
        execution_id=execution_id,
        argv=[sys.executable, "-m", "relay_engine.agents.sim_agent"],
        cwd=tmp_path,
        env=env,
        timeout_s=60,
        artifact_dir=artifacts,
        grace_s=0.5,
    )


def read_pid(path: Path) -> int:
    wait_for(path.exists, timeout=20, what=f"{path.name} to be written")
    return int(path.read_text())


@pytest.mark.parametrize("mode", DAEMONS)
def test_what_an_agent_leaves_running_dies_when_it_exits(tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / "daemon.pid"
    process = launch(spec_for(tmp_path, daemon_script(pid_file, mode, 0.2), "exit-1"))
    daemon = read_pid(pid_file)
    if mode == "setsid":
        assert os.getsid(daemon) != os.getsid(process.agent_pid)  # out of the agent's session
    assert process.wait(20) == 0
    # The supervisor swept the tree before it exited, so this holds the moment we see the exit.
    assert pid_gone(daemon)
    assert tagged_processes(process.execution_id) == []


def test_the_record_is_on_disk_before_the_agent_runs(tmp_path: Path) -> None:
    """The sim writes its pid file as its first act: the record must already exist then."""
    pid_file = tmp_path / "daemon.pid"
    process = launch(spec_for(tmp_path, daemon_script(pid_file, "group", 30), "rec-1"))
    read_pid(pid_file)  # the agent runs
    record = read_record(process.spec.artifact_dir)
    assert record is not None
    assert record["supervisor_pid"] == process.pid
    assert record["pgid"] == process.pgid == recorded_group(record)
    assert record["subreaper"] is True
    assert record["execution_id"] == process.execution_id
    process.kill_now()
    assert process.wait(10) == -signal.SIGKILL


def test_a_killed_supervisor_leaves_nothing_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    process = launch(spec_for(tmp_path, daemon_script(pid_file, "setsid", 60), "sup-1"))
    daemon = read_pid(pid_file)
    os.kill(process.pid, signal.SIGKILL)  # no chance to clean up: the engine must
    assert process.wait(10) == -signal.SIGKILL
    assert pid_gone(process.agent_pid)
    assert pid_gone(daemon)


def test_recovery_kills_a_tree_from_the_record_and_the_tag_alone(tmp_path: Path) -> None:
    """As recovery does for a dead engine's work, with the supervisor unable to help."""
    pid_file = tmp_path / "daemon.pid"
    process = launch(spec_for(tmp_path, daemon_script(pid_file, "setsid", 60), "rec-2"))
    daemon = read_pid(pid_file)
    os.kill(process.pid, signal.SIGSTOP)
    execution_id = process.execution_id
    try:
        assert set(tagged_processes(execution_id)) >= {process.pid, process.agent_pid, daemon}
        pgid = recorded_group(read_record(process.spec.artifact_dir))
        assert pgid == process.pgid
        kill_execution(execution_id, pgid)
        assert process.wait(10) == -signal.SIGKILL
        assert pid_gone(process.agent_pid) and pid_gone(daemon)
        assert tagged_processes(execution_id) == []
    finally:
        kill_execution(execution_id)


def test_an_argument_too_long_for_the_kernel_is_a_clear_launch_error(tmp_path: Path) -> None:
    from relay_engine.agents.runner import LaunchError

    spec = spec_for(tmp_path, sim(0.1), "big-1")
    spec = LaunchSpec(**{**spec.__dict__, "argv": ["echo", "x" * (200 * 1024)]})
    with pytest.raises(LaunchError, match=r"200 KiB.*\{prompt_file\}"):
        launch(spec)


# -- through the engine ------------------------------------------------------------------------
def _job_with_daemon(workspace: Workspace, mode: str, how: str) -> Path:
    pid_file = workspace.path / "daemon.pid"
    duration = 0.3 if how == "exit" else 60
    task: dict[str, object] = {"id": "t", "max_attempts": 1}
    task["sim"] = daemon_script(pid_file, mode, duration)
    if how == "timeout":
        task["timeout"] = 1.5
    workspace.submit(job_toml("d", [task]))
    return pid_file


@pytest.mark.slow
@pytest.mark.parametrize("mode", DAEMONS)
@pytest.mark.parametrize("how", ["exit", "cancel", "timeout"])
def test_an_agents_daemons_die_with_its_task(
    sqlite_workspace: Workspace, mode: str, how: str
) -> None:
    workspace = sqlite_workspace
    pid_file = _job_with_daemon(workspace, mode, how)
    store = workspace.store()
    final = {"exit": "SUCCEEDED", "cancel": "CANCELLED", "timeout": "FAILED"}[how]
    engine = EngineThread(workspace.engine()).start()
    try:
        daemon = read_pid(pid_file)
        if how == "cancel":
            assert workspace.cli("cancel", "d/t").returncode == 0
        wait_for(lambda: task_state(store, "d/t") == final, timeout=30, what=f"task {final}")
        (run,) = [e for e in executions(store) if e.task_key == "d/t"]
        wait_for(lambda: run.pid is not None and pid_gone(run.pid), timeout=15, what="supervisor")
        wait_for(lambda: pid_gone(daemon), timeout=15, what="the daemon to die")
        assert tagged_processes(run.id) == []
    finally:
        engine.stop()
    if how == "timeout":
        assert "timed out" in (tasks(store)["d/t"].error or "")


@pytest.mark.parametrize("mode", DAEMONS)
def test_agents_and_their_daemons_die_with_their_engine(
    sqlite_workspace: Workspace, mode: str
) -> None:
    workspace = sqlite_workspace
    pid_file = _job_with_daemon(workspace, mode, "cancel")
    proc = workspace.popen("run", "--quiet")
    try:
        daemon = read_pid(pid_file)
        proc.send_signal(signal.SIGKILL)  # no other engine runs: nobody recovers anything
        proc.wait(10)
        (run,) = executions(workspace.store())
        wait_for(lambda: pid_gone(daemon), timeout=15, what="the daemon to die with its engine")
        wait_for(lambda: tagged_processes(run.id) == [], timeout=15, what="the whole tree")
    finally:
        stop_process(proc)


def test_an_engine_killed_between_spawn_and_record_leaves_nothing_running(
    workspace: Workspace,
) -> None:
    """The crash point sits after the agents started and before any pid reached the database."""
    workspace.configure(capacity=3, lease=3.0, heartbeat=0.3)
    pid_files = [workspace.path / f"d{i}.pid" for i in range(3)]
    definitions = [
        {"id": f"t{i}", "sim": daemon_script(pid_files[i], DAEMONS[i % 2], 1.0)} for i in range(3)
    ]
    workspace.submit(job_toml("crash", definitions))
    store = workspace.store()
    env = {**cli_env(), "RELAY_CRASH_AT": "spawned:kill:1"}
    crashed = subprocess.run(
        workspace.cli_argv("run", "--quiet"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert "crash point spawned" in crashed.stderr
    runs = executions(store)
    assert runs and all(r.pid is None and r.started_at is None for r in runs)  # never recorded
    deadline = time.monotonic() + 15
    for run in runs:
        wait_for(
            lambda run=run: tagged_processes(run.id) == [],
            timeout=max(deadline - time.monotonic(), 0.1),
            what=f"execution {run.id[:8]} to die with its engine",
        )
    # Each supervisor wrote its record first thing, before it could start an agent.
    assert all(read_record(Path(r.artifact_dir or "")) is not None for r in runs)

    assert run_until_idle(workspace.engine(), timeout=90) is True
    final = tasks(store)
    assert {t.state for t in final.values()} == {"SUCCEEDED"}
    assert {t.attempt for t in final.values()} == {1}  # the crash was not the tasks' fault
    assert sum(t.recoveries for t in final.values()) == len(runs)
    succeeded = [r.task_key for r in executions(store) if r.outcome == "succeeded"]
    assert sorted(succeeded) == sorted(final)

"""No agent outlives its task: whatever an agent starts dies at its exit, cancel, timeout and
with its engine -- even a daemon that left the agent's process group with ``setsid``.

Every scenario runs twice: bare, and with the agent in its bubblewrap sandbox (the supervisor
outside it). A sandboxed agent has a pid namespace of its own, so the pids it writes are
mapped to the host's (:func:`helpers.host_pid`) through the execution's tag.

Each runs under the native supervisor (``supervisor.c``, the default), and the guarantees
that matter most run again, bare, under the Python one (``implementation``: the fallback
where no C compiler is at hand, forked by the fork server).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    EngineThread,
    Workspace,
    cli_env,
    executions,
    host_pid,
    job_toml,
    pid_gone,
    requires_sandbox,
    run_until_idle,
    sim,
    stop_process,
    task_state,
    tasks,
    wait_for,
)

from relay_engine.agents import native
from relay_engine.agents.runner import (
    LaunchSpec,
    RunningProcess,
    kill_execution,
    launch,
    read_record,
    recorded_group,
    tagged_processes,
)
from relay_engine.agents.sandbox import RELAY_RUNTIME, host_sandbox
from relay_engine.contracts.config import KNOWN_ROLES
from relay_engine.core.sandbox import SandboxSpec, bwrap_argv

DAEMONS = ["group", "setsid"]
SANDBOXES = ["bare", pytest.param("bwrap", marks=requires_sandbox)]
BOXES = ["bare", "bwrap"]  # the sandboxes, for cases()
SIM_ARGV = [sys.executable, "-m", "relay_engine.agents.sim_agent"]


def cases(names: str, native_cases: list[Any], python_cases: list[Any]) -> pytest.MarkDecorator:
    """Parametrize ``implementation`` with ``names``: every case under the native supervisor,
    ``python_cases`` under the Python one too (fewer: it is the fallback, and the suite's
    time is dear). A case in the sandbox needs one here."""
    rows = [
        pytest.param(which, *case, marks=[requires_sandbox] if "bwrap" in case else [])
        for which, group in (("native", native_cases), ("python", python_cases))
        for case in group
    ]
    return pytest.mark.parametrize(f"implementation,{names}", rows, indirect=["implementation"])


@pytest.fixture
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The supervisor this test's agents run under, chosen as an operator would (engines
    started by the test inherit it): native (built and cached once per host), or python."""
    which = getattr(request, "param", "native")
    monkeypatch.setenv(native.MODE_ENV, "native" if which == "native" else "fork")
    built = native.native_supervisor() if which == "native" else None
    if built is not None and built.reason.startswith("no C compiler"):
        pytest.skip(built.reason)  # a build that fails, though, is this test's failure
    assert built is None or built.binary is not None, f"no native supervisor: {built.reason}"
    return which


def assert_supervised_by(pid: int, implementation: str) -> None:
    """The process recorded as the supervisor runs the implementation the test asked for."""
    program = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    assert program.startswith("supervisor-" if implementation == "native" else "python"), program


def check_launched(process: RunningProcess, implementation: str) -> None:
    assert process.own_child == (implementation == "native")  # a forked one is the server's
    assert_supervised_by(process.pid, implementation)


def daemon_script(pid_file: Path, mode: str, duration: float) -> dict[str, object]:
    return sim(duration, spawn_daemon=mode, daemon_pid_file=str(pid_file))


def spec_for(
    tmp_path: Path, script: dict[str, object], name: str, sandbox: str = "bare"
) -> LaunchSpec:
    """A sim launch; in the sandbox it may write tmp_path only (where its pid files go)."""
    execution_id = (
        f"{name}-{uuid.uuid4().hex[:12]}"  # unique, as a sweep of one must not hit another
    )
    artifacts = tmp_path / "artifacts" / execution_id
    env = {**os.environ, "RELAY_SIM_SCRIPT": json.dumps(script), "RELAY_TASK": "j/t"}
    wrapper = sandbox_argv(tmp_path) if sandbox == "bwrap" else []
    return LaunchSpec(
        execution_id=execution_id,
        argv=[*wrapper, *SIM_ARGV],
        cwd=tmp_path,
        env=env,
        timeout_s=60,
        artifact_dir=artifacts,
        grace_s=0.5,
        sandbox_argc=len(wrapper),
    )


def sandbox_argv(folder: Path) -> list[str]:
    bwrap = host_sandbox().bwrap or "bwrap"
    spec = SandboxSpec(
        cwd=str(folder), writable=(str(folder),), visible=tuple(RELAY_RUNTIME), network=False
    )  # the sim agents are relay's Python running relay's code, wherever they live
    return bwrap_argv(bwrap, spec)


def read_pid(path: Path) -> int:
    wait_for(path.exists, timeout=20, what=f"{path.name} to be written")
    return int(path.read_text())


def read_daemon(path: Path, execution_id: str, sandbox: str) -> int:
    """The daemon's pid on this host (a sandboxed sim writes the one its namespace gave it).
    0 when it is gone already: no process of the execution calls itself that any more."""
    pid = read_pid(path)
    return pid if sandbox == "bare" else host_pid(pid, execution_id) or 0


def gone(pid: int) -> bool:
    return pid == 0 or pid_gone(pid)


@cases("mode,sandbox", [(m, s) for m in DAEMONS for s in BOXES], [("setsid", "bare")])
def test_what_an_agent_leaves_running_dies_when_it_exits(
    tmp_path: Path, implementation: str, mode: str, sandbox: str
) -> None:
    pid_file = tmp_path / "daemon.pid"
    spec = spec_for(tmp_path, daemon_script(pid_file, mode, 0.5), "exit-1", sandbox)
    process = launch(spec)
    check_launched(process, implementation)
    daemon = read_daemon(pid_file, process.execution_id, sandbox)
    if mode == "setsid" and daemon:
        assert os.getsid(daemon) != os.getsid(process.agent_pid)  # out of the agent's session
    assert process.wait(20) == 0
    # The supervisor swept the tree before it exited, so this holds the moment we see the exit.
    assert gone(daemon)
    assert tagged_processes(process.execution_id) == []


@cases("sandbox", [(s,) for s in BOXES], [("bare",)])
def test_the_record_is_on_disk_before_the_agent_runs(
    tmp_path: Path, implementation: str, sandbox: str
) -> None:
    """The sim writes its pid file as its first act: the record must already exist then."""
    pid_file = tmp_path / "daemon.pid"
    process = launch(spec_for(tmp_path, daemon_script(pid_file, "group", 30), "rec-1", sandbox))
    check_launched(process, implementation)
    read_pid(pid_file)  # the agent runs
    record = read_record(process.spec.artifact_dir)
    assert record is not None
    assert record["supervisor_pid"] == process.pid
    assert record["pgid"] == process.pgid == recorded_group(record)
    assert record["subreaper"] is True
    assert record["execution_id"] == process.execution_id
    process.kill_now()
    assert process.wait(10) == -signal.SIGKILL


@cases("sandbox", [(s,) for s in BOXES], [("bare",)])
def test_a_killed_supervisor_leaves_nothing_behind(
    tmp_path: Path, implementation: str, sandbox: str
) -> None:
    pid_file = tmp_path / "daemon.pid"
    spec = spec_for(tmp_path, daemon_script(pid_file, "setsid", 60), "sup-1", sandbox)
    process = launch(spec)
    check_launched(process, implementation)
    daemon = read_daemon(pid_file, process.execution_id, sandbox)
    assert daemon
    os.kill(process.pid, signal.SIGKILL)  # no chance to clean up: the engine must
    assert process.wait(10) == -signal.SIGKILL
    # In a sandbox the kill goes down a chain (the supervisor's death signal to bwrap, bwrap's
    # end to its pid namespace), which may still be under way when the supervisor is reaped.
    wait_for(lambda: pid_gone(process.agent_pid), timeout=10, what="the agent to die")
    wait_for(lambda: pid_gone(daemon), timeout=10, what="the daemon to die")


@cases("sandbox", [(s,) for s in BOXES], [("bare",)])
def test_recovery_kills_a_tree_from_the_record_and_the_tag_alone(
    tmp_path: Path, implementation: str, sandbox: str
) -> None:
    """As recovery does for a dead engine's work, with the supervisor unable to help."""
    pid_file = tmp_path / "daemon.pid"
    spec = spec_for(tmp_path, daemon_script(pid_file, "setsid", 60), "rec-2", sandbox)
    process = launch(spec)
    check_launched(process, implementation)
    daemon = read_daemon(pid_file, process.execution_id, sandbox)
    assert daemon
    os.kill(process.pid, signal.SIGSTOP)
    execution_id = process.execution_id
    try:
        assert set(tagged_processes(execution_id)) >= {process.pid, process.agent_pid, daemon}
        pgid = recorded_group(read_record(process.spec.artifact_dir))
        assert pgid == process.pgid
        kill_execution(execution_id, pgid)
        assert process.wait(10) == -signal.SIGKILL
        # SIGKILL reaches the group's processes one by one: the agent may still be on its
        # way out when the supervisor is reaped. One that escaped sleeps on for 60 s.
        wait_for(lambda: pid_gone(process.agent_pid), timeout=10, what="the agent to die")
        wait_for(lambda: pid_gone(daemon), timeout=10, what="the daemon to die")
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
def pid_folder(workspace: Workspace, sandbox: str) -> Path:
    """Where the sims write their pid files: the workspace, or (sandboxed, where the workspace
    is read-only) a folder the agent is given with ``sandbox_paths``."""
    if sandbox == "bare":
        return workspace.path
    folder = workspace.path.parent / "pids"
    folder.mkdir(exist_ok=True)
    workspace.configure(agents=[_sandboxed_sim(folder)])
    return folder


def _sandboxed_sim(folder: Path) -> dict[str, object]:
    return {
        "id": "sim",
        "provider": "sim",
        "roles": list(KNOWN_ROLES),
        "sandbox": "bwrap",
        "sandbox_paths": [f"{folder}:rw"],
    }


def _job_with_daemon(workspace: Workspace, mode: str, how: str, sandbox: str) -> Path:
    pid_file = pid_folder(workspace, sandbox) / "daemon.pid"
    duration = 0.5 if how == "exit" else 60
    task: dict[str, object] = {"id": "t", "max_attempts": 1}
    task["sim"] = daemon_script(pid_file, mode, duration)
    if how == "timeout":
        task["timeout"] = 4  # past the daemon's start: a loaded CI box took over 1.5 s to it
    workspace.submit(job_toml("d", [task]))
    return pid_file


def supervisor_of(workspace: Workspace, execution_id: str) -> int:
    """The supervisor's pid, from its record (the engine may not have stored it yet)."""
    (run,) = [r for r in executions(workspace.store()) if r.id == execution_id]
    record = read_record(Path(run.artifact_dir or ""))
    assert record is not None
    return int(record["supervisor_pid"])


def engine_daemon(workspace: Workspace, pid_file: Path, sandbox: str) -> tuple[int, str]:
    """The daemon's host pid (0 once gone) and the execution it belongs to."""
    wait_for(pid_file.exists, timeout=20, what=f"{pid_file.name} to be written")
    (run,) = executions(workspace.store())
    return read_daemon(pid_file, run.id, sandbox), run.id


@pytest.mark.slow
@cases(
    "how,mode,sandbox",
    [(h, m, s) for h in ("exit", "cancel", "timeout") for m in DAEMONS for s in BOXES],
    [("cancel", "setsid", "bare")],
)
def test_an_agents_daemons_die_with_its_task(
    sqlite_workspace: Workspace, implementation: str, mode: str, how: str, sandbox: str
) -> None:
    workspace = sqlite_workspace
    pid_file = _job_with_daemon(workspace, mode, how, sandbox)
    store = workspace.store()
    final = {"exit": "SUCCEEDED", "cancel": "CANCELLED", "timeout": "FAILED"}[how]
    engine = EngineThread(workspace.engine()).start()
    try:
        daemon, execution_id = engine_daemon(workspace, pid_file, sandbox)
        if how != "exit":
            assert_supervised_by(supervisor_of(workspace, execution_id), implementation)
        if how == "cancel":
            assert workspace.cli("cancel", "d/t").returncode == 0
        wait_for(lambda: task_state(store, "d/t") == final, timeout=30, what=f"task {final}")
        (run,) = [e for e in executions(store) if e.task_key == "d/t"]
        assert run.id == execution_id
        wait_for(lambda: run.pid is not None and pid_gone(run.pid), timeout=15, what="supervisor")
        wait_for(lambda: gone(daemon), timeout=15, what="the daemon to die")
        assert tagged_processes(run.id) == []
    finally:
        engine.stop()
    if how == "timeout":
        assert "timed out" in (tasks(store)["d/t"].error or "")
    if sandbox == "bwrap":
        assert (run.argv or [""])[0].endswith("bwrap")


@cases("mode,sandbox", [(m, s) for m in DAEMONS for s in BOXES], [("setsid", "bare")])
def test_agents_and_their_daemons_die_with_their_engine(
    sqlite_workspace: Workspace, implementation: str, mode: str, sandbox: str
) -> None:
    workspace = sqlite_workspace
    pid_file = _job_with_daemon(workspace, mode, "cancel", sandbox)
    proc = workspace.popen("run", "--quiet")
    try:
        daemon, execution_id = engine_daemon(workspace, pid_file, sandbox)
        assert daemon
        assert_supervised_by(supervisor_of(workspace, execution_id), implementation)
        proc.send_signal(signal.SIGKILL)  # no other engine runs: nobody recovers anything
        proc.wait(10)
        wait_for(lambda: pid_gone(daemon), timeout=15, what="the daemon to die with its engine")
        wait_for(lambda: tagged_processes(execution_id) == [], timeout=15, what="the whole tree")
    finally:
        stop_process(proc)


@requires_sandbox
@pytest.mark.parametrize("implementation", ["native", "python"], indirect=True)
def test_a_stopped_sandboxed_agent_gets_its_grace(tmp_path: Path, implementation: str) -> None:
    """bwrap dies of a TERM without passing it on, and takes the agent with it at once; the
    supervisor's TERM therefore goes past bwrap to the agent, which may clean up and exit."""
    script = "trap 'echo cleaned > graceful; exit 3' TERM; echo up > started; sleep 60 & wait"
    spec = spec_for(tmp_path, sim(0.1), "grace-1", "bwrap")
    spec = LaunchSpec(
        **{**spec.__dict__, "argv": [*sandbox_argv(tmp_path), "sh", "-c", script], "grace_s": 5}
    )
    process = launch(spec)
    check_launched(process, implementation)
    wait_for((tmp_path / "started").exists, timeout=20, what="the agent to start")
    process.terminate(grace_s=5)
    assert process.wait(20) == 3  # the agent's own exit, through bwrap
    assert (tmp_path / "graceful").read_text() == "cleaned\n"
    assert tagged_processes(process.execution_id) == []


@pytest.mark.usefixtures("implementation")  # native: the Python one's engine death runs above
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_engine_killed_between_spawn_and_record_leaves_nothing_running(
    workspace: Workspace, sandbox: str
) -> None:
    """The crash point sits after the agents started and before any pid reached the database."""
    folder = pid_folder(workspace, sandbox)
    agents = None if sandbox == "bare" else [_sandboxed_sim(folder)]
    workspace.configure(capacity=3, lease=3.0, heartbeat=0.3, agents=agents)
    pid_files = [folder / f"d{i}.pid" for i in range(3)]
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
    assert runs and all(r.pid is None for r in runs)  # claimed (so started), never recorded
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

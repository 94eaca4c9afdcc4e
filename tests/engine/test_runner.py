from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from relay_engine.agents.runner import (
    FORKSERVER,
    LaunchError,
    LaunchSpec,
    kill_process_group,
    last_line_of,
    launch,
    process_alive,
    process_start_time,
    same_process,
    write_artifact_json,
    write_artifact_text,
)
from relay_engine.agents.supervisor import proc_start_ticks


def sim_spec(
    tmp_path: Path,
    script: dict[str, object],
    *,
    execution_id: str | None = None,
    attempt: int = 1,
    timeout_s: float = 60.0,
    extra_argv: list[str] | None = None,
    stdin_text: str | None = None,
) -> LaunchSpec:
    # Unique like real ones: a sweep for one execution's processes must not hit another test's.
    execution_id = execution_id or uuid.uuid4().hex
    artifact_dir = tmp_path / ".relay" / "artifacts" / execution_id
    env = dict(os.environ)
    env.update(
        RELAY_SIM_SCRIPT=json.dumps(script),
        RELAY_ATTEMPT=str(attempt),
        RELAY_TASK="JOB/T1",
        RELAY_RESULT_FILE=str(artifact_dir / "result.json"),
    )
    return LaunchSpec(
        execution_id=execution_id,
        argv=[sys.executable, "-m", "relay_engine.agents.sim_agent", *(extra_argv or [])],
        cwd=tmp_path,
        env=env,
        timeout_s=timeout_s,
        artifact_dir=artifact_dir,
        stdin_text=stdin_text,
    )


def gone(pid: int) -> bool:
    """A reparented zombie nobody reaps yet counts as gone: it no longer runs."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_successful_run_writes_output_result_and_calls_on_exit(tmp_path: Path) -> None:
    exited: list[str] = []
    done = threading.Event()

    def on_exit(execution_id: str) -> None:
        exited.append(execution_id)
        done.set()

    proc = launch(sim_spec(tmp_path, {"duration": 0.6, "lines": 3}), on_exit=on_exit)
    assert proc.pgid == proc.pid
    assert proc.poll() is None
    assert wait_until(lambda: b"step 1/3" in proc.stdout_path.read_bytes())
    first = proc.read_new_stdout()
    assert b"step 1/3" in first
    assert proc.wait(timeout=10) == 0
    assert done.wait(5)
    assert exited == [proc.execution_id]
    rest = proc.read_new_stdout()
    assert first + rest == proc.stdout_path.read_bytes()
    assert b"step 1/3" not in rest
    assert b"step 3/3" in rest
    assert proc.read_new_stdout() == b""
    assert proc.last_line() == "sim finished JOB/T1"
    assert json.loads(proc.result_path.read_text()) == {"summary": "sim finished JOB/T1"}
    assert proc.stderr_tail() == ""
    assert proc.poll() == 0


def test_read_new_stdout_respects_max_bytes(tmp_path: Path) -> None:
    proc = launch(sim_spec(tmp_path, {"duration": 0, "lines": 4}))
    assert proc.wait(10) == 0
    chunks = []
    while chunk := proc.read_new_stdout(max_bytes=7):
        assert len(chunk) <= 7
        chunks.append(chunk)
    assert b"".join(chunks) == proc.stdout_path.read_bytes()


def test_fail_attempts_fails_first_attempt_then_succeeds(tmp_path: Path) -> None:
    script = {"duration": 0, "lines": 1, "fail_attempts": 1}
    first = launch(sim_spec(tmp_path, script, execution_id="a1", attempt=1))
    assert first.wait(10) == 1
    assert "attempt 1" in first.stderr_tail()
    assert not first.result_path.exists()
    second = launch(sim_spec(tmp_path, script, execution_id="a2", attempt=2))
    assert second.wait(10) == 0
    assert second.result_path.exists()


def test_big_stdin_prompt_is_delivered_without_deadlock(tmp_path: Path) -> None:
    prompt = "x" * 400_000  # far bigger than a pipe buffer
    spec = sim_spec(
        tmp_path, {"duration": 0, "lines": 1}, extra_argv=["--format", "claude"], stdin_text=prompt
    )
    proc = launch(spec)
    assert proc.wait(10) == 0
    final = json.loads(proc.stdout_path.read_text().splitlines()[-1])
    assert final["usage"]["input_tokens"] >= len(prompt) // 4


def read_grandchild_pid(path: Path) -> int:
    assert wait_until(path.exists)
    return int(path.read_text())


def test_terminate_kills_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "gc.pid"
    script = {
        "duration": 60,
        "lines": 2,
        "spawn_grandchild": True,
        "grandchild_pid_file": str(pid_file),
    }
    proc = launch(sim_spec(tmp_path, script))
    grandchild = read_grandchild_pid(pid_file)
    assert not gone(grandchild)
    assert os.getpgid(grandchild) == proc.pgid
    proc.terminate(grace_s=5.0)
    proc.terminate(grace_s=5.0)  # idempotent
    assert proc.wait(10) == -signal.SIGTERM
    assert wait_until(lambda: gone(grandchild))


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path) -> None:
    pid_file = tmp_path / "gc.pid"
    script = {
        "duration": 60,
        "lines": 2,
        "ignore_sigterm": True,
        "spawn_grandchild": True,
        "grandchild_pid_file": str(pid_file),
    }
    proc = launch(sim_spec(tmp_path, script))
    grandchild = read_grandchild_pid(pid_file)
    proc.terminate(grace_s=0.5)
    assert proc.poll() is None  # terminate returned without waiting out the grace period
    assert proc.wait(10) == -signal.SIGKILL
    assert wait_until(lambda: gone(grandchild))


def test_kill_now_and_terminate_after_exit_are_safe(tmp_path: Path) -> None:
    proc = launch(sim_spec(tmp_path, {"duration": 60, "lines": 1}))
    proc.kill_now()
    assert proc.wait(10) == -signal.SIGKILL
    proc.terminate(grace_s=0.1)
    proc.kill_now()
    time.sleep(0.2)
    assert proc.poll() == -signal.SIGKILL


def test_huge_binary_output_never_enters_engine_memory(tmp_path: Path) -> None:
    me = psutil.Process()
    rss_before = me.memory_info().rss
    peak = rss_before
    size = 100 * 1024 * 1024
    script = {"duration": 0, "lines": 1, "output_bytes": size, "binary": True}
    proc = launch(sim_spec(tmp_path, script))
    seen = 0
    while True:
        chunk = proc.read_new_stdout(max_bytes=1 << 20)
        assert len(chunk) <= 1 << 20
        seen += len(chunk)
        assert len(proc.last_line()) <= 200
        peak = max(peak, me.memory_info().rss)
        if not chunk and proc.poll() is not None:
            chunk = proc.read_new_stdout(max_bytes=1 << 20)
            if not chunk:
                break
            seen += len(chunk)
    assert proc.wait(30) == 0
    assert seen >= size
    assert proc.stdout_path.stat().st_size >= size
    assert proc.last_line() == "sim finished JOB/T1"
    assert peak - rss_before < 50 * 1024 * 1024


def test_timed_out_after_timeout(tmp_path: Path) -> None:
    proc = launch(sim_spec(tmp_path, {"duration": 60, "lines": 1}, timeout_s=0.3))
    assert not proc.timed_out(proc.started_at + 0.1)
    assert wait_until(lambda: proc.timed_out(time.time()))
    assert proc.poll() is None
    proc.kill_now()
    assert proc.wait(10) is not None


def test_missing_executable_raises_launch_error_naming_it(tmp_path: Path) -> None:
    spec = LaunchSpec(
        execution_id="x",
        argv=["relay-no-such-agent-cli", "-p", "hi"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout_s=10,
        artifact_dir=tmp_path / "art",
    )
    with pytest.raises(LaunchError, match="relay-no-such-agent-cli"):
        launch(spec)


def test_non_executable_file_raises_launch_error(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    spec = LaunchSpec("x", [str(script)], tmp_path, dict(os.environ), 10, tmp_path / "art")
    with pytest.raises(LaunchError, match=r"agent\.sh"):
        launch(spec)


def test_process_alive_checks_start_time(tmp_path: Path) -> None:
    me = os.getpid()
    started = process_start_time(me)
    assert started is not None
    assert process_alive(me, started)
    assert process_alive(me, None)
    assert not process_alive(me, started - 3600)
    proc = launch(sim_spec(tmp_path, {"duration": 0, "lines": 0}))
    assert proc.wait(10) == 0
    assert not process_alive(proc.pid, None)
    assert process_start_time(proc.pid) is None


def test_a_process_is_known_by_its_start_in_ticks_whatever_the_clock_says() -> None:
    """The kernel gives the boot time as whole seconds of the clock now: while the clock is
    slewed across a second, a live process's wall-clock start reads a second later."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ticks = proc_start_ticks(child.pid)
        started = process_start_time(child.pid)
        assert ticks is not None and started is not None
        assert same_process(child.pid, ticks, started + 3600)  # the clock moved an hour
        assert not same_process(child.pid, ticks - 1, started)  # another process, same pid
        assert same_process(child.pid, None, started + 1.0000003)  # a record without ticks
        child.kill()
        time.sleep(0.2)  # not reaped yet: a zombie
        assert not same_process(child.pid, ticks, started)
    finally:
        child.kill()
        child.wait()
    assert not same_process(child.pid, ticks, started)


def test_kill_process_group_of_orphan_and_of_missing_group(tmp_path: Path) -> None:
    proc = launch(sim_spec(tmp_path, {"duration": 60, "lines": 1}))
    kill_process_group(proc.pgid)
    assert proc.wait(10) == -signal.SIGKILL
    kill_process_group(proc.pgid)  # already gone: no error
    kill_process_group(os.getpgrp())  # never signals the engine itself


def test_last_line_skips_blank_and_control_characters(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(b"first\n\x1b[32mgreen \xff\x00done\x1b[0m\r\n\n   \n")
    assert last_line_of(path) == "green \ufffddone"
    path.write_bytes(b"a" * 20_000 + b"\n" + b"b" * 500)
    assert last_line_of(path, max_chars=10) == "b" * 10
    assert last_line_of(tmp_path / "missing.txt") == ""


def test_artifact_writers_replace_atomically(tmp_path: Path) -> None:
    target = write_artifact_text(tmp_path / "a", "note.txt", "one")
    write_artifact_text(tmp_path / "a", "note.txt", "two")
    assert target.read_text() == "two"
    write_artifact_json(tmp_path / "a", "r.json", {"summary": "ok", "n": [1, 2]})
    assert json.loads((tmp_path / "a" / "r.json").read_text()) == {"summary": "ok", "n": [1, 2]}
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["note.txt", "r.json"]
    (tmp_path / "a" / "taken").mkdir()  # a write that cannot land leaves nothing staged
    with pytest.raises(IsADirectoryError):
        write_artifact_text(tmp_path / "a", "taken", "three")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["note.txt", "r.json", "taken"]


def test_the_fork_server_exits_quietly_when_its_engine_dies_before_the_answer(
    tmp_path: Path,
) -> None:
    """An engine killed between asking for a supervisor and reading the pid: the server's
    answer meets a closed socket, which is its engine gone (as end-of-file is), not a
    traceback in the engine's log."""
    ours, theirs = socket.socketpair()
    control, control_theirs = socket.socketpair()
    server = subprocess.Popen(
        [sys.executable, "-I", "-S", FORKSERVER, "--socket", str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    theirs.close()
    request = {"argv": ["true"], "env": {}, "cwd": str(tmp_path), "options": {}}
    body = json.dumps(request).encode()
    null = os.open(os.devnull, os.O_RDWR)
    rights = array.array("i", [null, null, null, control_theirs.fileno()])
    ours.sendmsg(
        [len(body).to_bytes(8, "big") + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)]
    )
    ours.close()  # the engine dies: the answer has nowhere to go
    os.close(null)
    control_theirs.close()
    control.close()
    _, stderr = server.communicate(timeout=30)
    assert b"Traceback" not in stderr, stderr.decode()
    assert server.returncode == 0


SIDE_BY_SIDE = """
import os, shutil, sys, threading
from pathlib import Path
from relay_engine.agents.runner import LaunchSpec, launch

def devnulls():
    return sum(os.path.realpath(f"/proc/self/fd/{fd}") == os.devnull
               for fd in os.listdir("/proc/self/fd"))

root, before = Path(sys.argv[1]), devnulls()
gate = threading.Barrier(8)
def start(i):
    spec = LaunchSpec(execution_id=f"side{i}", argv=[shutil.which("true")], cwd=root,
                      env=dict(os.environ), timeout_s=30, artifact_dir=root / f"side{i}")
    spec.artifact_dir.mkdir()
    gate.wait()
    launch(spec).wait(timeout=20)
threads = [threading.Thread(target=start, args=(i,)) for i in range(8)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print(devnulls() - before)
"""


def test_agents_started_side_by_side_share_one_dev_null(tmp_path: Path) -> None:
    """The engine's spawn threads start agents at once: every one of them reads the
    process's one /dev/null, and no start leaves another open behind it."""
    script = subprocess.run(
        [sys.executable, "-c", SIDE_BY_SIDE, str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert script.stdout.strip() == "1"

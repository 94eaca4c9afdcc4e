"""A stalled engine never runs a task twice.

An engine paused (SIGSTOP) or cut off from its database while its agent runs cannot renew
the lease. Its agent's supervisor holds a deadline, two heartbeats short of the lease, that
only a committed renewal moves on: it stops the agent before the lease expires, so when
another engine takes the task over, the first run is gone. These tests run two real
``relay run`` engines on one PostgreSQL database; the sim agents log their own start and
end, and the runs must not overlap. The supervisor's deadline is also checked on its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from helpers import Workspace, engine_records, events, executions, job_toml, sim, tasks, wait_for
from sqlalchemy.engine import make_url

from relay_engine.agents.runner import LaunchSpec, launch, read_record
from relay_engine.contracts.config import EngineConfig
from relay_engine.core.outcomes import FENCED_ERROR

pytestmark = pytest.mark.timeout(180)

LEASE_S, HEARTBEAT_S = 3.0, 0.3  # the deadline: 2.4 s after the last renewal
RUN_S = 6.0  # each run, were it left alone: longer than the lease
HOST_B = {"RELAY_HOST": "b"}  # engines of other hosts: recovery cannot kill A's run by pid


@dataclass(frozen=True)
class Run:
    execution_id: str
    pid: int
    start: float
    end: float | None


def read_runs(path: Path) -> list[Run]:
    """The sim agents' own log: one start and (once over) one end line per run."""
    starts: dict[str, tuple[int, float]] = {}
    ends: dict[str, float] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        what, execution_id, pid, at = line.split()
        if what == "start":
            starts[execution_id] = (int(pid), float(at))
        else:
            ends[execution_id] = float(at)
    runs = [Run(e, pid, at, ends.get(e)) for e, (pid, at) in starts.items()]
    return sorted(runs, key=lambda run: run.start)


def assert_one_after_the_other(runs: list[Run]) -> None:
    assert len(runs) >= 2, runs
    for first, second in itertools.pairwise(runs):
        assert first.end is not None, f"run {first.execution_id[:8]} never ended"
        assert first.end <= second.start, (
            f"runs overlapped by {first.end - second.start:.2f}s: {runs}"
        )


def owner_pid(workspace: Workspace, key: str) -> int | None:
    """The pid of the engine holding ``key``'s lease, from the engines registry."""
    task = tasks(workspace.store()).get(key)
    if task is None or task.state != "RUNNING" or not task.lease_owner:
        return None
    pids = {record.id: record.pid for record in engine_records(workspace.store())}
    return pids.get(task.lease_owner)


def submit_long_task(workspace: Workspace, log: Path) -> None:
    script = sim(RUN_S, lines=6, run_log=str(log))
    workspace.submit(job_toml("stall", [{"id": "t", "sim": script, "max_attempts": 1}]))


def finish_and_check(workspace: Workspace, log: Path, first_engine_id: str) -> None:
    """The task succeeded once, the stalled engine's run was fenced and lost (not charged),
    and the agents' own log shows the runs one after the other."""
    store = workspace.store()
    wait_for(
        lambda: tasks(store)["stall/t"].state == "SUCCEEDED",
        timeout=60,
        interval=0.2,
        what="the task to succeed on the other engine",
    )
    wait_for(
        lambda: all(e.ended_at for e in executions(store)),
        timeout=30,
        what="the stalled engine to write its run down",
    )
    assert_one_after_the_other(read_runs(log))
    runs = {r.id: r for r in executions(store)}
    stalled = [r for r in runs.values() if r.engine_id == first_engine_id]
    assert [r.outcome for r in stalled] == ["lost"], stalled
    assert sorted(r.outcome or "" for r in runs.values()) == ["lost", "succeeded"]
    record = read_record(Path(stalled[0].artifact_dir or ""))
    assert record is not None and record.get("stopped") == "deadline", record
    assert tasks(store)["stall/t"].attempt == 1  # a fenced run is not the task's failure


def start_first(workspace: Workspace, log: Path, db: str | None = None) -> subprocess.Popen[bytes]:
    """Engine A alone, until its agent runs (on ``db``, another way to the same database)."""
    through = Workspace(workspace.path, db) if db else workspace
    first = through.popen("run", "--quiet", log_name="engine-a.log", env={"RELAY_HOST": "a"})
    wait_for(lambda: read_runs(log), timeout=30, what="engine A's agent to start")
    wait_for(lambda: owner_pid(workspace, "stall/t"), timeout=30, what="the task to run")
    return first


def stop_all(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def pg_workspace(tmp_path: Path, pg_url: str) -> Workspace:
    ws = Workspace(tmp_path / "ws", pg_url)
    ws.path.mkdir()
    ws.configure(capacity=2, lease=LEASE_S, heartbeat=HEARTBEAT_S, tick=0.1, grace=0.5)
    return ws


@pytest.mark.postgres
def test_a_paused_engines_agent_stops_before_another_engine_runs_its_task(
    pg_workspace: Workspace, tmp_path: Path
) -> None:
    workspace, log = pg_workspace, tmp_path / "runs.log"
    submit_long_task(workspace, log)
    first = start_first(workspace, log)
    second: subprocess.Popen[bytes] | None = None
    try:
        assert owner_pid(workspace, "stall/t") == first.pid
        first_id = tasks(workspace.store())["stall/t"].lease_owner or ""
        first.send_signal(signal.SIGSTOP)  # for three leases, while its agent runs
        second = workspace.popen("run", "--quiet", log_name="engine-b.log", env=HOST_B)
        time.sleep(3 * LEASE_S)
        first.send_signal(signal.SIGCONT)
        finish_and_check(workspace, log, first_id)
    finally:
        stop_all(first, *([second] if second else []))
    logs = "".join(p.read_text() for p in workspace.path.glob("engine-*.log"))
    assert "Traceback" not in logs, logs[-3000:]


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of the database that the test can cut: every
    connection through it is dropped and new ones are refused until it is restored, while
    the engine behind it keeps running."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def drop(self) -> None:
        self.cut.set()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        self.cut.clear()

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
        self.drop()


@pytest.mark.postgres
def test_an_engine_cut_off_from_its_database_stops_its_agent_before_its_lease_ends(
    pg_workspace: Workspace, tmp_path: Path
) -> None:
    workspace, log = pg_workspace, tmp_path / "runs.log"
    url = make_url(workspace.db_url or "")
    proxy = Proxy(url.host or "127.0.0.1", url.port or 5432)
    through_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    submit_long_task(workspace, log)
    first = start_first(workspace, log, db=through_proxy)
    second: subprocess.Popen[bytes] | None = None
    try:
        first_id = tasks(workspace.store())["stall/t"].lease_owner or ""
        proxy.drop()  # its heartbeats now fail, while engine A itself runs on
        second = workspace.popen("run", "--quiet", log_name="engine-b.log", env=HOST_B)
        time.sleep(3 * LEASE_S)
        assert first.poll() is None  # A kept running all along
        proxy.restore()
        finish_and_check(workspace, log, first_id)
    finally:
        stop_all(first, *([second] if second else []))
        proxy.close()


@pytest.mark.parametrize("mode", ["native", "fork", "exec"])
def test_a_deadline_that_passes_unextended_stops_the_agent_and_says_why(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor on its own, native, forked by the fork server or started as a script:
    extended, the agent runs on; left alone, it is stopped (TERM first: the agent logs its
    end) and the record and the socket say why."""
    monkeypatch.setenv("RELAY_SUPERVISOR", mode)
    log = tmp_path / "runs.log"
    script = sim(30.0, lines=30, run_log=str(log))
    execution_id = f"deadline-{uuid.uuid4().hex[:12]}"
    spec = LaunchSpec(
        execution_id=execution_id,
        argv=[sys.executable, "-m", "relay_engine.agents.sim_agent"],
        cwd=tmp_path,
        env={**os.environ, "RELAY_SIM_SCRIPT": json.dumps(script), "RELAY_TASK": "j/t"},
        timeout_s=60,
        artifact_dir=tmp_path / "artifacts" / execution_id,
        grace_s=5.0,
        deadline_s=1.0,
        fence_grace_s=2.0,
    )
    process = launch(spec)
    ours = psutil.Process(process.pid).ppid() == os.getpid()
    assert ours == (mode != "fork")  # forked supervisors are the fork server's children
    native = os.path.basename(os.readlink(f"/proc/{process.pid}/exe")).startswith("supervisor-")
    assert native == (mode == "native")
    for _ in range(4):  # extended in time: it outlives its first deadline by far
        time.sleep(0.5)
        process.extend_deadline(1.0)
    assert process.poll() is None
    began = time.monotonic()
    assert process.wait(10) is not None
    assert time.monotonic() - began < 5
    assert process.fenced
    record = read_record(spec.artifact_dir)
    assert record is not None and record["stopped"] == "deadline"
    (run,) = read_runs(log)
    assert run.end is not None  # it got its TERM and its grace, not a bare KILL


def test_the_lease_must_outlast_the_deadline_and_two_heartbeats() -> None:
    settings = EngineConfig(lease_seconds=90, heartbeat_seconds=15)
    assert settings.agent_deadline_seconds == 60
    assert settings.fence_grace_seconds == 5
    with pytest.raises(ValueError, match="lease_seconds must be at least 60"):
        EngineConfig(lease_seconds=45, heartbeat_seconds=15)


def test_an_agent_fenced_while_its_task_is_still_ours_goes_back_to_the_queue(
    workspace: Workspace, tmp_path: Path
) -> None:
    """An engine that did not renew in time (here: it did not tick) finds its agent stopped
    at the deadline: the task goes back to the queue with the attempt refunded, the run is
    recorded as released and says why -- never a failure of the task's. The lease leaves
    1.5 s past the agent's deadline: the engine dispatches only within a lease of its last
    good tick, and a loaded box once took 2 s between the two ticks."""
    workspace.configure(lease=3.0, heartbeat=0.75, tick=0.05, grace=0.5)
    submit_long_task(workspace, tmp_path / "runs.log")
    engine = workspace.engine()
    engine.register()
    try:
        engine.tick()
        (live,) = engine.live.values()
        assert live.process.wait(10) is not None  # deadline 1.5 s, run 6 s
        assert live.process.fenced
        engine.tick(full=False)  # back to the queue, and claimed again at once
        assert live.execution_id not in engine.live
        again = tasks(workspace.store())["stall/t"]
        assert (again.state, again.attempt) == ("RUNNING", 1)  # the first one was refunded
    finally:
        engine.shutdown(release=True)
    runs = {run.id: run for run in executions(workspace.store())}
    assert (runs[live.execution_id].outcome, runs[live.execution_id].error) == (
        "released",
        FENCED_ERROR,
    )
    (released, _shutdown) = events(workspace.store(), "task.released")
    assert "fenced" in released.message

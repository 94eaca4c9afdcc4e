"""Many agents on one host: 200 long-running sleeping sim agents on one engine.

    .venv/bin/python bench/many_agents.py [--agents 200] [--seconds 20] [--db URL]

One real ``relay run`` (capacity = ``--agents``, SQLite unless ``--db``) runs a job of
``--agents`` sim tasks that each sleep far longer than the bench. Once every one of them
runs, for ``--seconds`` it measures:

- the engine's tick median and p95, from the engine's own tick timings (RELAY_STATS_FILE),
  against the same engine's ticks while it had nothing to run (the same run, before the job);
- ``relay status`` latency (the CLI, whole process, median of 5), against the same command
  on an empty workspace in the same run (the floor a noisy box moves with it);
- memory per running agent's supervisor: PSS (proportional set size, /proc/PID/smaps_rollup)
  of every supervisor (the native one, ``supervisor.c``, unless the host cannot build it),
  median and max; side by side, as many Python supervisors forked by one fork server
  (``RELAY_SUPERVISOR=fork``, the fallback: they share the server's pages, so they are
  measured as many at once) and one Python supervisor started as a script
  (``RELAY_SUPERVISOR=exec``).

Targets: tick median < 50 ms, ``relay status`` < 1 s, PSS per supervisor <= 2 MB. Prints,
never asserts; not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tomli_w
from sqlalchemy import func
from sqlmodel import select

from relay_engine.agents import native
from relay_engine.agents.runner import LaunchSpec, launch
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution, Task

SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent"]


def pss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cli(workspace: Path, db: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "relay_engine.cli", "--workspace", str(workspace)]
    argv += ["--db", db] if db else []
    return subprocess.run([*argv, *args], capture_output=True, text=True, check=False)


def setup(workspace: Path, agents: int) -> Path:
    config = {
        # wake_ups off: its baseline is the engine's ticks before the job, which an engine
        # that hears wake-ups would not take (with no work anywhere it ticks at heartbeats).
        "engine": {
            "max_concurrent_agents": agents,
            "tick_seconds": 0.5,
            "sandbox": "none",
            "wake_ups": False,
        },
        "agents": [{"id": "sim", "provider": "sim", "roles": ["implementer"]}],
    }
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    tasks = [{"id": f"t{i:03d}", "sim": {"duration": 3600, "lines": 1}} for i in range(agents)]
    job = workspace / "job.toml"
    job.write_text(tomli_w.dumps({"job": {"id": "many"}, "tasks": tasks}))
    return job


def running(store: Store) -> int:
    with store.read() as session:
        query = select(func.count()).select_from(Task).where(Task.state == "RUNNING")
        return int(session.exec(query).one())


def supervisor_pids(store: Store) -> list[int]:
    with store.read() as session:
        query = select(Execution.pid).where(col_is_running())
        return [pid for pid in session.exec(query) if pid]


def col_is_running() -> Any:
    from sqlmodel import col

    return col(Execution.ended_at).is_(None)


STATUS_IMPORTS = (
    "from relay_engine.cli.startup import imports_frozen\n"
    "with imports_frozen():\n"
    "    from relay_engine.cli.main import build_parser; build_parser('status')\n"
    "    import relay_engine.cli.output"
)
"""What ``relay status`` imports before it reads, frozen as the CLI freezes them: the parser
loads a command's module only for the command it runs, so importing
``relay_engine.cli.main`` alone loads almost none."""


def empty_status(workspace: Path) -> float:
    """``relay status`` where nothing ever ran (its own SQLite file, whatever ``--db`` the
    run used): the same CLI's floor on this box, now (a busy neighbour slows both alike)."""
    workspace.mkdir()
    assert cli(workspace, None, "init").returncode == 0
    times = []
    for _ in range(5):
        started = time.perf_counter()
        assert cli(workspace, None, "status").returncode == 0
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def status_parts(store: Store) -> tuple[float, float]:
    """Where ``relay status``'s time goes: reading the report, and starting the CLI."""
    from relay_engine.cli.status import status_report

    reads, imports = [], []
    for _ in range(5):
        started = time.perf_counter()
        status_report(store)
        reads.append(time.perf_counter() - started)
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", STATUS_IMPORTS], check=True)
        imports.append(time.perf_counter() - started)
    return statistics.median(reads), statistics.median(imports)


def ticks_between(stats: dict[str, Any], start: float, end: float) -> list[float]:
    return [ms for at, ms in stats["ticks"] if start <= at <= end]


def python_supervisors_pss(tmp: Path, mode: str, count: int) -> list[int]:
    """PSS of ``count`` Python supervisors running at once (``RELAY_SUPERVISOR=mode``) from
    this process, for the side by side: forked ones share their server's pages, so one
    alone would read twice what each of many does."""
    os.environ["RELAY_SUPERVISOR"] = mode
    script = {"RELAY_SIM_SCRIPT": json.dumps({"duration": 60, "lines": 1})}
    try:
        processes = [
            launch(
                LaunchSpec(
                    execution_id=f"bench-{mode}-{i}",
                    argv=[*SIM],
                    cwd=tmp,
                    env={**os.environ, **script},
                    timeout_s=120,
                    artifact_dir=tmp / f"{mode}-artifacts" / str(i),
                )
            )
            for i in range(count)
        ]
        time.sleep(1.0 + count / 50)
        values = [kb for process in processes if (kb := pss_kb(process.pid)) is not None]
        for process in processes:
            process.kill_now()
        for process in processes:
            process.wait(10)
        return values
    finally:
        os.environ.pop("RELAY_SUPERVISOR", None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="relay-bench-many-"))
    workspace = tmp / "ws"
    workspace.mkdir()
    job = setup(workspace, args.agents)
    stats_file = tmp / "stats.json"
    env = {**os.environ, "RELAY_STATS_FILE": str(stats_file)}
    argv = [sys.executable, "-m", "relay_engine.cli", "--workspace", str(workspace)]
    argv += ["--db", args.db] if args.db else []
    assert cli(workspace, args.db, "init").returncode == 0
    engine = subprocess.Popen([*argv, "run", "--quiet"], env=env, stderr=subprocess.DEVNULL)
    store = Store.for_workspace(workspace, args.db)
    idle_from = time.time() + 1.0
    time.sleep(4.0)
    idle_to = time.time()
    assert cli(workspace, args.db, "submit", str(job)).returncode == 0
    began = time.monotonic()
    while running(store) < args.agents:
        if time.monotonic() - began > 600:
            raise SystemExit(f"only {running(store)} of {args.agents} agents started in 600 s")
        time.sleep(0.5)
    ramp = time.monotonic() - began
    time.sleep(2.0)
    window_from = time.time()
    status_s = []
    for _ in range(5):
        started = time.perf_counter()
        result = cli(workspace, args.db, "status")
        status_s.append(time.perf_counter() - started)
        assert result.returncode == 0, result.stderr
        time.sleep(args.seconds / 5)
    window_to = time.time()
    parts = status_parts(store)
    empty = empty_status(tmp / "empty")
    pss = [kb for pid in supervisor_pids(store) if (kb := pss_kb(pid)) is not None]
    engine_pss = pss_kb(engine.pid)
    engine.send_signal(signal.SIGTERM)
    engine.wait(300)
    stats = json.loads(stats_file.read_text())
    busy = ticks_between(stats, window_from, window_to)
    idle = ticks_between(stats, idle_from, idle_to)
    forked_pss = python_supervisors_pss(tmp, "fork", args.agents)
    script_pss = python_supervisors_pss(tmp, "exec", 1)
    report(args.agents, ramp, busy, idle, status_s, pss, engine_pss)
    print(
        f"  of which: the status read {parts[0] * 1000:.0f} ms in-process (median of 5), "
        f"the CLI's interpreter and imports alone {parts[1] * 1000:.0f} ms (median of 3)"
    )
    status = statistics.median(status_s)
    print(
        f"  relay status on an empty workspace, same run: {empty * 1000:.0f} ms (median of 5); "
        f"{args.agents} running agents cost {status / empty:.2f}x that"
    )
    supervisors_side_by_side(pss, forked_pss, script_pss)


def report(
    agents: int,
    ramp: float,
    busy: list[float],
    idle: list[float],
    status_s: list[float],
    pss: list[int],
    engine_pss: int | None,
) -> None:
    def p95(values: list[float]) -> float:
        return sorted(values)[int(0.95 * (len(values) - 1))] if values else float("nan")

    tick = statistics.median(busy) if busy else float("nan")
    idle_tick = statistics.median(idle) if idle else float("nan")
    print(
        f"{agents} sleeping sim agents on one engine ({os.cpu_count()} CPUs), all running after {ramp:.1f} s"
    )
    print(
        f"engine tick: median {tick:.1f} ms, p95 {p95(busy):.1f} ms over {len(busy)} ticks "
        f"(idle engine: median {idle_tick:.1f} ms; ratio {tick / idle_tick:.2f}); target median < 50 ms"
    )
    status = statistics.median(status_s)
    print(
        f"relay status: median {status * 1000:.0f} ms of 5 (max {max(status_s) * 1000:.0f} ms); target < 1 s"
    )
    if pss:
        median = statistics.median(pss) / 1024
        print(
            f"supervisor PSS ({native.describe()}): median {median:.2f} MB, "
            f"max {max(pss) / 1024:.2f} MB over {len(pss)} supervisors; target <= 2 MB"
        )
    if engine_pss:
        print(
            f"engine PSS: {engine_pss / 1024:.1f} MB ({engine_pss / 1024 / agents:.2f} MB per agent)"
        )


def supervisors_side_by_side(pss: list[int], forked: list[int], script: list[int]) -> None:
    """The engine's supervisors' PSS against the Python ones'."""
    print("supervisor PSS side by side:")
    if not pss:
        return
    median = statistics.median(pss)
    for label, values in (
        (f"{len(forked)} Python supervisors forked by one fork server, at once", forked),
        ("a Python supervisor started as a script", script),
    ):
        if values:
            theirs = statistics.median(values)
            print(
                f"  {label}: median {theirs / 1024:.2f} MB (the engine's / these: {median / theirs:.2f})"
            )


if __name__ == "__main__":
    main()

"""How much wall time the engine adds over spawning the same agents from a bare loop.

    .venv/bin/python bench/engine_overhead.py            # 500 tasks of ~50 ms at capacity 16
    .venv/bin/python bench/engine_overhead.py --tasks 100 --profile  # RELAY_BENCH_PROFILE=FILE keeps the .prof

relay: submit a job of N independent sim tasks, then Engine.run(until_idle=True).
baseline: the same sim command and script, N times, at most `capacity` at once, from a
thread pool doing subprocess.Popen + wait with stdout to a file (as relay's runner does).
Prints both wall times and their ratio (target <= 1.3). Never asserts.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomli_w

from relay_engine.cli.status import status_report
from relay_engine.contracts.job_file import load_job_file
from relay_engine.loop.engine import Engine
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store


def sim_script(duration: float) -> dict[str, object]:
    return {"duration": duration, "lines": 1}


def write_workspace(root: Path, tasks: int, capacity: int, duration: float, tick: float) -> Path:
    workspace = root / "ws"
    workspace.mkdir()
    config = {
        "engine": {"max_concurrent_agents": capacity, "tick_seconds": tick},
        "agents": [{"id": "sim", "provider": "sim", "roles": ["implementer"]}],
    }
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    job = {
        "job": {"id": "bench"},
        "tasks": [{"id": f"t{i:04d}", "sim": sim_script(duration)} for i in range(tasks)],
    }
    (workspace / "job.toml").write_text(tomli_w.dumps(job))
    return workspace


def run_relay(workspace: Path, profile: Path | None) -> tuple[float, bool]:
    start = time.perf_counter()
    store = Store.for_workspace(workspace)
    submit_job(store, load_job_file(workspace / "job.toml"), now=time.time())
    engine = Engine(workspace, store=store)
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    ok = engine.run(until_idle=True)
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    tasks = len(status_report(store)["tasks"])
    print(
        f"engine CPU (all threads):  {cpu:9.2f} s  ({cpu / max(tasks, 1) * 1000:.1f} ms per task)"
    )
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    store.dispose()
    return elapsed, ok


def run_baseline(root: Path, tasks: int, capacity: int, duration: float) -> float:
    out = root / "baseline"
    out.mkdir()
    prompt = out / "prompt.md"
    prompt.write_text("do the thing\n")
    env = {**os.environ, "RELAY_SIM_SCRIPT": json.dumps(sim_script(duration))}
    argv = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--prompt-file", str(prompt)]

    def one(i: int) -> int:
        with open(out / f"{i}.out", "wb") as stdout:
            proc = subprocess.Popen(
                argv,
                env={**env, "RELAY_TASK": f"bench/t{i:04d}", "RELAY_ATTEMPT": "1"},
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            return proc.wait()

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=capacity) as pool:
        codes = list(pool.map(one, range(tasks)))
    elapsed = time.perf_counter() - start
    assert not any(codes), "baseline sims failed"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--duration", type=float, default=0.05)
    parser.add_argument("--tick", type=float, default=0.5, help="relay.toml tick_seconds")
    parser.add_argument("--profile", action="store_true", help="cProfile the engine run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
        root = Path(tmp)
        workspace = write_workspace(root, args.tasks, args.capacity, args.duration, args.tick)
        baseline = run_baseline(root, args.tasks, args.capacity, args.duration)
        profile = (
            Path(os.environ.get("RELAY_BENCH_PROFILE", root / "engine.prof"))
            if args.profile
            else None
        )
        relay, ok = run_relay(workspace, profile)
        if profile:
            stats = pstats.Stats(str(profile))
            stats.sort_stats("cumulative").print_stats(30)
            stats.sort_stats("tottime").print_stats(20)

    print(
        f"tasks={args.tasks} capacity={args.capacity} sim duration={args.duration}s "
        f"tick={args.tick}s"
    )
    print(f"baseline (bare Popen loop): {baseline:8.2f} s  ({args.tasks / baseline:6.1f} tasks/s)")
    print(f"relay (submit + run):       {relay:8.2f} s  ({args.tasks / relay:6.1f} tasks/s)")
    print(f"ratio relay/baseline:       {relay / baseline:8.2f}  (target <= 1.3)")
    if not ok:
        print("WARNING: the relay run did not end with every job SUCCEEDED")


if __name__ == "__main__":
    main()

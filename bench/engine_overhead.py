"""How much wall time the engine adds over spawning the same agents from a bare loop.

    .venv/bin/python bench/engine_overhead.py            # 500 tasks of ~50 ms at capacity 16
    .venv/bin/python bench/engine_overhead.py --tasks 100 --profile  # RELAY_BENCH_PROFILE=FILE keeps each pair's .prof as FILE.pairN
    .venv/bin/python bench/engine_overhead.py --sandbox  # the relay run's sims in bwrap too

relay: submit a job of N independent sim tasks, then Engine.run(until_idle=True).
baseline: the same sim command and script, N times, at most `capacity` at once, from a
thread pool doing subprocess.Popen + wait with stdout to a file (as relay's runner does).
Prints both wall times and their ratio for each of ``--pairs`` pairs (which of the two
runs first alternates), and the median ratio (target <= 1.15). Never asserts.

supervisor CPU per start, side by side: `true` from a bare fork-exec (Popen), through
launch() with the native supervisor (supervisor.c, the default: this process's own child,
reaped here), with the Python one forked by the engine's fork server (RELAY_SUPERVISOR=fork,
the fallback where no C compiler is at hand) and with the Python one started as a script
(RELAY_SUPERVISOR=exec); CPU of this process, what it reaped, and the fork server with
everything it reaped (target: the default supervisor <= 2 ms over bare).

whole-process CPU per /bin/true task: a relay engine running --true-tasks tasks of a
command agent that is /bin/true at capacity 8 (the engine, its fork server, supervisors and
agents, reaped or not), with the native supervisor and again with the Python one forked,
against a bare Popen loop running /bin/true 8 at a time (target: at most 5 ms more per task),
in a workspace under /var/tmp, as the starts are.

agent start, side by side: `true` started one at a time (--starts of each), bare and in the
sandbox a task's worktree gets (the same bwrap argv relay builds: git entries, hidden paths,
network off), each straight from Popen and through relay's launch() with its supervisor.
The sandbox's cost per start is the difference (target < 5 ms).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomli_w
from sqlalchemy import func
from sqlmodel import select

from relay_engine.agents import native
from relay_engine.agents.adapters import get_adapter
from relay_engine.agents.runner import LaunchSpec, fork_server, launch
from relay_engine.agents.sandbox import Site, host_sandbox, sandbox_spec
from relay_engine.cli.status import status_report
from relay_engine.contracts.config import AgentConfig
from relay_engine.contracts.job_file import load_job_file
from relay_engine.core.sandbox import bwrap_argv
from relay_engine.loop.engine import Engine
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution


def sim_script(duration: float) -> dict[str, object]:
    return {"duration": duration, "lines": 1}


def write_workspace(
    root: Path, tasks: int, capacity: int, duration: float, tick: float, sandbox: bool = False
) -> Path:
    workspace = root / "ws"
    workspace.mkdir()
    sim = {"id": "sim", "provider": "sim", "roles": ["implementer"]}
    config = {
        "engine": {"max_concurrent_agents": capacity, "tick_seconds": tick},
        # Explicit: an agent's default is bwrap wherever it works, and the bare loop has none.
        "agents": [{**sim, "sandbox": "bwrap" if sandbox else "none"}],
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
    submitted = time.perf_counter() - start
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
    print(f"of the relay run: submit {submitted:.2f} s, after the last agent ended "
          f"{time.time() - last_exit(store):.2f} s")  # fmt: skip
    store.dispose()
    return elapsed, ok


def last_exit(store: Store) -> float:
    """When the run's last agent ended (what follows is the engine seeing that it is done)."""
    with store.read() as session:
        return session.exec(select(func.max(Execution.ended_at))).one() or time.time()


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


def task_sandbox(root: Path) -> list[str]:
    """The bwrap command relay builds for a command agent in a real task worktree."""
    repo, tree = root / "starts-repo", root / "starts-ws" / ".relay" / "worktrees" / "j" / "t"
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(
        [*git, "-C", str(repo), "worktree", "add", "-q", "-B", "relay-tasks/j/t", str(tree)],
        check=True,
    )
    agent = AgentConfig(id="c", provider="command", command=("true",), sandbox="bwrap")
    artifacts = root / "starts-ws" / ".relay" / "artifacts" / "e"
    site = Site(cwd=tree, workspace=root / "starts-ws", artifacts=artifacts, env=os.environ)
    spec = sandbox_spec(site, agent, get_adapter("command", command_template=["true"]), False)
    return bwrap_argv(host_sandbox().bwrap or "bwrap", spec)


def start_once(root: Path, label: str, i: int, wrapper: list[str], supervised: bool) -> float:
    """Seconds from asking for `true` to seeing it exit."""
    true = shutil.which("true") or "/bin/true"
    start = time.perf_counter()
    if supervised:
        spec = LaunchSpec(
            execution_id=f"bench-{os.getpid()}-{label}-{i}",
            argv=[*wrapper, true],
            cwd=root,
            env=dict(os.environ),
            timeout_s=60,
            artifact_dir=root / "starts" / f"{label}-{i}",
            sandbox_argc=len(wrapper),
        )
        code = launch(spec).wait(30)
    else:
        code = subprocess.run([*wrapper, true], check=False).returncode
    assert code == 0, f"{label} start {i} failed ({code})"
    return time.perf_counter() - start


TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu() -> float:
    """CPU seconds of this process, everything it reaped, and its fork server with all
    that the server reaped (the supervisors it forked, and their agents)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    server = fork_server()
    if server is None or os.environ.get("RELAY_SUPERVISOR") == "exec":
        return total
    try:
        fields = Path(f"/proc/{server._proc.pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return total
    return total + sum(int(v) for v in fields[11:15]) / TICK


def supervisor_cpu(root: Path, count: int) -> None:
    """CPU per start of `true`: bare, native supervisor, forked supervisor, supervisor as a
    script, in turn."""
    true = shutil.which("true") or "/bin/true"
    fork_server()  # started before the clock: one per engine, not one per start
    print(f"native supervisor: {native.native_supervisor().binary or native.describe()}")
    ways = {"bare fork-exec (Popen)": "bare", "launch(), native supervisor": "native",
            "launch(), fork server": "fork", "launch(), script supervisor": "exec"}  # fmt: skip
    spent = dict.fromkeys(ways.values(), 0.0)
    for i in range(count):
        for mode in spent:
            if mode != "bare":
                os.environ["RELAY_SUPERVISOR"] = mode
            before = tree_cpu()
            if mode == "bare":
                assert subprocess.run([true], check=False).returncode == 0
            else:
                spec = LaunchSpec(
                    execution_id=f"cpu-{os.getpid()}-{mode}-{i}",
                    argv=[true],
                    cwd=root,
                    env=dict(os.environ),
                    timeout_s=60,
                    artifact_dir=root / "cpu" / f"{mode}-{i}",
                )
                assert launch(spec).wait(30) == 0
            if mode == "fork":
                time.sleep(0.002)  # the server reaps its child on SIGCHLD: let it
            spent[mode] += tree_cpu() - before
            os.environ.pop("RELAY_SUPERVISOR", None)
    print(f"CPU per start of true, {count} starts of each, in turn (ms):")
    for label, mode in ways.items():
        print(f"  {label:30} {spent[mode] / count * 1e3:7.2f}")
    over = {mode: (cpu - spent["bare"]) / count * 1e3 for mode, cpu in spent.items()}
    print(
        f"  supervisor CPU per start over bare: {over['native']:.2f} ms native (target <= 2), "
        f"{over['fork']:.2f} ms forked, {over['exec']:.2f} ms as a script"
    )


def true_tasks(root: Path, tasks: int, tick: float) -> None:
    """Whole-process CPU per /bin/true task: relay at capacity 8 against a bare loop, with
    the native supervisor and with the Python one forked (the fallback), one after the other.
    What the file system charges for the files a task creates is measured before and after
    them, and taken out in a last line: on this VM it swings tenfold from one minute to the
    next (after a burst of deletes, say), and the bare loop creates none."""
    true = shutil.which("true") or "/bin/true"
    create_before = create_cpu(root)
    before = tree_cpu()
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(
            pool.map(lambda _: subprocess.run([true], check=False).returncode, range(tasks))
        )
    bare = tree_cpu() - before
    assert not any(codes)
    print(f"whole-process CPU per /bin/true task, {tasks} tasks, 8 at a time (SQLite):")
    print(f"  bare Popen loop: {bare / tasks * 1e3:6.2f} ms")
    over: dict[str, float] = {}
    for mode in ("native", "fork"):
        os.environ["RELAY_SUPERVISOR"] = mode
        try:
            relay, ok, statements = true_run(root / f"true-{mode}", true, tasks, tick)
        finally:
            os.environ.pop("RELAY_SUPERVISOR", None)
        over[mode] = (relay - bare) / tasks * 1e3
        print(f"  relay, {mode} supervisor: {relay / tasks * 1e3:6.2f} ms, {over[mode]:.2f} ms "
              f"over bare (target <= 5; {'all succeeded' if ok else 'NOT ALL SUCCEEDED'}, "
              f"{statements / tasks:.1f} statements per task)")  # fmt: skip
    created = entries_created(root / "true-native") / tasks
    create_ms = (create_before + create_cpu(root)) / 2 * 1e3
    files_ms = created * create_ms
    print(f"  of that, the file system's: a task creates {created:.1f} files and directories "
          f"(its artifacts, its work directory), and creating one cost {create_ms * 1e3:.0f} µs "
          f"of CPU here (mean of before and after): {files_ms:.2f} ms per task")  # fmt: skip
    print(f"  over bare without the file system's share: {over['native'] - files_ms:.2f} ms "
          f"native, {over['fork'] - files_ms:.2f} ms forked")  # fmt: skip


def entries_created(workspace: Path) -> int:
    """The files and directories a run left under the workspace's artifacts and work
    directories: each cost a create, whose price varies a hundredfold between machines."""
    relay = workspace / ".relay"
    return sum(1 for top in (relay / "artifacts", relay / "jobs") for _ in top.rglob("*"))


def create_cpu(root: Path, count: int = 300) -> float:
    """CPU seconds to create one small file in a new directory beside the runs' (each in a
    directory of its own, as each task's artifacts are), measured here and now."""
    base = Path(tempfile.mkdtemp(dir=root))
    before = time.process_time()
    for i in range(count):
        directory = base / str(i)
        directory.mkdir()
        (directory / "f").write_bytes(b"x" * 200)
    spent = (time.process_time() - before) / (2 * count)  # a directory and a file each
    shutil.rmtree(base, ignore_errors=True)
    return spent


def true_run(workspace: Path, true: str, tasks: int, tick: float) -> tuple[float, bool, int]:
    """One engine running ``tasks`` /bin/true tasks: (CPU seconds, all succeeded, statements)."""
    workspace.mkdir()
    agent = {"id": "true", "provider": "command", "command": [true], "roles": ["implementer"],
             "sandbox": "none"}  # the bare loop runs no sandbox either  # fmt: skip
    config = {"engine": {"max_concurrent_agents": 8, "tick_seconds": tick}, "agents": [agent]}
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    job = {"job": {"id": "true"}, "tasks": [{"id": f"t{i:04d}"} for i in range(tasks)]}
    (workspace / "job.toml").write_text(tomli_w.dumps(job))
    store = Store.for_workspace(workspace)
    submit_job(store, load_job_file(workspace / "job.toml"), now=time.time())
    before = tree_cpu()
    statements = store.stats.statements
    ok = Engine(workspace, store=store).run(until_idle=True)
    relay = tree_cpu() - before
    statements = store.stats.statements - statements
    store.dispose()
    return relay, ok, statements


def report_starts(root: Path, count: int) -> None:
    """The four ways to start an agent, taken in turn (so a busy neighbour slows them all)."""
    if host_sandbox().problem:
        print(f"agent start: no sandbox here ({host_sandbox().problem})")
        return
    wrapper = task_sandbox(root)
    ways = {
        "Popen(true)": ([], False),
        "Popen(bwrap … true)": (wrapper, False),
        "launch(true) (supervisor)": ([], True),
        "launch(bwrap … true)": (wrapper, True),
    }
    times: dict[str, list[float]] = {label: [] for label in ways}
    for i in range(count):
        for label, (argv, supervised) in ways.items():
            times[label].append(
                start_once(root, label.split("(")[0] + str(len(argv)), i, argv, supervised)
            )
    print(f"agent start, {count} starts of each, in turn (median / mean ms):")
    for label, taken in times.items():
        median, mean = statistics.median(taken) * 1e3, statistics.mean(taken) * 1e3
        print(f"  {label:28} {median:7.2f} / {mean:7.2f}")
    bare = statistics.median(times["launch(true) (supervisor)"])
    boxed = statistics.median(times["launch(bwrap … true)"])
    print(
        f"  sandbox cost per start:      {(boxed - bare) * 1e3:7.2f} ms (median; target < 5), "
        f"ratio {boxed / bare:.2f}; the bwrap argv has {len(wrapper)} elements"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--duration", type=float, default=0.05)
    parser.add_argument("--tick", type=float, default=0.5, help="relay.toml tick_seconds")
    parser.add_argument("--profile", action="store_true", help="cProfile the engine run")
    parser.add_argument("--starts", type=int, default=200, help="agent starts timed per row")
    parser.add_argument("--sandbox", action="store_true", help="the relay run's sims in bwrap")
    parser.add_argument("--true-tasks", type=int, default=1000, help="/bin/true tasks timed")
    parser.add_argument("--pairs", type=int, default=3, help="relay and bare runs, in turns")
    args = parser.parse_args()

    # Every workspace is outside /tmp, as a real one is: under the sandbox's private /tmp
    # it would need mounts of its own to stay visible, and /tmp, where test suites create
    # and delete millions of files, cost 2-5 times the CPU per file created on this VM (relay
    # creates seven files per task, the bare loop one).
    with tempfile.TemporaryDirectory(prefix="relay-bench-", dir="/var/tmp") as tmp:
        root = Path(tmp)
        starts = root / "starts"
        starts.mkdir()
        report_starts(starts, args.starts)
        supervisor_cpu(starts, args.starts)
        true_tasks(starts, args.true_tasks, args.tick)
        ratios = [
            wall_pair(root / f"pair{i}", args, relay_first=i % 2 == 1) for i in range(args.pairs)
        ]
    print(
        f"tasks={args.tasks} capacity={args.capacity} sim duration={args.duration}s "
        f"tick={args.tick}s sandbox={'bwrap' if args.sandbox else 'none'}"
    )
    print(f"ratio relay/baseline: {statistics.median(ratios):.2f} median of {len(ratios)} pairs "
          f"({' '.join(f'{r:.2f}' for r in ratios)}; target <= 1.15)")  # fmt: skip


def wall_pair(root: Path, args: argparse.Namespace, *, relay_first: bool) -> float:
    """One relay run and one bare run of the same sims, back to back (in turns, which goes
    first: this VM's speed drifts within minutes, and a bench that always ran the baseline
    first charged relay the drift). Returns relay's wall over the baseline's."""
    root.mkdir()
    workspace = write_workspace(
        root, args.tasks, args.capacity, args.duration, args.tick, args.sandbox
    )
    kept = os.environ.get("RELAY_BENCH_PROFILE")
    profile = (
        Path(f"{kept}.{root.name}" if kept else root / "engine.prof") if args.profile else None
    )
    if relay_first:
        relay, ok = run_relay(workspace, profile)
    baseline = run_baseline(root, args.tasks, args.capacity, args.duration)
    if not relay_first:
        relay, ok = run_relay(workspace, profile)
    print(f"baseline (bare Popen loop): {baseline:8.2f} s  ({args.tasks / baseline:6.1f} tasks/s)")
    print(f"relay (submit + run):       {relay:8.2f} s  ({args.tasks / relay:6.1f} tasks/s)")
    print(f"ratio relay/baseline:       {relay / baseline:8.2f}")
    if not ok:
        print("WARNING: the relay run did not end with every job SUCCEEDED")
    if profile:
        stats = pstats.Stats(str(profile))
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
    return relay / baseline


if __name__ == "__main__":
    main()

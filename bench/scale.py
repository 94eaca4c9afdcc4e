"""Does adding engines on one PostgreSQL add throughput, and how long does a claim hold locks?

    RELAY_BENCH_PG_URL=postgresql://postgres:relay@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/scale.py [--tasks 2000] [--slots 8] [--engines 1,2,4] [--rounds 1]

(RELAY_TEST_PG_URL is used when RELAY_BENCH_PG_URL is not set.) For each engine count it
creates a database of its own, starts that many real ``relay run`` engine processes on it,
sharing ``--slots`` between them (8 = 8, 4+4, 2x4), and once they are all up inserts
``--tasks`` QUEUED tasks run by a ``command`` agent that is /bin/true (engines tick every
``--tick`` seconds, the default 0.5; a process exit wakes an engine at once anyway), after
a warm-up of two tasks per slot whose cost it prints apart (each engine compiles its
statements once, on its first claims and exits: a cost per engine, not per task).
Throughput is claims+completions per second between the first execution's start and the
last one's end (each task is one claim and one completion). It prints each rate, the ratio
N engines / 1 engine (target on a 2-core box: 4/1 >= 1.6), how long one claim transaction
held its locks, p50/p99 over every claim of every engine (target: p99 <= 20 ms), and where
the machine's CPU went per task: the engines, the supervisors and agents they reaped,
PostgreSQL, and what stayed idle. Never asserts; not part of the test suite. ``--rounds N``
runs the engine counts N times, interleaved (1, 2, 4, 1, 2, 4, ...), and reports each
count's medians and every round's ratios: one run to the next varies by a fifth on a VM.
``--same-batch`` adds a run of one engine with the slots each engine of the largest fleet
has (1 x 2 for 8 slots over 4 engines): four engines of two slots and one of two claim and
reap the same few tasks per tick, so the two apart tell what the number of engines costs
from what the size of each tick's batch does; with it the bench also splits the engine's CPU
into a cost per claim round and one per task, and says what a round may cost for the 4-engine
target to hold.

``RELAY_BENCH_PROFILE=PATH`` has each engine write a cProfile of its engine thread's CPU time
to ``PATH.<pid>`` (read them together with ``pstats.Stats(*glob.glob("PATH.*"))``).

Statements per task and claim lock holds come from the engines themselves: each writes its
own counts (``RELAY_STATS_FILE``: statements its Store sent, each claim transaction's lock
hold measured inside ``claim_batch``) when it stops. The server's own count of statements
comes from ``log_statement = all`` on the bench's database (``RELAY_BENCH_PG_LOG``: the
server's log file, default the Debian cluster's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dispatch_queue import insert_queued, succeeded, write_config
from sqlalchemy import func
from sqlalchemy.engine import make_url
from sqlmodel import select

from relay_engine.store.db import Store
from relay_engine.store.schema import EngineRecord, Execution

WARM_UP_PER_SLOT = 2
"""Tasks each slot runs before the measured ones: an engine's first claims and exits
compile each of its statements once (SQLAlchemy's cache), a cost per engine rather than per
task, which four engines sharing a short run would otherwise carry in their CPU per task."""
MEASURED_JOB = "bench"  # the measured tasks' job; the warm-up's is another
STATS_ENV = "RELAY_STATS_FILE"  # each engine writes its own counts there when it stops
SERVER_LOG = "/var/log/postgresql/postgresql-15-main.log"


def engine_main(argv: list[str]) -> int:
    """``--engine``: one real ``relay run`` (profiled when RELAY_BENCH_PROFILE is set)."""
    from relay_engine.cli.main import main

    profile_to = os.environ.get("RELAY_BENCH_PROFILE")
    if not profile_to:
        return main(argv)
    import cProfile

    profiler = cProfile.Profile(time.thread_time)  # relay run stops cleanly on SIGTERM
    profiler.enable()
    try:
        return main(argv)
    finally:
        profiler.disable()
        profiler.dump_stats(f"{profile_to}.{os.getpid()}")


def server_url() -> str:
    url = os.environ.get("RELAY_BENCH_PG_URL") or os.environ.get("RELAY_TEST_PG_URL")
    if not url:
        sys.exit("set RELAY_BENCH_PG_URL (or RELAY_TEST_PG_URL) to a PostgreSQL server URL")
    return url


@contextmanager
def fresh_database(base: str) -> Iterator[str]:
    """A database of this run's own, dropped afterwards."""
    import psycopg

    name = f"relay_bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(base).set(drivername="postgresql", database="postgres")
    conninfo = admin.render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def busy_span(store: Store) -> float:
    """Seconds from the first measured execution's start to the last one's end."""
    with store.read() as session:
        first, last = session.exec(
            select(func.min(Execution.started_at), func.max(Execution.ended_at)).where(
                Execution.job_id == MEASURED_JOB
            )
        ).one()
    return float(last - first)


def start_engine(workspace: Path, url: str, name: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, __file__, "--engine", "--workspace", str(workspace)]
    argv += ["--db", url, "run", "--quiet"]
    env = {**os.environ, STATS_ENV: str(workspace / f"{name}.stats.json")}
    env.pop("RELAY_DB", None)
    with (workspace / f"{name}.log").open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)


def run_fleet(
    root: Path, url: str, engines: int, slots: int, tasks: int, tick_seconds: float
) -> dict[str, Any]:
    """One configuration: ``engines`` processes with ``slots // engines`` slots each."""
    workspace = root / f"e{engines}"
    workspace.mkdir(parents=True)
    write_config(workspace, slots // engines, tick_seconds)
    store = Store(url)
    server = ServerLog.watch(url)
    procs = [start_engine(workspace, url, f"engine{i}") for i in range(engines)]
    try:
        # The work arrives once every engine is up: start-up is not what is measured.
        _wait(lambda: registered(store) >= engines, procs, timeout=120.0)
        warm = WARM_UP_PER_SLOT * slots
        began = CpuSample.take([proc.pid for proc in procs])
        insert_queued(store, warm, job="warm-up")
        _wait(lambda: succeeded(store) >= warm, procs, timeout=120.0)
        before = CpuSample.take([proc.pid for proc in procs])
        server.mark()
        insert_queued(store, tasks, job=MEASURED_JOB)
        done = warm + tasks
        _wait(lambda: succeeded(store) >= done, procs, timeout=max(600.0, tasks * 0.5))
        cpu = CpuSample.take([proc.pid for proc in procs]).since(before)
        server_statements = server.count()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    span = busy_span(store)
    store.dispose()
    stats = [json.loads(p.read_text()) for p in sorted(workspace.glob("engine*.stats.json"))]
    holds = [ms for s in stats for ms in s["claim_holds_ms"]]
    statements = sum(s["statements"] for s in stats) if stats else float("nan")  # older engines
    result = {"engines": engines, "rate": 2 * tasks / span, "span": span, "holds": holds}
    result["claims"] = len(holds)
    result |= {"statements": statements / done, "server_statements": server_statements}
    result |= {"warm_up": warm, "warm_up_ms": before.since(began)["engines"] * 1000}
    top: dict[str, int] = {}
    for engine_stats in stats:
        for text, times in engine_stats.get("top", []):
            top[text] = top.get(text, 0) + times
    result["top"] = sorted(top.items(), key=lambda item: -item[1])
    return result | {"cpu": {k: v * 1000 / tasks for k, v in cpu.items()}}


class ServerLog:
    """Statements counted by the server itself: ``log_statement = all`` for the bench's
    database only, read back from the server's log (lines ``user@DB LOG:  statement:`` /
    ``execute``), BEGIN, COMMIT and ROLLBACK left out. None when the log is not readable."""

    def __init__(self, database: str, path: Path | None) -> None:
        self.database, self.path, self.offset = database, path, 0

    @classmethod
    def watch(cls, url: str) -> ServerLog:
        import psycopg

        database = make_url(url).database or ""
        path = Path(os.environ.get("RELAY_BENCH_PG_LOG", SERVER_LOG))
        admin = make_url(url).set(drivername="postgresql", database="postgres")
        try:
            with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as c:
                c.execute(f"ALTER DATABASE \"{database}\" SET log_statement = 'all'")
        except psycopg.Error:
            return cls(database, None)
        return cls(database, path if path.is_file() else None)

    def mark(self) -> None:
        if self.path is not None:
            self.offset = self.path.stat().st_size

    def count(self) -> float | None:
        if self.path is None:
            return None
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read().decode("utf-8", "replace")
        tag = f"@{self.database} LOG:  "
        found = 0
        for line in text.splitlines():
            _, hit, rest = line.partition(tag)
            if not hit or not rest.startswith(("statement: ", "execute ")):
                continue
            sql = rest.split(": ", 1)[1].strip().upper() if ": " in rest else ""
            found += not sql.startswith(("BEGIN", "COMMIT", "ROLLBACK"))
        return found


TICK = os.sysconf("SC_CLK_TCK")


def _proc_times(pid: int) -> tuple[float, float]:
    """(own, reaped children) CPU seconds of ``pid``; (0, 0) once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / TICK
    return own, (int(fields[13]) + int(fields[14])) / TICK


def _fork_servers(engine_pids: list[int]) -> list[int]:
    """The engines' fork servers: children of theirs running forkserver.py (none where the
    native supervisor was built: it is the engine's own child, and what it reaped -- its
    agent -- is in the engine's reaped time with it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if parent in engine_pids and b"forkserver.py" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "postgres":
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class CpuSample:
    """Where the machine's CPU went: the engines themselves, what they reaped (supervisors
    and agents), PostgreSQL, and what stayed idle. Linux only; the bench is.

    A native supervisor is its engine's child and reaps its agent, so both land in the
    engine's reaped time (``cutime``/``cstime``) once the engine waits for it, never in the
    engine's own; a forked Python supervisor is its fork server's, counted with the server."""

    def __init__(self, values: dict[str, float], postgres: dict[int, float]) -> None:
        self.values, self.postgres = values, postgres

    @classmethod
    def take(cls, engine_pids: list[int]) -> CpuSample:
        line = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        jiffies = [int(v) / TICK for v in line]
        times = [_proc_times(pid) for pid in engine_pids]
        servers = [_proc_times(pid) for pid in _fork_servers(engine_pids)]
        values = {
            "engines": sum(own for own, _ in times),
            # what the engines reaped (native supervisors with their agents), and their fork
            # servers (Python supervisors) with all that those reaped
            "supervisors+agents": sum(reaped for _, reaped in times)
            + sum(own + reaped for own, reaped in servers),
            "idle": jiffies[3] + jiffies[4],
            "total": sum(jiffies),
        }
        return cls(values, {pid: sum(_proc_times(pid)) for pid in _postgres_pids()})

    def since(self, before: CpuSample) -> dict[str, float]:
        spent = {k: v - before.values[k] for k, v in self.values.items()}
        spent["postgres"] = sum(
            cpu - before.postgres.get(pid, 0.0) for pid, cpu in self.postgres.items()
        )
        known = spent["engines"] + spent["supervisors+agents"] + spent["postgres"]
        spent["other"] = spent.pop("total") - spent["idle"] - known
        return spent


def registered(store: Store) -> int:
    with store.read() as session:
        return int(session.exec(select(func.count()).select_from(EngineRecord)).one())


def _wait(done: Callable[[], bool], procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise SystemExit(f"an engine exited early: {dead[0]} (see its log)")
        if time.monotonic() > deadline:
            raise SystemExit(f"not done after {timeout:.0f} s")
        time.sleep(0.2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One engine count's runs as one: the median of each number, every claim's lock hold.
    Runs on one VM vary by a fifth from one to the next; interleaved rounds and their medians
    let a change of a few per cent show."""
    if len(runs) == 1:
        return runs[0]

    def middle(key: str) -> float:
        values = [r[key] for r in runs if r[key] is not None]
        return statistics.median(values) if values else float("nan")

    cpu = {k: statistics.median(r["cpu"][k] for r in runs) for k in runs[0]["cpu"]}
    keys = ("rate", "span", "statements", "server_statements", "warm_up_ms", "claims")
    merged = {k: middle(k) for k in keys}
    holds = [ms for r in runs for ms in r["holds"]]
    return runs[0] | merged | {"cpu": cpu, "holds": holds}


def report_spread(runs: dict[int, list[dict[str, Any]]], counts: list[int]) -> None:
    """Each round's ratios against the same round's base, so the medians' spread shows."""
    base = runs[counts[0]]
    for n in counts[1:]:
        ratios = [
            f"{r['cpu']['engines'] / b['cpu']['engines']:.2f}"
            for r, b in zip(runs[n], base, strict=True)
        ]
        rates = [f"{r['rate'] / b['rate']:.2f}" for r, b in zip(runs[n], base, strict=True)]
        print(
            f"{n} engines / {counts[0]}, round by round: engine CPU per task "
            f"{' '.join(ratios)}; throughput {' '.join(rates)}"
        )


def report_top(results: list[dict[str, Any]], tasks: int, shown: int) -> None:
    """``--top N``: the statements the engines sent most, per task, for each engine count."""
    for r in results:
        print(f"top statements per task, {r['engines']} engine(s):")
        for text, times in r["top"][:shown]:
            print(f"  {times / tasks:6.2f}  {text}")


def report(results: list[dict[str, Any]], tasks: int, slots: int) -> None:
    print(f"{tasks} tasks of /bin/true, {slots} slots in total, PostgreSQL, {os.cpu_count()} CPUs")
    base = results[0]
    for r in results:
        holds = r["holds"]
        server = r["server_statements"]
        print(
            f"{r['engines']} engine(s) x {slots // r['engines']} slots: "
            f"{r['rate']:7.1f} claims+completions/s ({r['span']:.1f} s)  "
            f"claim lock hold p50 {statistics.median(holds) if holds else 0:.1f} ms "
            f"p99 {percentile(holds, 0.99):.1f} ms over {len(holds)} claims"
        )
        print(
            f"    statements per task: {r['statements']:.1f} counted by the engines, "
            + (
                f"{server / tasks:.1f} by the server (no BEGIN/COMMIT)"
                if server
                else "server log unreadable"
            )
        )
        cpu = ", ".join(f"{name} {ms:.1f}" for name, ms in r["cpu"].items())
        print(f"    CPU ms per task: {cpu}")
        print(
            f"    warm-up before it, {r['warm_up']} tasks: engines' CPU "
            f"{r['warm_up_ms']:.0f} ms in all"
        )
    for r in results[1:]:
        n = r["engines"]
        print(
            f"{n} engines / {base['engines']}: throughput {r['rate'] / base['rate']:.2f}, engine CPU "
            f"per task {r['cpu']['engines'] / base['cpu']['engines']:.2f}, statements per task "
            f"{r['statements'] / base['statements']:.2f}"
        )
    limit = ceiling(base["cpu"])
    print(
        f"ceiling on this machine: {limit:.2f} (the most any engine count could reach over the "
        "base if it cost no more CPU per task: the base's share of idle CPU is all there is to gain)"
    )
    for r in results[1:]:
        print(
            f"{r['engines']} engines: throughput / ceiling = {r['rate'] / base['rate'] / limit:.2f}"
        )
    print(
        "targets: statements per task <= 12 at every count; engine CPU per task at 4 engines "
        "<= 1.3x that at 1; throughput of 4 engines >= 0.9 of the ceiling; p99 lock hold <= 20 ms"
    )


def ceiling(cpu: dict[str, float]) -> float:
    """All the machine's CPU over what the base run kept busy."""
    total = sum(cpu.values())
    busy = total - cpu["idle"]
    return total / busy if busy > 0 else float("inf")


def report_same_batch(alone: dict[str, Any], fleet: dict[str, Any], slots: int) -> None:
    """What the number of engines costs apart from the size of each tick's batch: one engine
    with the slots each engine of the largest fleet has claims and reaps the same few tasks
    per tick, so its CPU per task carries the same fixed cost per tick."""
    per_task = alone["cpu"]["engines"]
    ratio = fleet["cpu"]["engines"] / per_task
    print(
        f"1 engine x {slots} slots (each tick's batch as in the {fleet['engines']}-engine "
        f"fleet): engine CPU per task {per_task:.1f} ms, {alone['statements']:.1f} statements "
        f"per task; {fleet['engines']} engines / it: {ratio:.2f} (the engine count's own cost)"
    )


def report_fixed_cost(base: dict[str, Any], alone: dict[str, Any], tasks: int) -> None:
    """Split the engine's CPU per task into a cost per claim round and a cost per task.

    Each configuration's CPU per task is ``fixed / batch + per_task``, where ``batch`` is the
    tasks one claim transaction took (the tasks over the claims the engines counted, the
    warm-up's few among them): two runs with different batches (the base's and the narrow
    engine's) give both terms. The
    4-engine target then bounds the fixed term: what a round costs whatever it carries is
    what a fleet of narrow engines pays over and over."""
    points = [(tasks / r["claims"], r["cpu"]["engines"]) for r in (base, alone) if r["claims"]]
    if len(points) < 2 or points[0][0] == points[1][0]:
        return
    (wide, wide_ms), (narrow, narrow_ms) = points
    fixed = (narrow_ms - wide_ms) / (1 / narrow - 1 / wide)
    per_task = wide_ms - fixed / wide
    bound = 0.3 * per_task / (1 / narrow - 1.3 / wide)
    print(
        f"engine CPU = {fixed:.1f} ms per claim round + {per_task:.1f} ms per task (batches of "
        f"{wide:.1f} and {narrow:.1f} tasks per round); the 1.3x target needs a round's own "
        f"cost <= {bound:.1f} ms at this cost per task"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--engine":
        sys.exit(engine_main(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--engines", default="1,2,4", help="engine counts, the first is the base")
    parser.add_argument(
        "--tick", type=float, default=0.5, help="tick_seconds (0.5 is the engine's default)"
    )
    parser.add_argument("--top", type=int, default=0, help="list the N most sent statements")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the counts this many times, interleaved"
    )
    parser.add_argument(
        "--same-batch",
        action="store_true",
        help="also run one engine with the slots each engine of the largest fleet has",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.engines.split(",")]
    base = server_url()
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    narrow = args.slots // max(counts)  # the slots of each engine of the largest fleet
    alone: list[dict[str, Any]] = []
    # Outside /tmp, as a real workspace is: there, where test suites create and delete
    # millions of files, each file a start creates cost this VM 5-15 times the CPU.
    with tempfile.TemporaryDirectory(prefix="relay-bench-scale-", dir="/var/tmp") as tmp:
        for round_number in range(args.rounds):
            root = Path(tmp) / f"r{round_number}"
            for engines in counts:
                with fresh_database(base) as url:
                    runs[engines].append(
                        run_fleet(root, url, engines, args.slots, args.tasks, args.tick)
                    )
            if args.same_batch:
                with fresh_database(base) as url:
                    alone.append(
                        run_fleet(root / "same-batch", url, 1, narrow, args.tasks, args.tick)
                    )
    results = [median_run(runs[n]) for n in counts]
    report(results, args.tasks, args.slots)
    if alone:
        report_same_batch(median_run(alone), results[-1], narrow)
        report_fixed_cost(results[0], median_run(alone), args.tasks)
    if args.rounds > 1:
        report_spread(runs, counts)
    if args.top:
        report_top(results, args.tasks, args.top)


if __name__ == "__main__":
    main()

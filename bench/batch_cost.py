"""What a tick costs the engine, apart from what each task costs.

    .venv/bin/python bench/batch_cost.py [--tasks 600] [--rounds 3] [--db postgresql://…]

bench/scale.py finds that four engines of two slots pay about twice the engine CPU per task
of one engine of eight. This bench shows the same defect in one process, without three more
engines and PostgreSQL contending for the CPU: one in-process engine runs ``--tasks``
/bin/true tasks with 8 slots, then with 2 (so each tick carries the few tasks one engine of
a 4 x 2 fleet does), each on a fresh database (``--db``: a PostgreSQL server to make them
on, else SQLite), alternated for ``--rounds``. The engine's own CPU (every thread of this
process; the supervisors and agents are its children and not counted) and its ticks give
two equations, cpu = tasks x per task + ticks x per tick, which it solves for the two costs.

It prints each run, the medians, the ratio of CPU per task at 2 slots over 8 (the figure
scale.py's 4/1 ratio carries; it stays under 1.3 only when a tick's own cost is small next
to a task's), and with ``--phases`` the thread CPU per call of the tick's steps (reading the
queue, claiming, writing exits) and of a start. On a VM whose neighbours come and go, the
runs of one round compare; rounds far apart do not. Never asserts.
"""

from __future__ import annotations

import argparse
import functools
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tomli_w

from relay_engine.contracts.job_file import load_job_file
from relay_engine.loop import dispatch, engine, reaper, starter
from relay_engine.loop.engine import Engine
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store

SLOTS = (8, 2)
PHASES: list[tuple[Any, str]] = [
    (engine.Engine, "tick"),
    (starter.Starter, "dispatch"),
    (dispatch, "read_queue"),
    (dispatch, "claim_batch"),
    (reaper.Reaper, "_write_exits"),
    (starter.Starter, "_prepare"),
]


class Phases:
    """Thread CPU per step, by wrapping each step once for the whole bench."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def install(self) -> None:
        for owner, name in PHASES:
            setattr(owner, name, self._timed(getattr(owner, name), name))

    def _timed(self, step: Callable[..., Any], name: str) -> Callable[..., Any]:
        @functools.wraps(step)
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return step(*args, **kwargs)
            finally:
                with self._lock:
                    entry = self.spent.setdefault(name, [0.0, 0])
                    entry[0] += time.thread_time() - began
                    entry[1] += 1

        return timed

    def take(self) -> dict[str, list[float]]:
        with self._lock:
            spent, self.spent = self.spent, {}
        return spent


@contextmanager
def fresh_url(server: str | None) -> Iterator[str | None]:
    """A database of the run's own on ``server`` (dropped after), else None: SQLite."""
    if server is None:
        yield None
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from scale import fresh_database  # bench/scale.py's, sharing its PostgreSQL handling

    with fresh_database(server) as url:
        yield url


def one_run(
    root: Path, server: str | None, slots: int, tasks: int, chains: int = 0
) -> dict[str, float]:
    """One engine, ``slots`` slots, ``tasks`` /bin/true tasks: its CPU and its ticks.
    ``chains``: that many chains of dependent tasks (each waits on the one ``chains``
    before it), most of the job a DRAFT until the end; 0, all independent."""
    workspace = Path(tempfile.mkdtemp(dir=root))
    true = shutil.which("true") or "/bin/true"
    agent = {"id": "true", "provider": "command", "command": [true], "roles": ["implementer"],
             "sandbox": "none"}  # fmt: skip
    config = {"engine": {"max_concurrent_agents": slots, "tick_seconds": 0.5}, "agents": [agent]}
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    job = {"job": {"id": "true"}, "tasks": [_task(i, chains) for i in range(tasks)]}
    (workspace / "job.toml").write_text(tomli_w.dumps(job))
    with fresh_url(server) as url:
        store = Store(url) if url else Store.for_workspace(workspace)
        submit_job(store, load_job_file(workspace / "job.toml"), now=time.time())
        run = Engine(workspace, store=store)
        before = own_cpu()
        ok = run.run(until_idle=True)
        cpu = own_cpu() - before
        store.dispose()
    shutil.rmtree(workspace, ignore_errors=True)
    if not ok:
        sys.exit(f"the run at {slots} slots did not succeed: see {workspace}")
    return {"cpu_ms": cpu * 1000, "ticks": len(run.ticks), "tasks": tasks}


def _task(i: int, chains: int) -> dict[str, Any]:
    after = [f"t{i - chains:04d}"] if chains and i >= chains else []
    return {"id": f"t{i:04d}", **({"depends_on": after} if after else {})}


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def solve(wide: dict[str, float], narrow: dict[str, float]) -> tuple[float, float]:
    """(per task, per tick) ms from two runs of the same tasks with different tick counts."""
    ticks = narrow["ticks"] - wide["ticks"]
    per_tick = (narrow["cpu_ms"] - wide["cpu_ms"]) / ticks if ticks else float("nan")
    per_task = (wide["cpu_ms"] - wide["ticks"] * per_tick) / wide["tasks"]
    return per_task, per_tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", help="a PostgreSQL server URL to make each run's database on")
    parser.add_argument("--phases", action="store_true", help="thread CPU of the tick's steps")
    args = parser.parse_args()
    phases = Phases() if args.phases else None
    if phases is not None:
        phases.install()
    backend = "PostgreSQL" if args.db else "SQLite"
    print(f"{args.tasks} tasks of /bin/true, one engine in-process, {backend}")
    runs: dict[int, list[dict[str, float]]] = {slots: [] for slots in SLOTS}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:  # not /tmp: see scale.py
        for round_ in range(args.rounds):
            for slots in SLOTS:
                result = one_run(Path(tmp), args.db, slots, args.tasks)
                runs[slots].append(result)
                report_run(round_, slots, result, phases.take() if phases else None)
    report(runs)


def report_run(
    round_: int, slots: int, result: dict[str, float], phases: dict[str, list[float]] | None
) -> None:
    per_task = result["cpu_ms"] / result["tasks"]
    print(
        f"  round {round_ + 1}, {slots} slots: engine CPU {per_task:5.2f} ms per task, "
        f"{result['ticks']:.0f} ticks ({result['tasks'] / max(result['ticks'], 1):.1f} tasks each)"
    )
    for name, (spent, calls) in sorted((phases or {}).items(), key=lambda kv: -kv[1][0]):
        print(f"      {name:14} {spent * 1000 / calls:6.2f} ms per call, {calls:5d} calls")


def report(runs: dict[int, list[dict[str, float]]]) -> None:
    wide, narrow = (runs[slots] for slots in SLOTS)
    ratios = [n["cpu_ms"] / w["cpu_ms"] for w, n in zip(wide, narrow, strict=True)]
    solved = [solve(w, n) for w, n in zip(wide, narrow, strict=True)]
    per_task = statistics.median(s[0] for s in solved)
    per_tick = statistics.median(s[1] for s in solved)
    for slots, results in runs.items():
        ms = statistics.median(r["cpu_ms"] / r["tasks"] for r in results)
        print(f"{slots} slots: engine CPU {ms:.2f} ms per task (median)")
    print(
        f"CPU per task, {SLOTS[1]} slots / {SLOTS[0]}: {statistics.median(ratios):.2f} "
        f"(round by round {' '.join(f'{r:.2f}' for r in ratios)})"
    )
    print(f"a tick's own cost {per_tick:.2f} ms, a task's {per_task:.2f} ms (medians, solved)")


if __name__ == "__main__":
    main()

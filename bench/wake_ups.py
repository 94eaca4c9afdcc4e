"""What an engine with nothing to do costs, and how soon it starts what another process submits.

    .venv/bin/python bench/wake_ups.py [--seconds 10] [--submits 8] [--db postgresql://…]

One engine (in this process, default config: ``tick_seconds = 0.5``, ``heartbeat_seconds =
15``) run twice side by side, in turns: with ``wake_ups`` on (it hears other processes'
writes and, while the fleet has nothing to do now, ticks only at heartbeats and when a timed
wait ends) and off (the baseline: a full tick every ``tick_seconds``). For each:

- idle CPU: this process's CPU per second over ``--seconds`` with nothing submitted, on a
  workspace whose work is all done, and again on one whose only job waits on the operator
  (its first task failed for good, the second waits on it: a job blocked until a retry);
- submit to start: ``--submits`` times, ``relay submit`` of a one-task job from another
  process, then the time from the job's row (its ``created_at``, written by the submit's
  commit) to its execution's start, median and max.

SQLite (the workspace's file) unless ``--db`` names a PostgreSQL server to make a fresh
database on. Prints the ratios on/off; never asserts; not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import tomli_w
from batch_cost import fresh_url, own_cpu
from sqlmodel import Session, select

from relay_engine.loop.engine import Engine
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution, Job


def measure(
    root: Path, server: str | None, wake_ups: bool, seconds: float, submits: int, blocked: bool
) -> dict:
    """Idle CPU, and (for a fleet with no job) the delays from submit to start."""
    workspace = Path(tempfile.mkdtemp(dir=root))
    agents = [
        {"id": "true", "provider": "command", "command": ["/bin/true"], "roles": ["implementer"],
         "sandbox": "none"},
        {"id": "false", "provider": "command", "command": ["/bin/false"], "roles": ["tester"],
         "sandbox": "none"},
    ]  # fmt: skip
    config = {"engine": {"wake_ups": wake_ups}, "agents": agents}
    (workspace / "relay.toml").write_text(tomli_w.dumps(config))
    with fresh_url(server) as url:
        store = Store(url) if url else Store.for_workspace(workspace)
        if blocked:
            _submit_blocked_job(workspace, url)
        engine = Engine(workspace, store=store)
        stop = threading.Event()
        thread = threading.Thread(target=engine.run, args=(stop,), daemon=True)
        thread.start()
        _wait_for(store, lambda s: not blocked or s.get(Job, "stuck").state == "BLOCKED")
        time.sleep(2.0)  # registered, its first looks found nothing to do now: quiet
        before = own_cpu()
        time.sleep(seconds)
        idle_ms = (own_cpu() - before) / seconds * 1000
        delays = (
            [] if blocked else [_submit_and_wait(workspace, url, store, i) for i in range(submits)]
        )
        stop.set()
        engine.wake()
        thread.join(30)
        store.dispose()
    return {"idle_ms": idle_ms, "delays": delays}


def _submit_blocked_job(workspace: Path, url: str | None) -> None:
    """A job whose first task fails for good (``/bin/false``, one attempt) and whose second
    waits on it: blocked until an operator retries."""
    tasks = [{"id": "a", "role": "tester", "max_attempts": 1}, {"id": "b", "dependencies": ["a"]}]
    job = workspace / "stuck.toml"
    job.write_text(tomli_w.dumps({"job": {"id": "stuck"}, "tasks": tasks}))
    argv = [sys.executable, "-m", "relay_engine.cli", "--workspace", str(workspace)]
    subprocess.run([*argv, *(["--db", url] if url else []), "submit", str(job)], check=True,
                   capture_output=True)  # fmt: skip


def _wait_for(store: Store, done: Callable[[Session], bool]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with store.read() as session:
            if done(session):
                return
        time.sleep(0.05)
    sys.exit("the engine did not get there within a minute")


def _submit_and_wait(workspace: Path, url: str | None, store: Store, i: int) -> float:
    """Seconds from the submit's commit to the start of its task's execution."""
    job = workspace / f"job{i}.toml"
    job.write_text(tomli_w.dumps({"job": {"id": f"j{i}"}, "tasks": [{"id": "t"}]}))
    argv = [sys.executable, "-m", "relay_engine.cli", "--workspace", str(workspace)]
    subprocess.run([*argv, *(["--db", url] if url else []), "submit", str(job)], check=True,
                   capture_output=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with store.read() as session:
            created = session.exec(select(Job.created_at).where(Job.id == f"j{i}")).first()
            started = session.exec(
                select(Execution.started_at).where(Execution.task_key == f"j{i}/t")
            ).first()
        if created is not None and started is not None:
            time.sleep(0.3)  # let the job settle before the next one
            return started - created
        time.sleep(0.005)
    sys.exit(f"j{i} did not start within a minute: see {workspace}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--submits", type=int, default=8)
    parser.add_argument("--db", default=None, help="a PostgreSQL server URL (default SQLite)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for round_ in range(args.rounds):
            for wake_ups in (round_ % 2 == 0, round_ % 2 == 1):  # which goes first alternates
                result = measure(Path(tmp), args.db, wake_ups, args.seconds, args.submits, False)
                waiting = measure(Path(tmp), args.db, wake_ups, args.seconds, 0, True)
                result["waiting_ms"] = waiting["idle_ms"]
                results[wake_ups].append(result)
                delays = result["delays"]
                print(f"round {round_ + 1}, wake_ups {'on ' if wake_ups else 'off'}: idle CPU "
                      f"{result['idle_ms']:.2f} ms/s, waiting on the operator "
                      f"{waiting['idle_ms']:.2f} ms/s, submit to start median "
                      f"{statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms")  # fmt: skip
    idle = {k: statistics.median(r["idle_ms"] for r in v) for k, v in results.items()}
    waits = {k: statistics.median(r["waiting_ms"] for r in v) for k, v in results.items()}
    start = {k: statistics.median(d for r in v for d in r["delays"]) for k, v in results.items()}
    print(f"{'PostgreSQL' if args.db else 'SQLite'}, default tick_seconds and heartbeat_seconds:")
    print(f"  idle engine CPU: {idle[True]:.2f} ms/s with wake-ups, {idle[False]:.2f} without "
          f"(ratio {idle[True] / idle[False]:.2f})")  # fmt: skip
    print(f"  engine CPU while its job waits on the operator: {waits[True]:.2f} ms/s with "
          f"wake-ups, {waits[False]:.2f} without (ratio {waits[True] / waits[False]:.2f})")  # fmt: skip
    print(f"  submit to start: {start[True] * 1000:.0f} ms with wake-ups, "
          f"{start[False] * 1000:.0f} without (ratio {start[True] / start[False]:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()

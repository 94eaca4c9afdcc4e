"""Chaos: engines killed at random points and paused past their lease, on SQLite and PostgreSQL.

Several `relay run` engines share one database and a DAG of tasks, some of which leave
daemons behind and some of which really fail once. A seeded monkey SIGKILLs engines (and
restarts them), arms the crash point between spawning agents and recording them, and
SIGSTOPs engines past their lease before letting them go on. Afterwards:

- every task SUCCEEDED, with exactly one ``succeeded`` execution row;
- no process of any execution is alive (daemons included);
- no task was charged for a crash: one attempt each, two for the ones that really failed.

The numbers (kills, pauses, recoveries, duplicates, orphans) are printed with the seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import (
    Workspace,
    executions,
    job_toml,
    pid_gone,
    sim,
    stop_process,
    tasks,
    wait_for,
)

from relay_engine.agents.runner import tagged_processes
from relay_engine.store.db import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LAYERS, WIDTH = 5, 16
LEASE_S = 3.0
KILLS = int(os.environ.get("RELAY_CHAOS_KILLS", "20"))  # more for a heavier manual run
PAUSE_AT = (4, 11)  # the strikes that pause an engine instead of killing it
CHAOS_S = float(os.environ.get("RELAY_CHAOS_SECONDS", "75"))


def chaos_job(root: Path, rng: random.Random) -> tuple[str, set[str], list[Path]]:
    """A layered DAG: each task needs one or two of the layer before; some leave daemons
    (in their group or ``setsid``), some fail their first attempt for real."""
    definitions, real_failures, pid_files = [], set(), []
    for layer in range(LAYERS):
        for i in range(WIDTH):
            task_id = f"l{layer}t{i:02d}"
            script = sim(rng.uniform(0.2, 0.8), lines=2)
            if rng.random() < 0.15:
                pid_file = root / f"{task_id}.daemon"
                pid_files.append(pid_file)
                script.update(spawn_daemon=rng.choice(["group", "setsid"]))
                script.update(daemon_pid_file=str(pid_file))
            if rng.random() < 0.05:
                script["fail_attempts"] = 1
                real_failures.add(f"chaos/{task_id}")
            task: dict[str, object] = {"id": task_id, "sim": script, "max_attempts": 3}
            if layer:
                picks = rng.sample(range(WIDTH), rng.choice([1, 2]))
                task["depends_on"] = [f"l{layer - 1}t{p:02d}" for p in picks]
            definitions.append(task)
    return job_toml("chaos", definitions), real_failures, pid_files


@dataclass
class Fleet:
    """The engines under test and what the monkey did to them."""

    workspace: Workspace
    size: int
    rng: random.Random
    engines: list[subprocess.Popen[bytes]] = field(default_factory=list)
    paused: dict[int, float] = field(default_factory=dict)  # pid -> when to resume
    started: int = 0
    strikes: int = 0
    kills: int = 0
    pauses: int = 0

    def launch(self) -> None:
        self.started += 1
        armed = self.started % 2 == 0  # every other engine may die between spawn and record
        env = {"RELAY_CRASH_AT": "spawned:kill:0.15"} if armed else {}
        log = f"engine-{self.started:03d}.log"
        self.engines.append(self.workspace.popen("run", "--quiet", log_name=log, env=env))

    def keep_up(self) -> None:
        """Restart engines that died (killed by the monkey or by their crash point)."""
        self.engines = [p for p in self.engines if p.poll() is None]
        while len(self.engines) < self.size:
            self.launch()

    def resume_due(self, now: float) -> None:
        for pid, until in list(self.paused.items()):
            if now >= until:
                _resume(pid)
                del self.paused[pid]

    def strike(self, now: float) -> None:
        running = [p for p in self.engines if p.poll() is None and p.pid not in self.paused]
        if not running:
            return
        victim = self.rng.choice(running)
        self.strikes += 1
        if self.strikes in PAUSE_AT:
            victim.send_signal(signal.SIGSTOP)  # past its lease: its work is taken over
            self.paused[victim.pid] = now + LEASE_S + 2.0
            self.pauses += 1
        else:
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            self.kills += 1

    def stop(self) -> None:
        for pid in self.paused:
            _resume(pid)
        self.paused.clear()
        for proc in self.engines:
            stop_process(proc, timeout=30)

    def hook_kills(self) -> int:
        logs = self.workspace.path.glob("engine-*.log")
        return sum(path.read_text(errors="replace").count("crash point spawned") for path in logs)


def _resume(pid: int) -> None:
    """SIGCONT, to an engine that may be gone: one paused the instant its own armed crash
    point fired dies all the same, and is reaped by ``keep_up`` (a CI run caught that)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def all_succeeded(store: Store) -> bool:
    states = [t.state for t in tasks(store).values()]
    return bool(states) and all(state == "SUCCEEDED" for state in states)


def test_chaos(workspace: Workspace) -> None:
    seed = int(os.environ.get("RELAY_CHAOS_SEED", time.time_ns() % 100_000))
    rng = random.Random(seed)
    size = 4 if workspace.db_url else 3
    workspace.configure(capacity=6, lease=LEASE_S, heartbeat=0.5, tick=0.1, grace=0.5)
    text, real_failures, pid_files = chaos_job(workspace.path, rng)
    workspace.submit(text)
    store = workspace.store()
    fleet = Fleet(workspace, size, rng)
    began = time.monotonic()
    try:
        fleet.keep_up()
        while fleet.kills < KILLS and time.monotonic() - began < CHAOS_S:
            if all_succeeded(store):
                break
            time.sleep(rng.uniform(0.3, 2.0) * 20 / max(KILLS, 20))
            fleet.resume_due(time.time())
            fleet.strike(time.time())
            fleet.keep_up()
        fleet.resume_due(float("inf"))
        wait_for(
            lambda: (fleet.keep_up(), all_succeeded(store))[1],
            timeout=240,
            interval=0.5,
            what="every task to succeed after the chaos",
        )
    finally:
        fleet.stop()
    elapsed = time.monotonic() - began

    runs = executions(store)
    final = tasks(store)
    succeeded = Counter(r.task_key for r in runs if r.outcome == "succeeded")
    duplicates = sum(1 for n in succeeded.values() if n > 1)
    wait_for(
        lambda: not any(tagged_processes(r.id) for r in runs),
        timeout=20,
        what="every execution's processes to be gone",
    )
    orphans = sum(len(tagged_processes(r.id)) for r in runs)
    daemons = [int(p.read_text()) for p in pid_files if p.exists()]
    print(
        f"\nchaos seed={seed} engines={size} tasks={len(final)} in {elapsed:.0f}s: "
        f"kills={fleet.kills} crash-point kills={fleet.hook_kills()} pauses={fleet.pauses} "
        f"engines started={fleet.started} executions={len(runs)} "
        f"recoveries={sum(t.recoveries for t in final.values())} "
        f"succeeded={sum(t.state == 'SUCCEEDED' for t in final.values())}/{len(final)} "
        f"duplicates={duplicates} orphans={orphans} daemons alive="
        f"{sum(not pid_gone(pid) for pid in daemons)}/{len(daemons)}"
    )
    assert {t.state for t in final.values()} == {"SUCCEEDED"}
    assert set(succeeded) == set(final) and duplicates == 0
    assert orphans == 0
    assert all(pid_gone(pid) for pid in daemons)
    attempts = {key: t.attempt for key, t in final.items()}
    assert attempts == {key: 2 if key in real_failures else 1 for key in final}, seed
    logs = "".join(p.read_text(errors="replace") for p in workspace.path.glob("engine-*.log"))
    assert "Traceback" not in logs, logs[-3000:]

"""A live fleet for console tests: the embedded engine, real sim agent processes, churn.

Rows appear, move and disappear under the cursor while the tests press keys, which is what
the operator meets and what frozen snapshots cannot show.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import tomli_w
from textual.pilot import Pilot

from relay_engine.contracts.config import load_config
from relay_engine.contracts.job_file import load_job_file
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store
from relay_tui.app import RelayApp

SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format"]


def relay_toml(capacity: int = 3) -> str:
    agents = [
        {"id": "claude-a", "provider": "claude", "roles": ["implementer", "planner"]},
        {"id": "codex-b", "provider": "codex", "roles": ["implementer", "tester"]},
        {"id": "plain-c", "provider": "sim", "roles": ["implementer", "tester"]},
    ]
    for agent in agents:
        if agent["provider"] != "sim":
            agent["command"] = [*SIM, agent["provider"]]
    engine = {"max_concurrent_agents": capacity, "tick_seconds": 0.1, "cancel_grace_seconds": 0.5}
    return tomli_w.dumps({"engine": engine, "agents": agents})


def churn_tasks(count: int, seed: int) -> list[dict[str, Any]]:
    """Short tasks in chains, some failing: rows keep starting, finishing and moving."""
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []
    for index in range(count):
        task: dict[str, Any] = {
            "id": f"t{index:02d}",
            "title": f"churn task {index}",
            "input": "x",
            "max_attempts": 1,
            "sim": {"duration": rng.uniform(0.3, 1.6), "lines": rng.randint(2, 8)},
        }
        if index >= 3 and rng.random() < 0.6:
            task["depends_on"] = [f"t{rng.randrange(index):02d}"]
        if rng.random() < 0.15:
            task["sim"]["fail_attempts"] = 1
        tasks.append(task)
    return tasks


def submit(workspace: Path, job_id: str, tasks: list[dict[str, Any]], **job: Any) -> None:
    path = workspace / f"{job_id}.toml"
    path.write_text(tomli_w.dumps({"job": {"id": job_id, **job}, "tasks": tasks}), "utf-8")
    store = Store.for_workspace(workspace)
    try:
        submit_job(store, load_job_file(path), now=time.time())
    finally:
        store.dispose()


def live_workspace(tmp_path: Path, capacity: int = 3) -> Path:
    (tmp_path / "relay.toml").write_text(relay_toml(capacity), encoding="utf-8")
    return tmp_path


def live_app(workspace: Path) -> RelayApp:
    return RelayApp(workspace, config=load_config(workspace), blink=False, poll_interval=0.1)


async def quit_app(pilot: Pilot[None], app: RelayApp, timeout: float = 30.0) -> None:
    """Quit the way an operator does (answering the quit dialog), and wait for the exit."""
    while app.screen is not app.main_screen and app.return_code is None:
        await pilot.press("escape")
    await pilot.press("q")
    deadline = time.monotonic() + timeout
    while app.return_code is None:
        if app.screen is not app.main_screen and app.screen.__class__.__name__ == "ConfirmScreen":
            await pilot.press("y")
        assert time.monotonic() < deadline, "the console did not exit"
        await asyncio.sleep(0.05)

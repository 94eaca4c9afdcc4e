"""Keeps ``relay-tui --demo`` alive: new work keeps arriving until the operator quits.

The first jobs of the demo finish within a minute; a newcomer who looks later would see a
fleet at rest. Every :data:`INTERVAL_S` seconds the feeder submits one more job to the
demo's own repository, rotating through what a fleet meets: plain changes (each reviewed,
now and then with changes asked for, and merged), a task that hits Claude's usage limit
(it resets a minute later), a task that fails until its troubleshooter steps in, and one
whose agent asks before it runs a command (answer it in the Needs-you pane). Old finished
jobs are pruned (their rows, artifacts and branches), and each change writes one of a few
files, so the database and the repository stay small however long the demo runs.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w
from sqlmodel import col, delete, select

from relay_engine.contracts.job_file import load_job_file
from relay_engine.core.states import TERMINAL_JOB_STATES
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store
from relay_engine.store.schema import (
    Ask,
    Assignment,
    Event,
    Execution,
    Job,
    Memory,
    Plan,
    ProviderSession,
    PullRequest,
    Review,
    Task,
)

INTERVAL_S = 20.0
KEPT_FINISHED = 6
"""Finished jobs kept (besides the demo's first four); older ones are pruned."""
SLOTS = 6
"""Files the changes write, in turn: main holds at most this many however long it runs."""
LIMIT_RESET_S = 50
FIRST_JOBS = frozenset({"search", "billing", "greet", "export"})
JOB_TABLES = (Task, Execution, Event, Plan, Review, Ask, Assignment, ProviderSession, Memory)


def change_job(number: int, repo: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A small change to the demo's repository: code, then a test, reviewed and merged."""
    slot = f"work/slot-{number % SLOTS}.txt"
    changes = number % 3 == 0  # every third review asks for changes once
    review = {"duration": 2.0, "lines": 4,
              "review": {"changes_on_rounds": [1] if changes else [], "findings": [
                  {"file": slot, "line": 1, "severity": "minor", "text": "say which change"}]}}  # fmt: skip
    fixer = {"duration": 2.0, "lines": 4, "write_files": {slot: f"change {number} (fixed)\n"}}
    tasks = [
        {"id": "code", "title": f"Change {number}", "input": "Write the change.",
         "sim": {"duration": 4.0, "lines": 8, "write_files": {slot: f"change {number}\n"}}},
        {"id": "test", "title": f"Test change {number}", "role": "tester", "input": "Test it.",
         "depends_on": ["code"], "sim": {"duration": 3.0, "lines": 6}},
    ]  # fmt: skip
    if extra is not None:
        tasks.append(extra)
    job = {"id": f"change-{number}", "title": f"Change {number}", "repo": str(repo),
           "auto_merge": True, "objective": f"Change {number}, reviewed and merged.",
           "sim": {"reviewer": review, "fixer": fixer}}  # fmt: skip
    return {"job": job, "tasks": tasks}


def limited_task(now: float) -> dict[str, Any]:
    """Claude hits its usage limit on the first try (it resets a minute later)."""
    reset = int(now) + LIMIT_RESET_S
    limit = {"message": f"Claude AI usage limit reached|{reset}", "until_epoch": reset,
             "format": "claude", "attempts": [1]}  # fmt: skip
    return {"id": "docs", "title": "Write the docs", "agent": "claude-a", "input": "Docs.",
            "sim": {"duration": 3.0, "lines": 6, "rate_limit": limit}}  # fmt: skip


def failing_task() -> dict[str, Any]:
    """Fails until its troubleshooter finds why and lets it run again."""
    verdict = {"verdict": "retry", "guidance": "Seed the fixtures before the run.",
               "reason": "fixtures not seeded"}  # fmt: skip
    return {"id": "flaky", "title": "Integration check", "role": "tester", "max_attempts": 2,
            "input": "Run the integration check.",
            "sim": {"duration": 2.0, "lines": 4, "fail_attempts": 2,
                    "troubleshooter": {"duration": 2.0, "lines": 4, "result": verdict}}}  # fmt: skip


def asking_task() -> dict[str, Any]:
    """Claude asks before it runs a command; the ask waits in the Needs-you pane."""
    ask = {"tool": "Bash", "input": {"command": "npm test -- --coverage"}, "writes": {}}
    return {"id": "verify", "title": "Verify with the test suite", "agent": "claude-a",
            "input": "Run the tests.", "sim": {"duration": 3.0, "lines": 6, "asks": [ask]}}  # fmt: skip


ROTATION: tuple[Callable[[float], dict[str, Any] | None], ...] = (
    lambda now: None,
    limited_task,
    lambda now: None,
    lambda now: failing_task(),
    lambda now: None,
    lambda now: asking_task(),
)
"""What each job adds to its change, in turn."""


class DemoFeeder:
    """A thread that submits a job every ``interval`` seconds and prunes old ones."""

    def __init__(self, workspace: Path, *, interval: float = INTERVAL_S) -> None:
        self.workspace = workspace
        self.repo = workspace / "repo"
        self.interval = interval
        self.submitted = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="relay-demo-feeder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        store = Store.for_workspace(self.workspace)
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.feed(store, time.time())
                except Exception:  # a demo that stops feeding must not take the console down
                    continue
        finally:
            store.dispose()

    def feed(self, store: Store, now: float) -> str:
        """Submit the next job; prune what is old. Returns the job's id."""
        self.submitted += 1
        number = self.submitted
        extra = ROTATION[(number - 1) % len(ROTATION)](now)
        path = self.workspace / "jobs" / f"change-{number}.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(tomli_w.dumps(change_job(number, self.repo, extra)), encoding="utf-8")
        submit_job(store, load_job_file(path), now=now)
        path.unlink()
        self.prune(store)
        return f"change-{number}"

    def prune(self, store: Store) -> list[str]:
        """Forget finished jobs beyond the newest :data:`KEPT_FINISHED`: rows, artifacts,
        branches."""
        with store.read() as session:
            finished = session.exec(
                select(Job.id)
                .where(col(Job.state).in_([str(s) for s in TERMINAL_JOB_STATES]))
                .order_by(col(Job.created_at).desc())
            ).all()
        old = [job for job in finished if job not in FIRST_JOBS][KEPT_FINISHED:]
        for job_id in old:
            self._forget(store, job_id)
        return old

    def _forget(self, store: Store, job_id: str) -> None:
        with store.read() as session:
            folders = session.exec(
                select(Execution.artifact_dir).where(col(Execution.job_id) == job_id)
            ).all()
        with store.write() as session:
            for table in JOB_TABLES:
                session.exec(delete(table).where(col(table.job_id) == job_id))
            session.exec(delete(PullRequest).where(col(PullRequest.job_id) == job_id))
            session.exec(delete(Job).where(col(Job.id) == job_id))
        for folder in folders:
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
        self._drop_branches(job_id)

    def _drop_branches(self, job_id: str) -> None:
        for repo in (self.repo, self.workspace / "origin.git"):
            found = subprocess.run(
                ["git", "for-each-ref", "--format=%(refname:short)", f"refs/heads/relay/{job_id}",
                 f"refs/heads/relay-tasks/{job_id}"],
                cwd=repo, capture_output=True, text=True, check=False,
            ).stdout.split()  # fmt: skip
            if found:
                subprocess.run(["git", "branch", "-D", *found], cwd=repo, capture_output=True,
                               check=False)  # fmt: skip

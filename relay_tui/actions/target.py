"""What a key acts on: the cursor row of the focused pane, read at the moment of the key.

Nothing here is remembered between keys. A table that gains its first row reports that row
highlighted even when it has no focus; a selection kept from such events is how keys used to
hit a task the operator never pointed at. Reading the focused pane's cursor when the key
arrives cannot be wrong in that way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.screen import Screen

from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.events import EventEntry
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.events import EventList
from relay_tui.widgets.needs import ask_id_of


@dataclass(frozen=True)
class Target:
    """A row the operator pointed at; ``task_key`` and ``job_id`` are None when absent."""

    pane: str
    row_key: str | None = None
    task_key: str | None = None
    job_id: str | None = None

    @property
    def ask_id(self) -> int | None:
        """The ask of a Needs-you row."""
        return ask_id_of(self.row_key)

    @property
    def agent_id(self) -> str | None:
        """The agent of an agent row (Providers pane)."""
        if self.row_key and self.row_key.startswith("agent:"):
            return self.row_key.removeprefix("agent:")
        return None

    @property
    def label(self) -> str:
        """What the status bar shows after ``▶``."""
        if self.agent_id:
            return f"agent {self.agent_id}"
        if self.ask_id is not None:
            return f"ask {self.ask_id} of {self.task_key or self.job_id}"
        if self.task_key:
            return self.task_key
        if self.job_id and self.row_key and self.row_key.startswith("run:"):
            return f"{self.job_id} planner"
        if self.job_id:
            return f"job {self.job_id}"
        if self.row_key and self.row_key.startswith("quota:"):  # quota:ACCOUNT:WINDOW
            account, _, window = self.row_key.removeprefix("quota:").rpartition(":")
            return f"{account} {window.replace('_', '-')} quota" if window else "quota windows"
        return self.row_key or ""

    def task(self, snapshot: Snapshot | None) -> TaskView | None:
        if snapshot is None or self.task_key is None:
            return None
        return snapshot.tasks.get(self.task_key)


def screen_target(screen: Screen[Any]) -> Target:
    """What a key pressed now on ``screen`` acts on: the screen's own task or job, or the
    cursor row of its focused table."""
    if isinstance(screen, DetailScreen):
        return Target("detail", screen.key, screen.key, screen.key.partition("/")[0])
    if isinstance(screen, JobScreen):
        return Target("job", f"job:{screen.job_id}", None, screen.job_id)
    if isinstance(screen, MainScreen):
        pane, row_key = screen.cursor_row()
        if pane == "events":
            return event_target(screen.query_one(EventList).entry(row_key))
        return target_of_row(pane, row_key, screen.snapshot)
    if isinstance(screen, UsageScreen):
        return target_of_row("usage", screen.cursor_key(), None)
    return Target("none")


def target_of_row(pane: str, row_key: str | None, snapshot: Snapshot | None) -> Target:
    """The task and/or job a row of ``pane`` stands for."""
    if row_key is None:
        return Target(pane)
    if pane in ("jobs", "planner"):
        return _job_or_task_row(pane, row_key, snapshot)
    if pane == "usage":  # the job and budget tables' rows of jobs are ``job:ID``
        job_id = row_key.removeprefix("job:") if row_key.startswith("job:") else None
        return Target(pane, row_key, None, job_id)
    if pane == "needs":
        ask = snapshot.ask(ask_id_of(row_key)) if snapshot else None
        if ask is None:
            return Target(pane, row_key)
        return Target(pane, row_key, ask.task_key, ask.job_id)
    if pane == "running":
        run = snapshot.run(row_key) if snapshot else None
        if run is None:
            return Target(pane, row_key)
        if run.task_key:
            return Target(pane, row_key, run.task_key, run.job_id)
        return Target(pane, f"run:{row_key}", None, run.job_id)
    return Target(pane, row_key)


def event_target(entry: EventEntry | None) -> Target:
    """An event line stands for its task (one event, or a burst of one task's), else its
    job."""
    if entry is None:
        return Target("events")
    task = entry.task_key
    return Target("events", entry.key, task, entry.job_id or (task or "").partition("/")[0] or None)


def _job_or_task_row(pane: str, row_key: str, snapshot: Snapshot | None) -> Target:
    kind, _, rest = row_key.partition(":")
    if kind == "job":
        return Target(pane, row_key, None, rest)
    if kind == "wave":
        return Target(pane, row_key, None, rest.rpartition(":")[0])
    if kind == "plan":
        plan = next((p for p in snapshot.plans if str(p.id) == rest), None) if snapshot else None
        return Target(pane, row_key, None, plan.job_id if plan else None)
    return Target(pane, row_key, row_key, row_key.partition("/")[0])

"""The four live tables of the main screen and the event log."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from relay_tui.data import EventView, JobView, Snapshot, TaskView, WaveView
from relay_tui.widgets.live_table import LiveTable, Row
from relay_tui.widgets.style import bar, clip, clock_time, duration, glyph, styled

MAX_EVENTS_PER_FRAME = 20
NOTE_CHARS = 200  # a note is one line; the table clips it to its column with an ellipsis
KIND_WIDTH = 18
BUSY_CHANGES = 20
SUMMARY_SECONDS = 1.0
STATE_NAMES = (
    "DRAFT",
    "QUEUED",
    "RUNNING",
    "PARKED",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "BLOCKED",
)


def task_state(task: TaskView) -> str:
    """The state the operator sees: a DRAFT task held by a failed dependency is BLOCKED."""
    return "BLOCKED" if task.state == "DRAFT" and task.blocked_by else task.state


def matches(task: TaskView, query: str) -> bool:
    """Every word must match: a state name (or ``state:x``) or a substring of key/title/agent."""
    haystack = " ".join((task.key, task.title, task.agent or "", task.provider or "")).lower()
    for word in query.lower().split():
        name = word.removeprefix("state:")
        if name.upper() in STATE_NAMES:
            if task_state(task) != name.upper():
                return False
        elif word not in haystack:
            return False
    return True


class JobsTable(LiveTable):
    COLUMNS = (
        ("task", "Task", 30),
        ("state", "State", 9),
        ("agent", "Agent", 10),
        ("try", "Try", 3),
        ("info", "Note", 12),
    )
    last_query = ""
    summarised = 0.0

    def task_row(self, task: TaskView, styles: Mapping[str, str]) -> Row:
        state = task_state(task)
        label = task.task_id if task.title == task.task_id else f"{task.task_id} · {task.title}"
        cell = Text.assemble(("│ ", "dim"), glyph(state, styles), label, end="")
        return (
            task.key,
            (
                cell,
                styled(state.lower(), state, styles),
                task.agent or "",
                f"{task.attempt}/{task.max_attempts}",
                task_note(task),
            ),
        )

    @staticmethod
    def job_row(job: JobView, progress: tuple[int, int], styles: Mapping[str, str]) -> Row:
        done, total = progress
        title = job.id if job.title == job.id else f"{job.id} · {job.title}"
        cell = glyph(job.state, styles)
        cell.append(title, style="bold")
        return (
            f"job:{job.id}",
            (
                cell,
                styled(job.state.lower(), job.state, styles),
                job.mode,
                "",
                f"{done}/{total} done" + (" · gated" if job.wave_gate == "operator" else ""),
            ),
        )

    @staticmethod
    def wave_row(wave: WaveView) -> Row:
        note = "awaiting approval — press g" if wave.awaiting_approval else ""
        return (
            f"wave:{wave.job_id}:{wave.wave}",
            (Text(f"├ wave {wave.wave}", style="italic", end=""), "", "", "", note),
        )

    def build_rows(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> list[Row]:
        by_job: dict[str, list[TaskView]] = {}
        for task in snapshot.tasks.values():
            by_job.setdefault(task.job_id, []).append(task)
        waves = {(w.job_id, w.wave): w for w in snapshot.waves}
        rows: list[Row] = []
        for job in snapshot.jobs:
            tasks = sorted(by_job.get(job.id, []), key=lambda t: (t.wave, t.created_at, t.key))
            shown = [t for t in tasks if matches(t, query)] if query else tasks
            if query and not shown:
                continue
            rows.append(self.job_row(job, snapshot.job_progress.get(job.id, (0, 0)), styles))
            current = None
            for task in shown:
                if task.wave != current:
                    current = task.wave
                    wave = waves.get((job.id, task.wave))
                    if wave is not None:
                        rows.append(self.wave_row(wave))
                rows.append(self.task_row(task, styles))
        return rows

    def apply(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> None:
        """Patch the changed tasks in place; rebuild only when rows appear or vanish."""
        full = query or query != self.last_query or snapshot.structure_changed or not self._order
        self.last_query = query
        if full:
            self.sync(self.build_rows(snapshot, query, styles), keep_order=True)
            return
        self.patch_lazily(
            (key, partial(self.task_values, snapshot.tasks[key], styles))
            for key in snapshot.changed_tasks
            if key in snapshot.tasks
        )
        now = time.monotonic()
        if len(snapshot.changed_tasks) > BUSY_CHANGES and now - self.summarised < SUMMARY_SECONDS:
            return  # under load, job and wave rows (always in view: a repaint) move once a second
        self.summarised = now
        progress = snapshot.job_progress
        self.patch(self.job_row(job, progress.get(job.id, (0, 0)), styles) for job in snapshot.jobs)
        self.patch(self.wave_row(wave) for wave in snapshot.waves)

    def task_values(self, task: TaskView, styles: Mapping[str, str]) -> Sequence[Any]:
        return self.task_row(task, styles)[1]


def task_note(task: TaskView) -> str:
    if task.state == "DRAFT" and task.blocked_by:
        return f"blocked by {task.blocked_by}"
    if task.state == "PARKED":
        until = f" until {clock_time(task.not_before)}" if task.not_before else ""
        return f"waiting on {task.waiting_on_provider or 'provider'}{until}"
    if task.state == "FAILED":
        return clip(task.error or "failed", NOTE_CHARS)
    if task.state == "RUNNING":
        return f"on {task.provider or '?'}"
    if task.state == "SUCCEEDED":
        return clip(task.result_summary or "", NOTE_CHARS)
    if task.state == "DRAFT" and task.dependencies:
        return "after " + ", ".join(task.dependencies)
    return ""


class RunningTable(LiveTable):
    COLUMNS = (
        ("task", "Task", 18),
        ("agent", "Agent", 10),
        ("provider", "Provider", 8),
        ("elapsed", "Elapsed", 7),
        ("try", "Try", 3),
        ("output", "Last output", 12),
    )

    def build_rows(self, snapshot: Snapshot, now: float) -> list[Row]:
        rows: list[Row] = []
        for run in snapshot.runs:
            task = snapshot.tasks.get(run.task_key or "")
            label = run.task_key or f"{run.job_id} planner"
            tries = f"{run.attempt}/{task.max_attempts}" if task else str(run.attempt)
            elapsed = duration(now - run.started_at) if run.started_at else "starting"
            rows.append(
                (
                    run.execution_id,
                    (
                        label,
                        run.agent or "",
                        run.provider or "",
                        elapsed,
                        tries,
                        clip(run.last_output, NOTE_CHARS),
                    ),
                )
            )
        return rows

    def apply(self, snapshot: Snapshot, now: float) -> None:
        self.sync(self.build_rows(snapshot, now), keep_order=False)


class ProvidersTable(LiveTable):
    COLUMNS = (
        ("provider", "Provider", 10),
        ("status", "Status", 10),
        ("reset", "Resets at", 9),
        ("in", "In", 7),
        ("parked", "Parked", 6),
        ("running", "Running", 7),
    )

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for provider in snapshot.providers:
            limited = provider.status == "limited"
            countdown = duration(provider.reset_at - now) if limited and provider.reset_at else ""
            rows.append(
                (
                    provider.provider,
                    (
                        provider.provider,
                        styled(
                            f"{'‖' if limited else '●'} {provider.status}", provider.status, styles
                        ),
                        clock_time(provider.reset_at) if limited else "",
                        countdown,
                        str(provider.parked),
                        str(provider.running),
                    ),
                )
            )
        return rows

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, now, styles), keep_order=False)


class PlannerTable(LiveTable):
    COLUMNS = (
        ("what", "Round / wave", 12),
        ("status", "Status", 10),
        ("progress", "Progress / objective", 20),
        ("notes", "Trigger · guidance · gate", 16),
    )

    def build_rows(self, snapshot: Snapshot, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for job in snapshot.jobs:
            rows.append((f"job:{job.id}", (Text(job.id, style="bold", end=""), "", "", "")))
            for plan in (p for p in snapshot.plans if p.job_id == job.id):
                note = plan.trigger + (f" · “{plan.guidance}”" if plan.guidance else "")
                objective = plan.objective_status or ""
                rows.append(
                    (
                        f"plan:{plan.id}",
                        (
                            f"├ round {plan.round}",
                            styled(plan.status.lower(), plan.status, styles),
                            objective.replace("_", " "),
                            clip(note, NOTE_CHARS),
                        ),
                    )
                )
            for wave in (w for w in snapshot.waves if w.job_id == job.id):
                rows.append(wave_progress_row(wave, styles))
        return rows

    def apply(self, snapshot: Snapshot, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, styles), keep_order=True)


def wave_progress_row(wave: WaveView, styles: Mapping[str, str]) -> Row:
    if wave.awaiting_approval:
        status, note = styled("gate", "PARKED", styles), "awaiting approval — press g"
    elif wave.done == wave.total:
        status, note = styled("done", "SUCCEEDED", styles), ""
    elif wave.failed:
        status, note = styled(f"{wave.failed} failed", "FAILED", styles), ""
    elif wave.running:
        status, note = styled(f"{wave.running} running", "RUNNING", styles), ""
    else:
        status, note = Text("pending", style="dim", end=""), ""
    progress = f"{bar(wave.done, wave.total)} {wave.done}/{wave.total}"
    return (f"wave:{wave.job_id}:{wave.wave}", (f"├ wave {wave.wave}", status, progress, note))


class EventLog(RichLog):
    """The change feed as it arrives (commands the engine rejects show up here too)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_lines", 500)
        kwargs.setdefault("wrap", False)
        kwargs.setdefault("markup", False)
        super().__init__(**kwargs)

    def add_events(self, events: Sequence[EventView], styles: Mapping[str, str]) -> None:
        """Write the newest events; a burst is summarised instead of stalling the UI."""
        if len(events) > MAX_EVENTS_PER_FRAME:
            skipped = len(events) - MAX_EVENTS_PER_FRAME
            self.write(Text(f"… {skipped} more events", style="dim", end=""))
            events = events[-MAX_EVENTS_PER_FRAME:]
        for event in events:
            self.write(event_line(event, styles))


def event_line(event: EventView, styles: Mapping[str, str]) -> Text:
    """Time and kind in fixed-width columns; info kinds are dim so problems stand out."""
    level_state = {"error": "FAILED", "warning": "PARKED"}.get(event.level, "DRAFT")
    line = Text(no_wrap=True, end="")
    line.append(clock_time(event.at) + " ", style="dim")
    kind = clip(event.kind, KIND_WIDTH)
    line.append(kind.ljust(KIND_WIDTH) + " ", style=styles.get(level_state, ""))
    line.append(event.message)
    return line

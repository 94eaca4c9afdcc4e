"""The four live tables of the main screen.

Each table knows how to turn a snapshot into rows, how to say in full what its cursor row
holds (the preview line under it), and which sort orders ``s`` cycles through.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from rich.text import Text

from relay_tui.views import JobView, PlanView, RunView, Snapshot, TaskView, WaveView
from relay_tui.widgets.live_table import LiveTable, Row
from relay_tui.widgets.style import bar, clip, clock_time, duration, glyph, styled

NOTE_CHARS = 200  # a note is one line; the table clips it to its column with an ellipsis
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
STATE_ORDER = {
    state: rank
    for rank, state in enumerate(
        ("FAILED", "RUNNING", "PARKED", "QUEUED", "BLOCKED", "DRAFT", "SUCCEEDED", "CANCELLED")
    )
}


def task_state(task: TaskView) -> str:
    return task.shown_state


def matches(task: TaskView, query: str) -> bool:
    """Every word must match: a state name (or ``state:x``) or a substring of key/title/agent."""
    haystack = " ".join((task.key, task.title, task.agent or "", task.provider or "")).lower()
    for word in query.lower().split():
        name = word.removeprefix("state:")
        if name.upper() in STATE_NAMES:
            if task.shown_state != name.upper():
                return False
        elif word not in haystack:
            return False
    return True


class SortableTable(LiveTable):
    """A live table whose row order the operator cycles with ``s``."""

    SORTS: ClassVar[tuple[str, ...]] = ("default",)
    sort_index = 0

    @property
    def sort(self) -> str:
        return self.SORTS[self.sort_index % len(self.SORTS)]

    def cycle_sort(self) -> str:
        self.sort_index = (self.sort_index + 1) % len(self.SORTS)
        return self.sort


def task_sort_key(sort: str) -> Any:
    if sort == "state":
        return lambda t: (STATE_ORDER.get(t.shown_state, 9), t.created_at, t.key)
    if sort == "agent":
        return lambda t: (t.agent or "~", t.created_at, t.key)
    if sort == "recent":
        return lambda t: (-t.updated_at, t.key)
    return lambda t: (t.wave, t.created_at, t.key)


class JobsTable(SortableTable):
    COLUMNS = (
        ("task", "Task", 15),
        ("state", "State", 9),
        ("agent", "Agent", 8),
        ("try", "Try", 3),
        ("info", "Note", 7),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "info": 1}
    SORTS = ("wave", "state", "agent", "recent")
    last_query = ""
    last_sort = "wave"
    summarised = 0.0

    def task_row(self, task: TaskView, styles: Mapping[str, str]) -> Row:
        state = task.shown_state
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
        if wave.awaiting_approval:
            note = "awaiting approval — press g"
        elif wave.cancelled:
            note = f"{wave.cancelled} cancelled"
        else:
            note = ""
        return (
            f"wave:{wave.job_id}:{wave.wave}",
            (Text(f"├ wave {wave.wave}", style="italic", end=""), "", "", "", note),
        )

    def build_rows(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> list[Row]:
        by_job: dict[str, list[TaskView]] = {}
        for task in snapshot.tasks.values():
            by_job.setdefault(task.job_id, []).append(task)
        waves = {(w.job_id, w.wave): w for w in snapshot.waves}
        grouped = self.sort == "wave"
        rows: list[Row] = []
        for job in snapshot.jobs:
            tasks = sorted(by_job.get(job.id, []), key=task_sort_key(self.sort))
            shown = [t for t in tasks if matches(t, query)] if query else tasks
            if query and not shown:
                continue
            rows.append(self.job_row(job, snapshot.job_progress.get(job.id, (0, 0)), styles))
            current = None
            for task in shown:
                if grouped and task.wave != current:
                    current = task.wave
                    wave = waves.get((job.id, task.wave))
                    if wave is not None:
                        rows.append(self.wave_row(wave))
                rows.append(self.task_row(task, styles))
        return rows

    def apply(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> None:
        """Patch the changed tasks in place; rebuild only when rows appear, vanish or move."""
        full = (
            query
            or query != self.last_query
            or self.sort != self.last_sort
            or (self.sort != "wave" and snapshot.changed_tasks)
            or snapshot.structure_changed
            or not self._order
        )
        self.last_query, self.last_sort = query, self.sort
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

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        """The whole note of the cursor row: what the Note column had to cut."""
        if key is None:
            return ""
        if key.startswith("job:"):
            job = snapshot.job(key[4:])
            if job is None:
                return ""
            return f"{job.id}: {job.title}" + (f" — {job.error}" if job.error else "")
        if key.startswith("wave:"):
            return ""
        task = snapshot.tasks.get(key)
        if task is None:
            return ""
        note = full_note(task)
        return f"{task.key}: {note}" if note else f"{task.key}: {task.title}"


def task_note(task: TaskView) -> str:
    return clip(full_note(task), NOTE_CHARS)


def full_note(task: TaskView) -> str:
    if task.state == "DRAFT" and task.blocked_by:
        return f"blocked by {task.blocked_by}"
    if task.state == "PARKED":
        until = f" until {clock_time(task.not_before)}" if task.not_before else ""
        return f"waiting on {task.waiting_on_provider or 'provider'}{until}"
    if task.state in ("FAILED", "CANCELLED"):
        return task.error or task.state.lower()
    if task.state == "RUNNING":
        return f"on {task.provider or '?'}"
    if task.state == "SUCCEEDED":
        return task.result_summary or ""
    if task.state == "DRAFT" and task.dependencies:
        return "after " + ", ".join(task.dependencies)
    return ""


def run_sort_key(sort: str) -> Any:
    if sort == "task":
        return lambda r: (r.task_key or f"{r.job_id}/~planner", r.execution_id)
    if sort == "agent":
        return lambda r: (r.agent or "", r.started_at or 0.0, r.execution_id)
    return lambda r: (r.started_at or 0.0, r.execution_id)


class RunningTable(SortableTable):
    COLUMNS = (
        ("task", "Task", 12),
        ("agent", "Agent", 8),
        ("elapsed", "Elapsed", 7),
        ("try", "Try", 3),
        ("output", "Last output", 8),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "agent": 1, "output": 3}
    SORTS = ("started", "task", "agent")

    def build_rows(self, snapshot: Snapshot, now: float) -> list[Row]:
        rows: list[Row] = []
        for run in sorted(snapshot.runs, key=run_sort_key(self.sort)):
            task = snapshot.tasks.get(run.task_key or "")
            tries = f"{run.attempt}/{task.max_attempts}" if task else str(run.attempt)
            elapsed = duration(now - run.started_at) if run.started_at else "starting"
            rows.append(
                (
                    run.execution_id,
                    (
                        run_label(run),
                        run.agent or "",
                        elapsed,
                        tries,
                        clip(run.last_output, NOTE_CHARS),
                    ),
                )
            )
        return rows

    def apply(self, snapshot: Snapshot, now: float) -> None:
        self.sync(self.build_rows(snapshot, now), keep_order=self.sort != "started")

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        run = snapshot.run(key)
        if run is None:
            return ""
        where = f"{run.agent or '?'} on {run.provider or '?'}"
        return f"{run_label(run)} · {where}: {run.last_output or 'no output yet'}"


def run_label(run: RunView) -> str:
    return run.task_key or f"{run.job_id} planner"


class ProvidersTable(LiveTable):
    """One row per provider; built so per-agent rows can be added under each provider."""

    COLUMNS = (
        ("provider", "Provider", 9),
        ("status", "Status", 9),
        ("reset", "Resets", 8),
        ("in", "In", 6),
        ("parked", "Parked", 6),
        ("running", "Run", 4),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"provider": 1, "status": 1}

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for provider in snapshot.providers:
            limited = provider.status == "limited"
            countdown = duration(provider.reset_at - now) if limited and provider.reset_at else ""
            status = f"{'‖' if limited else '●'} {provider.status}"
            rows.append(
                (
                    provider.provider,
                    (
                        provider.provider,
                        styled(status, provider.status, styles),
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

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        provider = snapshot.provider(key)
        if provider is None:
            return ""
        if provider.status == "limited":
            return f"{provider.provider}: {provider.source_text or 'limited'}"
        return f"{provider.provider}: ok"


class PlannerTable(LiveTable):
    COLUMNS = (
        ("what", "Round/wave", 10),
        ("status", "Status", 11),
        ("progress", "Progress", 14),
        ("notes", "Trigger · guidance", 8),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"status": 1, "progress": 1, "notes": 3}

    def build_rows(self, snapshot: Snapshot, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for job in snapshot.jobs:
            rows.append((f"job:{job.id}", (Text(job.id, style="bold", end=""), "", "", "")))
            for plan in (p for p in snapshot.plans if p.job_id == job.id):
                rows.append(plan_row(plan, styles))
            for wave in (w for w in snapshot.waves if w.job_id == job.id):
                rows.append(wave_progress_row(wave, styles))
        return rows

    def apply(self, snapshot: Snapshot, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        if key is None or not key.startswith("plan:"):
            return ""
        plan = next((p for p in snapshot.plans if f"plan:{p.id}" == key), None)
        if plan is None:
            return ""
        parts = [f"{plan.job_id} round {plan.round} ({plan.trigger})"]
        parts += [f"guidance “{plan.guidance}”"] if plan.guidance else []
        parts += [plan.error or plan.rejection or plan.assessment or ""]
        return ": ".join(p for p in parts if p)


def plan_row(plan: PlanView, styles: Mapping[str, str]) -> Row:
    note = plan.trigger + (f" · “{plan.guidance}”" if plan.guidance else "")
    objective = plan.objective_status or ""
    return (
        f"plan:{plan.id}",
        (
            f"├ round {plan.round}",
            styled(plan.status.lower(), plan.status, styles),
            objective.replace("_", " "),
            clip(note, NOTE_CHARS),
        ),
    )


def wave_progress_row(wave: WaveView, styles: Mapping[str, str]) -> Row:
    if wave.awaiting_approval:
        status, note = styled("gate", "PARKED", styles), "awaiting approval — press g"
    elif wave.done == wave.total:
        status, note = styled("done", "SUCCEEDED", styles), ""
    elif wave.failed:
        status, note = styled(f"{wave.failed} failed", "FAILED", styles), ""
    elif wave.running:
        status, note = styled(f"{wave.running} running", "RUNNING", styles), ""
    elif wave.cancelled:
        status, note = styled(f"{wave.cancelled} cancelled", "CANCELLED", styles), ""
    else:
        status, note = Text("pending", style="dim", end=""), ""
    if wave.cancelled and wave.done + wave.cancelled == wave.total:
        status = styled(f"done · {wave.cancelled} cancelled", "CANCELLED", styles)
    progress = f"{bar(wave.done, wave.total)} {wave.done}/{wave.total}"
    return (f"wave:{wave.job_id}:{wave.wave}", (f"├ wave {wave.wave}", status, progress, note))

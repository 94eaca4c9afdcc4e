"""The Jobs & tasks table: each job, its waves, and its tasks (troubleshooters under the
task they look into), filtered by ``/`` and sorted by ``s``.

Rows are patched in place: a snapshot names the tasks that changed, and only their rows
(and, at most once a second under load, the job and wave rows) are written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual.coordinate import Coordinate

from relay_engine.contracts.time_format import limit_words
from relay_engine.core.states import DONE_JOB_STATES, JobState, PullState, TaskState
from relay_engine.store.read_model.jobs import JobView
from relay_engine.store.read_model.spend import NO_SPEND, SpendView
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.snapshot import Snapshot, WaveView
from relay_tui.render.spend import budget_words, money, spend_line, spend_text
from relay_tui.render.styles import clip, clock_time, glyph, styled
from relay_tui.render.task_facts import held_line
from relay_tui.render.words import english
from relay_tui.widgets.live_table import NOTE_CHARS, Row, SortableTable

BUSY_CHANGES = 20
SUMMARY_SECONDS = 1.0
STATE_NAMES = frozenset({*TaskState, "BLOCKED"})
"""What the filter takes as a state (``failed``, ``state:parked``): a task's shown state."""
CONFLICTING = "CONFLICTING"
STATE_ORDER = {
    state: rank
    for rank, state in enumerate(
        ("FAILED", "RUNNING", "HELD", "PARKED", "QUEUED", "BLOCKED", "DRAFT", "SUCCEEDED",
         "CANCELLED", "DROPPED")
    )
}  # fmt: skip
FOLDED_JOB_STATES = frozenset({JobState.MERGED, JobState.SUCCEEDED, JobState.CLOSED,
                               JobState.CANCELLED})  # fmt: skip
"""Finished jobs shown as one line while ``f`` folds them (a failed job stays open)."""
VIEWS = {
    "running": "running tasks",
    "blocked": "blocked, parked and held tasks",
    "failed": "failed tasks",
    "waiting": "tasks waiting on you",
}
"""Saved views: ``:running`` in the filter (or the palette, or ``v``) shows only those."""


def in_view(task: TaskView, view: str, waiting: frozenset[str]) -> bool:
    state = task.shown_state
    if view == "running":
        return state == TaskState.RUNNING
    if view == "blocked":
        return state in ("BLOCKED", TaskState.PARKED, TaskState.HELD)
    if view == "failed":
        return state == TaskState.FAILED
    if view == "waiting":
        return task.key in waiting
    return False


def matches(task: TaskView, query: str, waiting: frozenset[str] = frozenset()) -> bool:
    """Every word must match: a view (``:failed``), a state name (or ``state:x``) or a
    substring of key/title/agent."""
    haystack = " ".join((task.key, task.title, task.agent or "", task.provider or "")).lower()
    for word in query.lower().split():
        name = word.removeprefix("state:")
        if word.startswith(":"):
            if not in_view(task, word[1:], waiting):
                return False
        elif name.upper() in STATE_NAMES:
            if task.shown_state != name.upper():
                return False
        elif word not in haystack:
            return False
    return True


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
        ("cost", "Spent", 7),
        ("info", "Note", 7),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "info": 1}
    OPTIONAL: ClassVar[Mapping[str, int]] = {"try": 70, "agent": 62}
    SORTS = ("wave", "state", "agent", "recent")
    SEPARATOR = "wave:"
    """Wave rows head their tasks; the cursor passes over them (no key acts on a wave)."""
    last_query = ""
    last_sort = "wave"
    last_fold = True
    summarised = 0.0
    fold_done = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now = 0.0
        self._latest: tuple[Snapshot, Mapping[str, str]] | None = None

    def task_row(self, task: TaskView, snapshot: Snapshot, styles: Mapping[str, str]) -> Row:
        state = task.shown_state
        label = task.task_id if task.title == task.task_id else f"{task.task_id} · {task.title}"
        branch = "│   ↳ " if task.parent_key else "│ "
        cell = Text.assemble((branch, "dim"), glyph(state, styles), label, end="")
        asks = snapshot.asks_of(task.key)
        note = task_note(task, snapshot, self.now)
        return (
            task.key,
            (
                cell,
                styled(state.lower(), state, styles),
                task.agent or "",
                f"{task.attempt}/{task.max_attempts}",
                dollars(snapshot.task_spend.get(task.key, NO_SPEND)),
                Text(note, style=styles.get("PARKED", ""), end="") if asks else note,
            ),
        )

    def job_row(
        self, job: JobView, snapshot: Snapshot, styles: Mapping[str, str], folded: bool = False
    ) -> Row:
        title = job.id if job.title == job.id else f"{job.id} · {job.title}"
        state = job.shown_state
        cell = glyph(state, styles)
        alarm = styles.get("FAILED", "") if job.budget_exhausted else ""
        cell.append(title, style=("" if folded else "bold ") + alarm)
        cost = Text(dollars(job.spend), end="")
        if job.budget.level in ("warning", "exhausted"):
            cost.stylize(styles.get("FAILED" if job.budget_exhausted else "PARKED", ""))
        progress = snapshot.job_progress.get(job.id, (0, 0))
        states = {j.id: j.state for j in snapshot.jobs}
        note = clip(job_note(job, progress, states), NOTE_CHARS)
        if folded:
            note = f"{note} · f shows its tasks" if note else "f shows its tasks"
        return (
            f"job:{job.id}",
            (
                cell,
                styled(state.lower(), state, styles),
                "",  # agents run tasks: "manual" here read as an agent of that name
                "",
                cost,
                Text(note, style=alarm or ("dim" if folded else ""), end=""),
            ),
        )

    @staticmethod
    def wave_row(wave: WaveView) -> Row:
        if wave.held:
            note = f"gate held: the assessment failed — relay approve {wave.job_id}"
        elif wave.awaiting_approval:
            note = "awaiting approval — press g"
        elif wave.cancelled or wave.dropped:
            ended = {"cancelled": wave.cancelled, "dropped": wave.dropped}
            note = ", ".join(f"{count} {word}" for word, count in ended.items() if count)
        else:
            note = ""
        return (
            f"wave:{wave.job_id}:{wave.wave}",
            (Text(f"├ wave {wave.wave}", style="italic dim", end=""), "", "", "", "", note),
        )

    def folded(self, job: JobView, query: str) -> bool:
        """A finished job is one line while ``f`` folds them, unless the cursor is on one
        of its tasks: work never vanishes from under the cursor."""
        if not self.fold_done or query or job.state not in FOLDED_JOB_STATES:
            return False
        cursor = self.cursor_key or ""
        return not cursor.startswith(f"{job.id}/")

    def build_rows(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> list[Row]:
        by_job: dict[str, list[TaskView]] = {}
        for task in snapshot.tasks.values():
            by_job.setdefault(task.job_id, []).append(task)
        waiting = frozenset(a.task_key for a in snapshot.asks if a.task_key)
        rows: list[Row] = []
        for job in snapshot.jobs:
            tasks = sorted(by_job.get(job.id, []), key=task_sort_key(self.current_sort))
            shown = [t for t in tasks if matches(t, query, waiting)] if query else tasks
            if query and not shown:
                continue
            folded = self.folded(job, query)
            rows.append(self.job_row(job, snapshot, styles, folded))
            if not folded:
                rows += self._task_rows(job, shown, snapshot, styles)
        return rows

    def _task_rows(
        self,
        job: JobView,
        shown: Sequence[TaskView],
        snapshot: Snapshot,
        styles: Mapping[str, str],
    ) -> list[Row]:
        waves = {(w.job_id, w.wave): w for w in snapshot.waves if w.job_id == job.id}
        grouped = self.current_sort == "wave"
        rows: list[Row] = []
        current = None
        for task in children_after_parents(shown):
            if grouped and task.wave != current and not task.parent_key:
                current = task.wave
                wave = waves.get((job.id, task.wave))
                if wave is not None:
                    rows.append(self.wave_row(wave))
            rows.append(self.task_row(task, snapshot, styles))
        return rows

    def apply(
        self, snapshot: Snapshot, query: str, styles: Mapping[str, str], now: float = 0.0
    ) -> None:
        """Patch the changed tasks in place; rebuild only when rows appear, vanish or move."""
        self.now = now
        full = (
            query
            or query != self.last_query
            or self.current_sort != self.last_sort
            or self.fold_done != self.last_fold
            or (self.current_sort != "wave" and snapshot.changed_tasks)
            or snapshot.structure_changed
            or not self._order
        )
        self.last_query, self.last_sort, self.last_fold = query, self.current_sort, self.fold_done
        self._latest = (snapshot, styles)
        if full:
            self.sync(self.build_rows(snapshot, query, styles), keep_order=True)
            return
        self.patch_lazily(
            (key, partial(self.latest_values, key))
            for key in snapshot.changed_tasks | frozenset(a.task_key or "" for a in snapshot.asks)
            if key in snapshot.tasks
        )
        moment = time.monotonic()
        if (
            len(snapshot.changed_tasks) > BUSY_CHANGES
            and moment - self.summarised < SUMMARY_SECONDS
        ):
            return  # under load, job and wave rows (always in view: a repaint) move once a second
        self.summarised = moment
        self.patch(
            self.job_row(job, snapshot, styles, self.folded(job, query)) for job in snapshot.jobs
        )
        self.patch(self.wave_row(wave) for wave in snapshot.waves)

    def latest_values(self, key: str) -> Sequence[Any] | None:
        """A row patched out of view, as the newest snapshot has it: a maker holding the
        snapshot of its own change kept every such snapshot alive (each with all its tasks
        and waits) until the row scrolled into view, which at 50,000 tasks was never."""
        if self._latest is None:
            return None
        snapshot, styles = self._latest
        task = snapshot.tasks.get(key)
        return self.task_row(task, snapshot, styles)[1] if task else None

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        """The whole note of the cursor row: what the Note column had to cut."""
        if key is None:
            return ""
        if key.startswith("job:"):
            job = snapshot.job(key[4:])
            return job_preview(job, snapshot) if job else ""
        if key.startswith("wave:"):
            return ""
        task = snapshot.tasks.get(key)
        if task is None:
            return ""
        note = full_note(task, snapshot, self.now)
        spent = snapshot.task_spend.get(key)
        cost = f" · spent {spend_line(spent)}" if spent and spend_text(spent) else ""
        return (f"{task.key}: {note}" if note else f"{task.key}: {task.title}") + cost

    # -- the cursor passes over wave rows ---------------------------------------------------
    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        key = self._order[new.row] if 0 <= new.row < len(self._order) else ""
        if not key.startswith(self.SEPARATOR):
            return
        step = -1 if new.row < old.row else 1
        for target in (new.row + step, new.row - step):
            if 0 <= target < len(self._order) and not self._order[target].startswith(
                self.SEPARATOR
            ):
                self.cursor_coordinate = Coordinate(target, new.column)
                return


def dollars(spend: SpendView) -> str:
    """Spend in one unit: dollars (``~`` estimated), ``?`` when only tokens are known (the
    preview gives them); tokens and dollars side by side read as one number."""
    if spend.cost_usd:
        return money(spend.cost_usd, spend.estimated)
    return "$?" if spend.tokens else ""


def children_after_parents(tasks: Sequence[TaskView]) -> list[TaskView]:
    """Each troubleshooter right under the task it looks into (when that task is shown)."""
    shown = {task.key for task in tasks}
    children: dict[str, list[TaskView]] = {}
    for task in tasks:
        if task.parent_key in shown:
            children.setdefault(task.parent_key or "", []).append(task)
    ordered: list[TaskView] = []
    for task in tasks:
        if task.parent_key in shown:
            continue
        ordered.append(task)
        ordered.extend(children.get(task.key, ()))
    return ordered


def job_note(job: JobView, progress: tuple[int, int], job_states: Mapping[str, str]) -> str:
    """Why the job waits, or where its pull request stands, or its progress."""
    done, total = progress
    gated = " · gated" if job.wave_gate == "operator" else ""
    if job.budget_exhausted:
        return f"{budget_words(job)} — b raises it"
    if job.state == JobState.BLOCKED:  # "task x failed; relay retry …": the cause, short
        return f"blocked: {(job.blocked_by or 'a task failed').partition('; ')[0]}"
    if job.state == JobState.DRAFT:
        if job.blocked_by:
            return f"blocked: {job.blocked_by}"
        pending = [name for name in job.after if job_states.get(name) not in DONE_JOB_STATES]
        return "waiting on " + ", ".join(pending or job.after)
    if job.pr is not None:
        return pr_note(job) + gated
    return f"{done}/{total} done" + gated


def pr_note(job: JobView) -> str:
    """``PR open 1a2b3c4 #12 · approved · CONFLICTING · <why it waits>``."""
    pr = job.pr
    if pr is None:
        return ""
    parts = [f"PR {pr.state.lower()} {(pr.head_sha or '')[:7]}".rstrip()]
    if pr.number:
        parts[0] += f" #{pr.number}"
    if job.review is not None and pr.state == PullState.OPEN:
        review = job.review
        verdict = "reviewing" if review.verdict is None else review.verdict
        parts.append(f"review {review.round}: {verdict}" + (" (stale)" if review.stale else ""))
    if pr.mergeable == CONFLICTING:
        parts.append(CONFLICTING)
    if pr.error:
        parts.append(f"error: {pr.error}")
    elif pr.note:
        parts.append(english(pr.note))
    return " · ".join(parts)


def job_preview(job: JobView, snapshot: Snapshot) -> str:
    states = {j.id: j.state for j in snapshot.jobs}
    note = job_note(job, snapshot.job_progress.get(job.id, (0, 0)), states)
    parts = [f"{job.id}: {job.title}", note]
    wait = snapshot.job_wait(job.id)
    if wait is not None:
        parts.append(f"waits for {wait.note()}")
    if job.error:
        parts.append(job.error)
    if job.spend.executions:
        parts.append(f"spent {spend_line(job.spend)}")
    if job.budget.level not in ("none", "exhausted"):
        parts.append(f"budget {budget_words(job)}")
    return " — ".join(p for p in parts if p)


def task_note(task: TaskView, snapshot: Snapshot, now: float) -> str:
    return clip(full_note(task, snapshot, now), NOTE_CHARS)


def full_note(task: TaskView, snapshot: Snapshot, now: float) -> str:
    """What the task waits on, or how it ended; an ask and a hold come first."""
    asks = snapshot.asks_of(task.key)
    if asks:
        more = f" (+{len(asks) - 1} more)" if len(asks) > 1 else ""
        return f"{asks[0].waiting}{more} — 6 answers"
    if task.state == TaskState.HELD:
        return held_line(task, now)
    if task.state == TaskState.DRAFT and task.blocked_by:
        return f"blocked by {task.blocked_by}"
    if task.state == TaskState.PARKED:
        return parked_words(task, snapshot, now)
    if task.state == TaskState.DROPPED:
        why = limit_words(task.error, now)
        return f"dropped: {why}" if why else "dropped: not needed, what needs it goes on"
    wait = snapshot.task_wait(task.key)
    if wait is not None:  # a wave gate, or a pin to an agent no live engine defines
        return f"waits for {wait.note()}"
    if task.state in (TaskState.FAILED, TaskState.CANCELLED):
        return limit_words(task.error, now) or task.state.lower()
    if task.state == TaskState.RUNNING:
        return f"on {task.provider or '?'}"
    if task.state == TaskState.SUCCEEDED:
        return task.result_summary or ""
    if task.state == TaskState.DRAFT and (task.dependencies or task.external_deps):
        return "after " + ", ".join((*task.dependencies, *task.external_deps))
    return ""


def parked_words(task: TaskView, snapshot: Snapshot, now: float) -> str:
    until = f" until {clock_time(task.not_before)}" if task.not_before else ""
    job = snapshot.job(task.job_id)
    if task.waiting_on_provider == "budget" and job is not None and job.budget_exhausted:
        return f"{budget_words(job)} — b raises it"
    if task.error:  # budgets and agent waits say why in the error
        return limit_words(task.error, now) + until
    return f"waiting on {task.waiting_on_provider or 'provider'}{until}"

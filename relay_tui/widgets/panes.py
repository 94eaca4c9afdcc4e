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

from relay_engine.store.read_model import (
    NO_SPEND,
    AgentRow,
    ExecutionView,
    JobView,
    PlanView,
    SpendView,
    TaskView,
)
from relay_tui.spend import money, spend_line, spend_text, tokens_text
from relay_tui.views import Snapshot, WaveView
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
TROUBLESHOOT = "troubleshoot"
CONFLICTING = "CONFLICTING"
JOB_DONE = frozenset({"MERGED", "SUCCEEDED"})
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
        ("cost", "Spent", 7),
        ("info", "Note", 7),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "info": 1}
    SORTS = ("wave", "state", "agent", "recent")
    last_query = ""
    last_sort = "wave"
    summarised = 0.0

    def task_row(self, task: TaskView, styles: Mapping[str, str], spend: SpendView) -> Row:
        state = task.shown_state
        label = task.task_id if task.title == task.task_id else f"{task.task_id} · {task.title}"
        branch = "│   ↳ " if task.parent_key else "│ "
        cell = Text.assemble((branch, "dim"), glyph(state, styles), label, end="")
        return (
            task.key,
            (
                cell,
                styled(state.lower(), state, styles),
                task.agent or "",
                f"{task.attempt}/{task.max_attempts}",
                spend_text(spend),
                task_note(task),
            ),
        )

    @staticmethod
    def job_row(
        job: JobView,
        progress: tuple[int, int],
        styles: Mapping[str, str],
        job_states: Mapping[str, str],
    ) -> Row:
        title = job.id if job.title == job.id else f"{job.id} · {job.title}"
        state = job.shown_state
        cell = glyph(state, styles)
        alarm = styles.get("FAILED", "") if job.budget_exhausted else ""
        cell.append(title, style=f"bold {alarm}".strip())
        cost = Text(spend_text(job.spend), end="")
        if job.budget.level in ("warning", "exhausted"):
            cost.stylize(styles.get("FAILED" if job.budget_exhausted else "PARKED", ""))
        note = clip(job_note(job, progress, job_states), NOTE_CHARS)
        return (
            f"job:{job.id}",
            (
                cell,
                styled(state.lower(), state, styles),
                job.mode,
                "",
                cost,
                Text(note, style=alarm, end="") if alarm else note,
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
            (Text(f"├ wave {wave.wave}", style="italic", end=""), "", "", "", "", note),
        )

    def build_rows(self, snapshot: Snapshot, query: str, styles: Mapping[str, str]) -> list[Row]:
        by_job: dict[str, list[TaskView]] = {}
        for task in snapshot.tasks.values():
            by_job.setdefault(task.job_id, []).append(task)
        waves = {(w.job_id, w.wave): w for w in snapshot.waves}
        grouped = self.sort == "wave"
        states = {job.id: job.state for job in snapshot.jobs}
        spend = snapshot.task_spend
        rows: list[Row] = []
        for job in snapshot.jobs:
            tasks = sorted(by_job.get(job.id, []), key=task_sort_key(self.sort))
            shown = [t for t in tasks if matches(t, query)] if query else tasks
            if query and not shown:
                continue
            rows.append(
                self.job_row(job, snapshot.job_progress.get(job.id, (0, 0)), styles, states)
            )
            current = None
            for task in children_after_parents(shown):
                if grouped and task.wave != current and not task.parent_key:
                    current = task.wave
                    wave = waves.get((job.id, task.wave))
                    if wave is not None:
                        rows.append(self.wave_row(wave))
                rows.append(self.task_row(task, styles, spend.get(task.key, NO_SPEND)))
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
        spend = snapshot.task_spend
        self.patch_lazily(
            (key, partial(self.task_values, snapshot.tasks[key], styles, spend.get(key, NO_SPEND)))
            for key in snapshot.changed_tasks
            if key in snapshot.tasks
        )
        now = time.monotonic()
        if len(snapshot.changed_tasks) > BUSY_CHANGES and now - self.summarised < SUMMARY_SECONDS:
            return  # under load, job and wave rows (always in view: a repaint) move once a second
        self.summarised = now
        progress = snapshot.job_progress
        states = {job.id: job.state for job in snapshot.jobs}
        self.patch(
            self.job_row(job, progress.get(job.id, (0, 0)), styles, states) for job in snapshot.jobs
        )
        self.patch(self.wave_row(wave) for wave in snapshot.waves)

    def task_values(
        self, task: TaskView, styles: Mapping[str, str], spend: SpendView
    ) -> Sequence[Any]:
        return self.task_row(task, styles, spend)[1]

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
        note = full_note(task)
        spent = snapshot.task_spend.get(key)
        cost = f" · spent {spend_line(spent)}" if spent and spend_text(spent) else ""
        return (f"{task.key}: {note}" if note else f"{task.key}: {task.title}") + cost


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
        return f"{job.budget.text} — b raises it"
    if job.state == "DRAFT":
        if job.blocked_by:
            return f"blocked: {job.blocked_by}"
        pending = [name for name in job.after if job_states.get(name) not in JOB_DONE]
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
    if job.review is not None and pr.state == "OPEN":
        review = job.review
        verdict = "reviewing" if review.verdict is None else review.verdict
        parts.append(f"review {review.round}: {verdict}" + (" (stale)" if review.stale else ""))
    if pr.mergeable == CONFLICTING:
        parts.append(CONFLICTING)
    if pr.error:
        parts.append(f"error: {pr.error}")
    elif pr.note:
        parts.append(pr.note)
    return " · ".join(parts)


def job_preview(job: JobView, snapshot: Snapshot) -> str:
    states = {j.id: j.state for j in snapshot.jobs}
    note = job_note(job, snapshot.job_progress.get(job.id, (0, 0)), states)
    parts = [f"{job.id}: {job.title}", note]
    if job.error:
        parts.append(job.error)
    if job.spend.executions:
        parts.append(f"spent {spend_line(job.spend)}")
    if job.budget.level not in ("none", "exhausted"):
        parts.append(f"budget {job.budget.text}")
    return " — ".join(p for p in parts if p)


def task_note(task: TaskView) -> str:
    return clip(full_note(task), NOTE_CHARS)


def full_note(task: TaskView) -> str:
    if task.state == "DRAFT" and task.blocked_by:
        return f"blocked by {task.blocked_by}"
    if task.state == "PARKED":
        until = f" until {clock_time(task.not_before)}" if task.not_before else ""
        if task.error:  # budgets and agent waits say why in the error
            return task.error + until
        return f"waiting on {task.waiting_on_provider or 'provider'}{until}"
    if task.state in ("FAILED", "CANCELLED"):
        return task.error or task.state.lower()
    if task.state == "RUNNING":
        return f"on {task.provider or '?'}"
    if task.state == "SUCCEEDED":
        return task.result_summary or ""
    if task.state == "DRAFT" and (task.dependencies or task.external_deps):
        return "after " + ", ".join((*task.dependencies, *task.external_deps))
    return ""


def run_sort_key(sort: str) -> Any:
    if sort == "task":
        return lambda r: (r.task_key or f"{r.job_id}/~planner", r.id)
    if sort == "agent":
        return lambda r: (r.agent or "", r.started_at or 0.0, r.id)
    return lambda r: (r.started_at or 0.0, r.id)


class RunningTable(SortableTable):
    COLUMNS = (
        ("task", "Task", 12),
        ("agent", "Agent", 8),
        ("elapsed", "Elapsed", 7),
        ("try", "Try", 3),
        ("cost", "Spent", 7),
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
                    run.id,
                    (
                        run_label(run),
                        run.agent or "",
                        elapsed,
                        tries,
                        run_cost(run, snapshot),
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
        return f"{run_label(run)} · {where} · {run_spend_words(run, snapshot)}: {run.last_output or 'no output yet'}"


def run_label(run: ExecutionView) -> str:
    return run.task_key or f"{run.job_id} planner"


def task_spend_before(run: ExecutionView, snapshot: Snapshot) -> SpendView:
    """What the run's task spent so far (earlier runs; this one counts once it reports)."""
    return snapshot.task_spend.get(run.task_key or "", NO_SPEND)


def run_cost(run: ExecutionView, snapshot: Snapshot) -> str:
    """The task's spend so far; this run's tokens while its cost is not known yet."""
    spent = task_spend_before(run, snapshot)
    if spent.cost_usd:
        return money(spent.cost_usd, spent.estimated)
    if run.spend.tokens:
        return f"{tokens_text(run.spend.tokens)} tok"
    return spend_text(spent)


def run_spend_words(run: ExecutionView, snapshot: Snapshot) -> str:
    spent = task_spend_before(run, snapshot)
    task = f"task spent {spend_text(spent)}" if spend_text(spent) else "task spent nothing yet"
    if run.spend.cost_usd:
        return f"{task}, this run {money(run.spend.cost_usd, run.spend.estimated)}"
    return f"{task}; this run's cost is known at its end"


AGENT_ROW = "agent:"
AGENT_OK = frozenset({"ready"})
AGENT_WAITING = frozenset({"limited", "unreachable", "budget"})


def agent_style(status: str, styles: Mapping[str, str]) -> str:
    """Ready green; waits that end on their own yellow; what needs the operator red."""
    if status in AGENT_OK:
        return styles.get("ok", "")
    if status in AGENT_WAITING:
        return styles.get("limited", "")
    return styles.get("FAILED", "")


class ProvidersTable(LiveTable):
    """One row per provider, and under it one row per agent with its availability."""

    COLUMNS = (
        ("provider", "Provider/agent", 12),
        ("status", "Status", 14),
        ("reset", "Resets", 6),
        ("in", "In", 5),
        ("parked", "Wait", 4),
        ("running", "Run", 3),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"provider": 1, "status": 3}

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        agents: dict[str, list[AgentRow]] = {}
        for agent in snapshot.agent_rows:
            agents.setdefault(agent.provider, []).append(agent)
        for provider in snapshot.providers:
            limited = provider.status == "limited"
            countdown = duration(provider.reset_at - now) if limited and provider.reset_at else ""
            status = f"{'‖' if limited else '●'} {provider.status}"
            rows.append(
                (
                    provider.provider,
                    (
                        Text(provider.provider, style="bold", end=""),
                        styled(status, provider.status, styles),
                        clock_time(provider.reset_at)[:5] if limited else "",
                        countdown,
                        str(provider.parked),
                        str(provider.running),
                    ),
                )
            )
            rows += [agent_row(a, snapshot, now, styles) for a in agents.pop(provider.provider, [])]
        for rest in agents.values():  # agents of a provider nobody has used yet
            rows += [agent_row(a, snapshot, now, styles) for a in rest]
        return rows

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, now, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        if key is not None and key.startswith(AGENT_ROW):
            agent = snapshot.agent_row(key.removeprefix(AGENT_ROW))
            return agent_preview(agent) if agent else ""
        provider = snapshot.provider(key)
        if provider is None:
            return ""
        if provider.status == "limited":
            return f"{provider.provider}: {provider.source_text or 'limited'}"
        return f"{provider.provider}: ok"


def agent_row(agent: AgentRow, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> Row:
    waiting = (
        sum(
            1
            for t in snapshot.tasks.values()
            if t.state == "PARKED" and t.waiting_on_provider == agent.id
        )
        if agent.status not in AGENT_OK
        else 0
    )
    running = sum(1 for run in snapshot.runs if run.agent == agent.id)
    name = agent.id + ("" if agent.enabled else " (disabled)")
    until = agent.until if agent.status != "ready" else None
    return (
        f"{AGENT_ROW}{agent.id}",
        (
            Text.assemble(("└ ", "dim"), name, end=""),
            Text(agent.summary, style=agent_style(agent.status, styles), end=""),
            clock_time(until)[:5] if until else "",
            duration(until - now) if until and until > now else "",
            str(waiting) if waiting else "",
            str(running),
        ),
    )


def agent_preview(agent: AgentRow) -> str:
    """The fix first: it is what the operator came to this row for."""
    if agent.status == "ready":
        return f"{agent.id} ({agent.provider}): ready"
    fix = f"fix: {agent.fix}" if agent.fix else "no fix needed"
    reason = f" — {agent.reason}" if agent.reason else ""
    return f"{agent.id}: {fix}{reason}"


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

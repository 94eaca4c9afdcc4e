"""The Running agents table: one row per live execution (planner rounds too), with its
elapsed time, its task's spend and its last output line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from relay_engine.store.read_model import NO_SPEND, ExecutionView, SpendView
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.spend import money, spend_text, tokens_text
from relay_tui.render.styles import clip, duration
from relay_tui.widgets.live_table import NOTE_CHARS, Row, SortableTable


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

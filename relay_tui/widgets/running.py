"""The Running agents table: one row per live execution (planner rounds too): what the agent
is doing now, its tokens and cost so far, how long it has been silent, and its elapsed time
against its timeout.

A run whose engine is gone is not shown as alive: its clock stops at the engine's last
heartbeat and the row says the engine is gone (its lease runs out, then another engine
recovers the task).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from rich.text import Text

from relay_engine.contracts.time_format import duration, limit_words
from relay_engine.store.read_model.executions import ExecutionView
from relay_tui.data.progress import RunProgress
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.spend import money, tokens_text
from relay_tui.render.styles import clip, short_duration
from relay_tui.widgets.live_table import NOTE_CHARS, Row, SortableTable

IDLE_WARN_S = 120.0
"""Silent this long, an agent's idle time is shown as a warning."""
NO_PROGRESS = RunProgress()


def run_sort_key(sort: str) -> Any:
    if sort == "task":
        return lambda r: (r.task_key or f"{r.job_id}/~planner", r.id)
    if sort == "agent":
        return lambda r: (r.agent or "", r.started_at or 0.0, r.id)
    return lambda r: (r.started_at or 0.0, r.id)


class RunningTable(SortableTable):
    COLUMNS = (
        ("task", "Task", 10),
        ("agent", "Agent", 8),
        ("step", "Doing now", 10),
        ("tokens", "Tok", 5),
        ("cost", "Cost", 7),
        ("idle", "Idle", 4),
        ("elapsed", "Elapsed", 10),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "step": 4}
    OPTIONAL: ClassVar[Mapping[str, int]] = {"agent": 96, "tokens": 74, "idle": 64, "cost": 56}
    SORTS = ("started", "task", "agent")

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for run in sorted(snapshot.runs, key=run_sort_key(self.current_sort)):
            progress = snapshot.progress.get(run.id, NO_PROGRESS)
            asks = [a for a in snapshot.asks if a.execution_id == run.id]
            if asks:  # what it does now is wait: say on what
                progress = replace(progress, step=f"⚑ {asks[0].waiting}")
            rows.append((run.id, run_cells(run, progress, now, styles)))
        return rows

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, now, styles), keep_order=self.current_sort != "started")

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        run = snapshot.run(key)
        if run is None:
            return ""
        progress = snapshot.progress.get(run.id, NO_PROGRESS)
        where = f"{run.agent or '?'} on {run.provider or '?'}"
        doing = limit_words(progress.step or run.last_output) or "no output yet"
        spent = spend_words(progress)
        if progress.engine_gone_at is not None:
            return f"{run_label(run)} · {where} · its engine is gone: {doing}"
        return f"{run_label(run)} · {where} · {spent} · {doing}"


def run_label(run: ExecutionView) -> str:
    return run.task_key or f"{run.job_id} planner"


def run_cells(
    run: ExecutionView, progress: RunProgress, now: float, styles: Mapping[str, str]
) -> tuple[Any, ...]:
    gone_at = progress.engine_gone_at
    if gone_at is not None:  # the clock stops where the engine was last heard from
        alarm = styles.get("FAILED", "")
        stopped = duration(gone_at - run.started_at) if run.started_at else "—"
        gone = Text(f"engine gone {short_duration(now - gone_at)} ago", style=alarm, end="")
        return (run_label(run), run.agent or "", gone, "", "", "", Text(stopped, style="dim"))
    said = limit_words(clip(progress.step or run.last_output, NOTE_CHARS), now)
    step: Text | str = said
    if said.startswith("⚑"):
        step = Text(said, style=styles.get("PARKED", ""), end="")
    return (
        run_label(run),
        run.agent or "",
        step or Text("starting…", style="dim", end=""),
        tokens_text(progress.tokens) if progress.tokens else "—",
        money(progress.cost_usd, progress.estimated) if progress.cost_usd else "—",
        idle_cell(progress, now, styles),
        elapsed_cell(run, progress, now, styles),
    )


def idle_cell(progress: RunProgress, now: float, styles: Mapping[str, str]) -> Text | str:
    if progress.last_output_at is None:
        return "—"
    idle = max(0.0, now - progress.last_output_at)
    style = styles.get("PARKED", "") if idle >= IDLE_WARN_S else "dim"
    return Text(short_duration(idle), style=style, end="")


def elapsed_cell(
    run: ExecutionView, progress: RunProgress, now: float, styles: Mapping[str, str]
) -> Text | str:
    """``12:03/30m``: red once past 80% of the timeout."""
    if not run.started_at:
        return Text("starting", style="dim", end="")
    elapsed = now - run.started_at
    if not progress.timeout_s:
        return duration(elapsed)
    late = elapsed >= 0.8 * progress.timeout_s
    text = f"{duration(elapsed)}/{short_duration(progress.timeout_s)}"
    return Text(text, style=styles.get("FAILED", "") if late else "", end="")


def spend_words(progress: RunProgress) -> str:
    if progress.tokens is None:
        return "no tokens reported yet"
    cost = f", {money(progress.cost_usd, progress.estimated)}" if progress.cost_usd else ""
    return f"{tokens_text(progress.input_tokens or 0)} in / {tokens_text(progress.output_tokens or 0)} out{cost} so far"

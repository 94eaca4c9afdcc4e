"""The task detail's facts as text: its summary line, its failure and where to read more,
and the lines of its parsed output stream.

Views in, Rich Text out: the read model's view types (and the waits it reads) are its only
engine imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from relay_engine.core.waits import Wait
from relay_engine.store.read_model.executions import ExecutionView
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.stream import StreamItem
from relay_tui.render.styles import clock_time, short_duration, styled

ITEM_STYLES = {
    "message": ("", ""),
    "thinking": ("… ", "dim italic"),
    "tool": ("⚙ ", "cyan"),
    "file": ("✎ ", "green"),
    "error": ("✘ ", "bold red"),
    "result": ("✔ ", "bold"),
    "session": ("· ", "dim"),
    "text": ("", ""),
}


def item_line(item: StreamItem) -> Text:
    """A glyph and a colour per kind, so tool calls, edits and errors stand out from prose."""
    prefix, style = ITEM_STYLES.get(item.kind, ("", ""))
    text = Text(end="")
    if prefix:
        text.append(prefix, style=style or "")
    text.append(item.text, style=style if item.kind != "message" else "")
    return text


def held_line(task: TaskView, now: float | None) -> str:
    """``held by ana@laptop since 08:48 (12m) — T hands it back``."""
    since = ""
    if task.held_at:
        ago = f" ({short_duration(now - task.held_at)})" if now is not None else ""
        since = f" since {clock_time(task.held_at)[:5]}{ago}"
    return f"held by {task.held_by or 'an operator'}{since} — T hands it back"


def failure_text(task: TaskView, executions: Sequence[ExecutionView]) -> Text:
    """The task's error and, when its last attempt failed, the folder to read: prompt.md,
    the output, and error.txt for a start that failed before the agent ran."""
    text = Text(task.error or "—")
    latest = executions[0] if executions else None
    if task.error and latest is not None and latest.artifact_dir and _failed(latest):
        text.append(f"\nartifacts: {latest.artifact_dir}", style="dim")
    return text


def _failed(execution: ExecutionView) -> bool:
    return bool(execution.ended_at) and execution.outcome not in (None, "succeeded")


def summary(
    task: TaskView,
    diffstat: str | None,
    styles: Mapping[str, str],
    now: float | None = None,
    wait: Wait | None = None,
) -> Text:
    """State, tries, wave and role; who holds it; the agent; what it waits for; when it
    ran; its diffstat."""
    state = task.shown_state
    text = Text()
    text.append_text(styled(state.lower(), state, styles))
    text.append(f" · try {task.attempt}/{task.max_attempts} · wave {task.wave} · role {task.role}")
    if task.state == "HELD":
        text.append(f"\n{held_line(task, now)}", style=styles.get("HELD", "bold"))
    if task.agent:
        text.append(f"\nagent {task.agent} on {task.provider or '?'}")
    if task.dependencies:
        text.append("\ndepends on " + ", ".join(task.dependencies))
    if task.blocked_by:
        text.append(f"\nblocked by {task.blocked_by}")
    if wait is not None:  # what it waits for, until when, and what releases it
        text.append(f"\nwaits for {wait.note()}", style=styles.get("PARKED", ""))
    elif task.waiting_on_provider:
        text.append(f"\nwaiting on {task.waiting_on_provider} until {clock_time(task.not_before)}")
    if task.started_at:
        ended = clock_time(task.finished_at) if task.finished_at else "now"
        text.append(f"\nran {clock_time(task.started_at)} → {ended}")
    if diffstat:
        text.append(f"\n{diffstat.strip().splitlines()[-1]}")
    return text

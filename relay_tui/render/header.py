"""The two lines around the panes: fleet health on top, the key's target at the bottom."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from relay_engine.core.states import TaskState
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.styles import duration


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def fleet_line(
    mode: str, snapshot: Snapshot | None, capacity: int, styles: Mapping[str, str]
) -> Text:
    """Engines alive (and their freshest heartbeat), engines gone silent, agents, limited
    providers, commands."""
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append("relay", style="bold")
    text.append(f" · {mode}")
    if snapshot is None:
        text.append(" · loading…")
        return text
    fleet = snapshot.fleet
    if fleet.engines_alive == 0:
        text.append(" · ")
        waiting = plural(fleet.commands_waiting, "command")
        text.append(f"engine: none running — {waiting} waiting", style=styles.get("FAILED", ""))
    else:
        age = duration(fleet.heartbeat_age) if fleet.heartbeat_age is not None else "?"
        text.append(f" · {plural(fleet.engines_alive, 'engine')} alive (hb {age})")
    if fleet.engines_gone:
        text.append(f" · {fleet.engines_gone} gone", style=styles.get("FAILED", ""))
    limited = sum(1 for p in snapshot.providers if p.status == "limited")
    slots = capacity * max(1, fleet.engines_alive)
    working = sum(1 for run in snapshot.runs if run.task_key)  # planners use no slot
    text.append(f" · agents {working}/{slots}")
    text.append(" · ")
    text.append(
        f"{limited} limited" if limited else "providers ok",
        style=styles.get("PARKED", "") if limited else "",
    )
    if fleet.engines_alive:
        text.append(f" · {plural(fleet.commands_waiting, 'command')} waiting")
    return text


def status_line(
    target: str,
    snapshot: Snapshot | None,
    *,
    task_query: str = "",
    event_query: str = "",
    sort: str | None = None,
) -> Text:
    """``▶ target`` first (the label of the row the next key acts on); then the counts and
    active filters."""
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append("▶ ", style="bold")
    text.append(target or "nothing selected", style="bold" if target else "dim")
    if snapshot is not None:
        counts = snapshot.state_counts
        text.append(f"  ·  {plural(len(snapshot.jobs), 'job')} · {len(snapshot.runs)} running")
        parked, failed = counts.get(TaskState.PARKED, 0), counts.get(TaskState.FAILED, 0)
        text.append(f" · {parked} parked · {failed} failed")
        blocked = counts.get("BLOCKED", 0)
        if blocked:
            text.append(f" · {blocked} blocked")
    if task_query:
        text.append(f"  ·  filter: {task_query}", style="italic")
    if event_query:
        text.append(f"  ·  events: {event_query}", style="italic")
    if sort:
        text.append(f"  ·  sort: {sort}", style="italic")
    return text

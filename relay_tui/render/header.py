"""The two lines around the panes: the fleet's answers on top, the key's target at the bottom.

The top line answers what an operator looks up first: is an engine running (and did one
go silent), what waits on me, are agents working, when does the next limit reset, why is
work stuck, what did today cost. It is fitted to the width by rank: at 80 columns the
long forms give way to short ones and the least urgent facts go, but an engine that is
gone, commands waiting and asks waiting are never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from relay_engine.contracts.time_format import duration
from relay_engine.core.states import TaskState
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.spend import money
from relay_tui.render.styles import clock_time, short_duration

SEPARATOR = " · "


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


@dataclass(frozen=True)
class Part:
    """One fact of the header: its forms from longest to shortest ("" drops it) and its
    rank (higher gives way first)."""

    forms: tuple[str, ...]
    rank: int
    style: str = ""


def fit_parts(parts: Sequence[Part], width: int) -> Text:
    """From the highest rank down: shorten that rank's parts, then drop them, until the
    line fits; what ranks lowest is only shortened once everything else gave way."""
    chosen = [0] * len(parts)

    def length() -> int:
        shown = [p.forms[i] for p, i in zip(parts, chosen, strict=True) if p.forms[i]]
        return sum(len(f) for f in shown) + len(SEPARATOR) * max(0, len(shown) - 1)

    for rank in sorted({p.rank for p in parts}, reverse=True):
        indexes = [i for i, p in enumerate(parts) if p.rank == rank]
        for dropping in (False, True):
            for i in reversed(indexes):
                while length() > width and chosen[i] < len(parts[i].forms) - 1:
                    if not dropping and not parts[i].forms[chosen[i] + 1]:
                        break
                    chosen[i] += 1
        if length() <= width:
            break
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    for part, index in zip(parts, chosen, strict=True):
        form = part.forms[index]
        if not form:
            continue
        if text.plain:
            text.append(SEPARATOR)
        text.append(form, style=part.style or ("bold" if form == "relay" else ""))
    return text


def fleet_line(
    mode: str,
    snapshot: Snapshot | None,
    capacity: int,
    styles: Mapping[str, str],
    *,
    now: float,
    width: int = 200,
    lines: int = 1,
) -> Text:
    """The header: see the module's docstring for what it says and in which order. With
    two ``lines``, the fleet on the first and the work (what is stuck and why, the next
    reset, today's spend) on the second."""
    if snapshot is None:
        return fit_parts([Part(("relay",), 0), Part((mode,), 1), Part(("loading…",), 2)], width)
    alarm, warn = styles.get("FAILED", ""), styles.get("PARKED", "")
    parts = [Part(("relay",), 0), Part((mode, mode.partition(" · ")[0], ""), 3)]
    parts += engine_parts(snapshot, alarm)
    if snapshot.asks:
        count = len(snapshot.asks)
        parts.append(Part((f"⚑ {count} waiting on you (6)", f"⚑ {count} on you"), 0, warn))
    parts += agents_parts(snapshot, capacity, alarm)
    work = stuck_parts(snapshot, warn, alarm)
    reset = next_reset(snapshot, now)
    if reset:
        work.append(Part(reset, 4, warn))
    if snapshot.spend_today.cost_usd or snapshot.spend_today.executions:
        spend = snapshot.spend_today
        cost = money(spend.cost_usd, spend.estimated)
        work.append(Part((f"{cost} today", cost, ""), 4))
    if lines < 2:
        return fit_parts([*parts, *work], width)
    second = fit_parts(
        [Part(("work",), 0), *work] if work else [Part(("work: nothing stuck",), 0)], width
    )
    return Text("\n", end="").join([fit_parts(parts, width), second])


def engine_parts(snapshot: Snapshot, alarm: str) -> list[Part]:
    """Engines alive (asleep, when the fleet has no work, and their freshest heartbeat),
    gone ones, commands nobody applied."""
    fleet = snapshot.fleet
    parts = []
    if fleet.engines_alive == 0:
        parts.append(Part(("engine: none running", "no engine"), 0, alarm))
    else:
        age = duration(fleet.heartbeat_age) if fleet.heartbeat_age is not None else "?"
        alive = f"{plural(fleet.engines_alive, 'engine')} alive"
        if fleet.engines_asleep:  # its heartbeat ages up to a whole interval: not a hang
            some = "" if fleet.engines_asleep == fleet.engines_alive else f" {fleet.engines_asleep}"
            alive += f",{some} asleep"
        forms = (f"{alive} (hb {age})", alive, plural(fleet.engines_alive, "engine"), "")
        parts.append(Part(forms, 3))
    if fleet.engines_gone:
        gone = plural(fleet.engines_gone, "engine")
        parts.append(Part((f"{gone} gone", f"{fleet.engines_gone} gone"), 0, alarm))
    waiting = fleet.commands_waiting
    words = plural(waiting, "command")
    if waiting:
        style = alarm if fleet.engines_alive == 0 else ""
        parts.append(Part((f"{words} waiting", f"{waiting} cmd waiting"), 1, style))
    elif fleet.engines_alive == 0:  # nothing waits, but a command sent now would
        parts.append(Part((f"{words} waiting", "0 cmd", ""), 3))
    return parts


def agents_parts(snapshot: Snapshot, capacity: int, alarm: str) -> list[Part]:
    """Agents working against the live engines' slots, and runs lost with their engine."""
    fleet = snapshot.fleet
    tasks = [run for run in snapshot.runs if run.task_key]  # planners use no slot
    lost = sum(1 for run in tasks if not snapshot.run_alive(run))
    parts = []
    if lost:
        whose = "its engine" if lost == 1 else "their engines"
        words = f"{plural(lost, 'agent')} lost with {whose}"
        parts.append(Part((words, f"{lost} lost"), 1, alarm))
    if fleet.engines_alive:
        slots = fleet.slots if fleet.slots is not None else capacity * fleet.engines_alive
        working = len(tasks) - lost
        parts.append(Part((f"agents {working}/{slots}", f"{working}/{slots} agents", ""), 2))
    return parts


def stuck_parts(snapshot: Snapshot, warn: str, alarm: str) -> list[Part]:
    """Failed, blocked, parked and held tasks, each with the reason most of them share."""
    counts = snapshot.state_counts
    failed = counts.get(TaskState.FAILED, 0)
    parts = [Part((f"{failed} failed", ""), 3, alarm)] if failed else []
    reasons = snapshot.stuck_reasons
    for state, style in (("BLOCKED", alarm), ("PARKED", warn), ("HELD", "")):
        count = counts.get(state, 0)
        if not count:
            continue
        word = state.lower()
        why = reasons.get(state)
        long = f"{count} {word}: {why}" if why else f"{count} {word}"
        parts.append(Part((long, f"{count} {word}", ""), 3, style))
    return parts


def next_reset(snapshot: Snapshot, now: float) -> tuple[str, ...] | None:
    """The limit that resets first: ``claude resets 09:23 (in 23:00)``."""
    limited = [p for p in snapshot.providers if p.status == "limited" and p.reset_at]
    if not limited:
        return None
    first = min(limited, key=lambda p: p.reset_at or 0.0)
    at = first.reset_at or now
    left = short_duration(at - now) if at > now else "now"
    more = f" (+{len(limited) - 1})" if len(limited) > 1 else ""
    return (
        f"{first.provider} resets {clock_time(at)[:5]} (in {left}){more}",
        f"{first.provider} reset in {left}",
        f"reset {left}",
        "",
    )


def status_line(
    target: str,
    snapshot: Snapshot | None,
    *,
    task_query: str = "",
    event_query: str = "",
    sort: str | None = None,
    pane: str = "",
) -> Text:
    """``▶ target`` first (the label of the row the next key acts on); then the counts and
    active filters. With no target it names the empty pane that has the focus, which is
    why ``j`` moves nothing."""
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append("▶ ", style="bold")
    idle = f"nothing selected: {pane} is empty" if pane else "nothing selected"
    text.append(target or idle, style="bold" if target else "dim")
    if task_query:
        text.append(f"  ·  filter: {task_query}", style="italic")
    if event_query:
        text.append(f"  ·  events: {event_query}", style="italic")
    if sort:
        text.append(f"  ·  sort: {sort}", style="italic")
    if snapshot is not None:
        running = sum(1 for run in snapshot.runs if snapshot.run_alive(run))
        text.append(f"  ·  {plural(len(snapshot.jobs), 'job')} · {running} running", style="dim")
    return text

"""Event lines: bursts of one cause coalesced into one entry, and each entry as text.

One cancel blocks twenty dependents in one transaction; the feed then holds twenty
``task.blocked`` events of the same instant, which pushed everything else out of view. They
become one entry ("cancelled search/fixtures → 20 tasks blocked: e2e, api, …") that still
knows each event, so ``enter`` can open the job (or the task, when there is one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from relay_engine.contracts.time_format import limit_words
from relay_tui.data.snapshot import EventView
from relay_tui.render.styles import clip, clock_time
from relay_tui.render.words import english

BURST_SECONDS = 2.0
"""Events of one kind and job this close to the first of a run are one burst."""
KIND_WIDTH = 18
NAMES_SHOWN = 6
KEPT_PER_BURST = 100
"""Events a burst keeps (for its preview and search); the rest are only counted."""
LEVELS = ("info", "warning", "error")
LEVEL_FILTERS = ("all", "warning", "error")
"""What ``l`` cycles through: every event, warnings and errors, errors only."""


@dataclass(frozen=True, slots=True)
class EventEntry:
    """One line of the event list: one event, or a burst of one kind in one job."""

    events: tuple[EventView, ...]
    """The first :data:`KEPT_PER_BURST` events of the burst: a burst of 50,000 kept every
    one, each line of the list holding the events it stood for."""
    count: int
    """Events in the burst, kept or not: what its line counts."""
    level: str
    """The worst level among all of them, kept or not."""
    newest: EventView
    """The burst's latest event (kept or not): the next one must be about another task."""
    cause: EventView | None = None
    """The event just before a burst, at the same instant (the cancel that blocked them)."""

    @property
    def key(self) -> str:
        return f"ev:{self.events[0].id}"

    @property
    def first(self) -> EventView:
        return self.events[0]

    @property
    def job_id(self) -> str | None:
        return self.first.job_id

    @property
    def task_key(self) -> str | None:
        """The task a single event (or a burst of one task's events) is about."""
        keys = {e.task_key for e in self.events}
        return self.first.task_key if len(keys) == 1 else None

    def joins(self, event: EventView) -> bool:
        """Whether ``event`` belongs to this burst: same kind and job, tasks, one instant."""
        first = self.first
        return (
            event.kind == first.kind
            and event.job_id == first.job_id
            and event.task_key is not None
            and first.task_key is not None
            and event.task_key != self.newest.task_key
            and abs(event.at - first.at) <= BURST_SECONDS
        )

    def grown(self, event: EventView, cause: EventView | None) -> EventEntry:
        """The burst with ``event`` in it: counted always, kept while there is room."""
        kept = self.events if len(self.events) >= KEPT_PER_BURST else (*self.events, event)
        level = max(self.level, event.level, key=level_rank)
        return EventEntry(kept, self.count + 1, level, event, cause)


def single(event: EventView) -> EventEntry:
    return EventEntry((event,), 1, event.level, event)


def level_rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else 0


def shown_at_level(entry: EventEntry, level_filter: str) -> bool:
    return level_filter == "all" or level_rank(entry.level) >= level_rank(level_filter)


def coalesce(
    last: EventEntry | None, before_last: EventEntry | None, events: Iterable[EventView]
) -> tuple[EventEntry | None, list[EventEntry]]:
    """Fold ``events`` onto the newest entry: the entry that replaces ``last`` (None when
    ``last`` is unchanged) and the entries after it."""
    replaced: EventEntry | None = None
    entries: list[EventEntry] = []
    current, previous = last, before_last
    for event in events:
        if current is not None and current.joins(event):
            cause = current.cause if current.count > 1 else _cause(previous, current)
            current = current.grown(event, cause)
            if entries:
                entries[-1] = current
            else:
                replaced = current
            continue
        previous, current = current, single(event)
        entries.append(current)
    return replaced, entries


def _cause(previous: EventEntry | None, burst: EventEntry) -> EventView | None:
    if previous is None or previous.count != 1:
        return None
    event = previous.first
    close = abs(event.at - burst.first.at) <= BURST_SECONDS
    return event if close and event.kind != burst.first.kind else None


def entry_matches(entry: EventEntry, query: str) -> bool:
    if not query:
        return True
    haystack = " ".join(f"{e.kind} {e.message} {e.task_key or ''}" for e in entry.events)
    return all(word in haystack.lower() for word in query.lower().split())


def entry_text(
    entry: EventEntry, styles: Mapping[str, str], highlight: str = "", now: float | None = None
) -> Text:
    """Time and kind in fixed-width columns, then the message; info kinds are dim so that
    problems stand out."""
    level_state = {"error": "FAILED", "warning": "PARKED"}.get(entry.level, "DRAFT")
    line = Text(end="")
    line.append(clock_time(entry.first.at) + " ", style="dim")
    kind = clip(entry.first.kind, KIND_WIDTH)
    line.append(kind.ljust(KIND_WIDTH) + " ", style=styles.get(level_state, ""))
    line.append(english(limit_words(burst_message(entry), now)))
    for word in highlight.split():
        line.highlight_words([word], style="reverse", case_sensitive=False)
    return line


def burst_message(entry: EventEntry) -> str:
    if entry.count == 1:
        return entry.first.message
    verb = entry.first.kind.rpartition(".")[2].replace("_", " ")
    names = task_names(entry.events, entry.count)
    text = f"{entry.count} tasks {verb}: {names}"
    cause = entry.cause
    if cause is not None:
        what = cause.task_key or cause.job_id or ""
        text = f"{cause.kind.rpartition('.')[2].replace('_', ' ')} {what} → {text}".strip()
    elif entry.job_id:
        text = f"{entry.job_id}: {text}"
    return text


def task_names(events: Sequence[EventView], total: int | None = None) -> str:
    """The first few task names, and how many more (``total`` counts the unkept too)."""
    names = [(e.task_key or "").partition("/")[2] or (e.task_key or "?") for e in events]
    more = (len(names) if total is None else total) - NAMES_SHOWN
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f", … (+{more})" if more > 0 else "")

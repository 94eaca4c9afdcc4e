"""The event log: the change feed as it arrives, wrapped, scrollable and searchable."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import RichLog

from relay_tui.data.snapshot import EventView
from relay_tui.render.styles import clip, clock_time

MAX_EVENTS_PER_FRAME = 20
KEPT_EVENTS = 500
KIND_WIDTH = 18


class FollowLog(RichLog):
    """A RichLog that follows new lines until the operator scrolls up, and again at the end.

    RichLog scrolls to the end on every write when ``auto_scroll`` is set, wherever the
    reader is; and a check for "already at the bottom" misses when lines arrive faster than
    the deferred scroll. So following is a flag the operator's own scrolling moves.
    """

    BINDINGS = [
        Binding("j", "scroll_down", "Down", id="log-down", show=False),
        Binding("k", "scroll_up", "Up", id="log-up", show=False),
        Binding("end,G", "follow", "Follow", id="log-follow", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(**kwargs)
        self.following = True

    def add(self, lines: Iterable[Text | str]) -> None:
        """One write for the whole batch: RichLog renders (and wraps) per write, not per line."""
        batch = [line if isinstance(line, Text) else Text(line) for line in lines]
        if batch:
            self.write(Text("\n").join(batch), scroll_end=self.following, animate=False)

    def action_follow(self) -> None:
        self.following = True
        self.scroll_end(animate=False, immediate=True)

    def _stop_following(self) -> None:
        self.following = False

    def _resume_if_at_end(self) -> None:
        self.following = self.scroll_y >= self.max_scroll_y

    def action_scroll_up(self) -> None:
        self._stop_following()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._stop_following()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._stop_following()
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: Any) -> None:
        self._stop_following()
        super()._on_mouse_scroll_up(event)

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self.call_after_refresh(self._resume_if_at_end)

    def action_page_down(self) -> None:
        super().action_page_down()
        self.call_after_refresh(self._resume_if_at_end)

    def _on_mouse_scroll_down(self, event: Any) -> None:
        super()._on_mouse_scroll_down(event)
        self.call_after_refresh(self._resume_if_at_end)


class EventLog(FollowLog):
    """Events wrap (a rejected command's reason is read in full); ``search`` filters them."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_lines", KEPT_EVENTS * 4)
        kwargs.setdefault("wrap", True)
        super().__init__(**kwargs)
        self.kept: deque[EventView] = deque(maxlen=KEPT_EVENTS)
        self.query_text = ""
        self._styles: Mapping[str, str] = {}

    def add_events(self, events: Sequence[EventView], styles: Mapping[str, str]) -> None:
        """Write the newest events; a burst is summarised instead of stalling the UI."""
        self._styles = styles
        self.kept.extend(events)
        shown = [e for e in events if event_matches(e, self.query_text)]
        if len(shown) > MAX_EVENTS_PER_FRAME:
            skipped = len(shown) - MAX_EVENTS_PER_FRAME
            self.add([Text(f"… {skipped} more events", style="dim", end="")])
            shown = shown[-MAX_EVENTS_PER_FRAME:]
        self.add(event_line(event, styles) for event in shown)

    def search(self, query: str) -> int:
        """Show only the kept events matching every word of ``query``; returns how many."""
        self.query_text = query.strip()
        self.clear()
        shown = [e for e in self.kept if event_matches(e, self.query_text)]
        self.following = True
        self.add(event_line(event, self._styles, self.query_text) for event in shown)
        return len(shown)


def event_matches(event: EventView, query: str) -> bool:
    if not query:
        return True
    haystack = f"{event.kind} {event.message} {event.task_key or ''}".lower()
    return all(word in haystack for word in query.lower().split())


def event_line(event: EventView, styles: Mapping[str, str], highlight: str = "") -> Text:
    """Time and kind in fixed-width columns; info kinds are dim so problems stand out."""
    level_state = {"error": "FAILED", "warning": "PARKED"}.get(event.level, "DRAFT")
    line = Text(end="")
    line.append(clock_time(event.at) + " ", style="dim")
    kind = clip(event.kind, KIND_WIDTH)
    line.append(kind.ljust(KIND_WIDTH) + " ", style=styles.get(level_state, ""))
    line.append(event.message)
    for word in highlight.split():
        line.highlight_words([word], style="reverse", case_sensitive=False)
    return line

"""The event list: the change feed as it arrives, bursts coalesced, with a cursor.

A line can be pointed at: ``enter`` opens its task (or its job), and keys that act on a
task act on the event's. Lines wrap to the pane and re-wrap when it is resized (an
OptionList lays its options out again on resize, which a RichLog never does). ``/``
searches, ``l`` cycles the level shown, and the list follows new events while the cursor
is on the last one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import RichLog
from textual.widgets.option_list import Option

from relay_tui.data.snapshot import EventView
from relay_tui.messages import FiltersChanged
from relay_tui.render.events import (
    LEVEL_FILTERS,
    EventEntry,
    coalesce,
    entry_matches,
    entry_text,
    shown_at_level,
)
from relay_tui.widgets.options import SafeOptionList

KEPT_ENTRIES = 500
TRIM_SLACK = 100
"""Options beyond the kept ones before the list is rebuilt (removing one at a time is
linear in the list's length)."""


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

    def add(self, lines: Any) -> None:
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


class EventList(SafeOptionList):
    """Events with a cursor; ``search`` and ``cycle_level`` filter what is shown."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", id="event-down", show=False),
        Binding("k", "cursor_up", "Up", id="event-up", show=False),
        Binding("home", "first", "First event", id="event-first", show=False),
        Binding("end,G", "last", "Last event (follow)", id="event-last", show=False),
        Binding("l", "cycle_level", "Level", id="event-level"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: deque[EventEntry] = deque(maxlen=KEPT_ENTRIES)
        self.query_text = ""
        self.last_id = 0
        self.level = "all"
        self.now: float | None = None
        self._styles: Mapping[str, str] = {}
        self._shown: list[str] = []
        """Entry keys of the options, in order (what the cursor row is)."""

    # -- what the cursor is on ------------------------------------------------------------
    @property
    def cursor_key(self) -> str | None:
        index = self.highlighted
        return self._shown[index] if index is not None and index < len(self._shown) else None

    def entry(self, key: str | None) -> EventEntry | None:
        return next((e for e in reversed(self.entries) if e.key == key), None) if key else None

    @property
    def following(self) -> bool:
        return self.highlighted is None or self.highlighted >= self.option_count - 1

    # -- feeding ----------------------------------------------------------------------------
    def add_events(
        self, events: Sequence[EventView], styles: Mapping[str, str], now: float | None = None
    ) -> None:
        """Coalesce the newest events onto the list; follow them if the cursor is at the end."""
        events = [e for e in events if e.id > self.last_id]  # a snapshot applied again
        if not events:
            return
        self.last_id = events[-1].id
        self._styles, self.now = styles, now
        last = self.entries[-1] if self.entries else None
        before = self.entries[-2] if len(self.entries) > 1 else None
        replaced, new = coalesce(last, before, events)
        follow = self.following
        if replaced is not None:
            self.entries[-1] = replaced
            self._replace_last(replaced)
        self.entries.extend(new)
        if len(self._shown) + len(new) > KEPT_ENTRIES + TRIM_SLACK:
            self._rebuild()
        else:
            self._append([e for e in new if self._wanted(e)])
        if follow and self.option_count:
            self.highlighted = self.option_count - 1
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)

    def clear_events(self) -> None:
        self.last_id = 0
        self.entries.clear()
        self._shown = []
        self.clear_options()

    def _wanted(self, entry: EventEntry) -> bool:
        return shown_at_level(entry, self.level) and entry_matches(entry, self.query_text)

    def _option(self, entry: EventEntry) -> Option:
        return Option(entry_text(entry, self._styles, self.query_text, self.now), id=entry.key)

    def _append(self, entries: Sequence[EventEntry]) -> None:
        if entries:
            self.add_options([self._option(e) for e in entries])
            self._shown += [e.key for e in entries]

    def _replace_last(self, entry: EventEntry) -> None:
        if self._shown and self._shown[-1] == entry.key:
            if self._wanted(entry):
                self.replace_option_prompt_at_index(
                    len(self._shown) - 1, self._option(entry).prompt
                )
            else:
                self.remove_option_at_index(len(self._shown) - 1)
                self._shown.pop()
        elif self._wanted(entry):
            self._append([entry])

    def _rebuild(self) -> None:
        """Show the kept entries that pass the filters again, keeping the cursor's entry."""
        keep = self.cursor_key if not self.following else None
        self._shown = []
        self.clear_options()
        self._append([e for e in self.entries if self._wanted(e)])
        if keep in self._shown:
            self.highlighted = self._shown.index(keep)
        elif self.option_count:
            self.highlighted = self.option_count - 1

    # -- filters ----------------------------------------------------------------------------
    def search(self, query: str) -> int:
        """Show only the kept entries matching every word of ``query``; returns how many."""
        self.query_text = query.strip()
        self._rebuild()
        return self.option_count

    def action_last(self) -> None:
        """The last event, and following again (from where it already is too)."""
        super().action_last()
        self.scroll_end(animate=False, immediate=True)

    def on_resize(self) -> None:
        """Lines wrap again at the new width: a follower stays at the end."""
        if self.following and self.option_count:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)

    def action_cycle_level(self) -> None:
        self.level = LEVEL_FILTERS[(LEVEL_FILTERS.index(self.level) + 1) % len(LEVEL_FILTERS)]
        self._rebuild()
        self.post_message(FiltersChanged())

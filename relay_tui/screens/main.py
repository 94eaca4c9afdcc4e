"""The console: live panes side by side, two columns, or one at a time, by terminal size.

Tasks and, under them, the events take the left half; the right half stacks what runs now
(Running agents, Needs you, Providers) over the planner's waves. The panes of the present
are as tall as their rows, so eight providers show eight rows at 150x34, and the planner
has what is left. Below 150x34 the right half shows Running agents and one more pane (the
events, chosen, show under the tasks); below 110x24 one pane at a time, the number keys
(and tab) choosing which.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import DescendantFocus, Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, OptionList, Static

from relay_tui.data.snapshot import Snapshot
from relay_tui.messages import CursorMoved, FiltersChanged
from relay_tui.render.events import EventEntry
from relay_tui.screens.base import closable_while_mounting
from relay_tui.widgets.events import EventList
from relay_tui.widgets.jobs import VIEWS, JobsTable
from relay_tui.widgets.keybar import KeyBar
from relay_tui.widgets.live_table import LiveTable, SortableTable
from relay_tui.widgets.needs import NeedsTable
from relay_tui.widgets.planner import PlannerTable
from relay_tui.widgets.providers import ProvidersTable
from relay_tui.widgets.running import RunningTable

PANES = (
    ("jobs", "Jobs & tasks"),
    ("running", "Running agents"),
    ("providers", "Providers"),
    ("planner", "Planner waves"),
    ("events", "Events"),
    ("needs", "Needs you"),
)
"""Pane names in key order (1-6)."""
TAB_TITLES = {"jobs": "Jobs", "running": "Running", "providers": "Providers",
              "planner": "Planner", "events": "Events", "needs": "Needs you"}  # fmt: skip
SLOT_PANES = ("needs", "providers", "planner", "events")
"""In two columns, these share the lower right, one at a time."""
FITTED_PANES = ("running", "needs", "providers")
SIDE_PANES = ("running", "needs", "providers", "planner")
"""In the full grid these are as tall as their rows; planner and events share the rest."""
GRID_WIDTH, GRID_HEIGHT = 150, 34
COLUMNS_WIDTH, COLUMNS_HEIGHT = 110, 24
PANE_CHROME = 4  # border (2), column labels, a preview line
MIN_SHARED = 5  # rows the planner pane keeps in the grid
EMPTY_TEXT = (
    "No jobs yet.\n\n"
    "Describe one in a TOML job file, then:\n\n"
    "    relay init && relay submit job.toml\n\n"
    "It shows up here as soon as it is stored. Want to see relay work first?\n"
    "Quit (q) and run  relay-tui --demo .  Press ? for every key."
)


def layout_for(width: int, height: int) -> str:
    if width >= GRID_WIDTH and height >= GRID_HEIGHT:
        return "grid"
    if width >= COLUMNS_WIDTH and height >= COLUMNS_HEIGHT:
        return "columns"
    return "single"


def fitted_heights(rows: Mapping[str, int], room: int) -> dict[str, int]:
    """Heights of the fitted panes: their rows and chrome, shrunk in proportion when they
    would leave the planner pane less than :data:`MIN_SHARED` rows."""
    wanted = {name: max(PANE_CHROME + 1, count + PANE_CHROME) for name, count in rows.items()}
    budget = max(len(wanted) * (PANE_CHROME + 1), room - MIN_SHARED)
    total = sum(wanted.values())
    if total <= budget:
        return wanted
    return {name: max(PANE_CHROME + 1, height * budget // total) for name, height in wanted.items()}


class MainScreen(Screen[None]):
    BINDINGS = [
        Binding("c", "app.cancel_task", "Cancel", id="cancel"),
        Binding("r", "app.retry_task", "Retry", id="retry"),
        Binding("T", "app.take_over", "Take over/back", id="takeover"),
        Binding("p", "app.replan", "Replan", id="replan"),
        Binding("a", "app.pin", "Pin agent", id="pin"),
        Binding("g", "app.approve", "Approve wave", id="approve"),
        Binding("m", "app.merge", "Merge", id="merge"),
        Binding("S", "app.say", "Say", id="say", show=False),
        Binding("C", "app.cancel_job", "Cancel job", id="cancel-job", show=False),
        Binding("x", "app.close_pr", "Close PR", id="close-pr", show=False),
        Binding("b", "app.raise_budget", "Raise budget", id="budget", show=False),
        Binding("R", "app.reset_agent", "Reset agent", id="agent-reset", show=False),
        Binding("u", "app.usage", "Usage", id="usage"),
        Binding("enter", "app.open", "Open", id="open", show=False),
        Binding("slash", "app.filter", "Filter", id="filter", key_display="/"),
        Binding("v", "app.next_view", "View", id="view", show=False),
        Binding("f", "app.fold_done", "Fold done", id="fold", show=False),
        Binding("escape", "app.clear_filter", "Clear filter", id="clear-filter", show=False),
        Binding("s", "app.cycle_sort", "Sort", id="sort", show=False),
        Binding("tab", "app.next_pane", "Next pane", id="next-pane", show=False),
        Binding("shift+tab", "app.previous_pane", "Previous pane", id="previous-pane", show=False),
        *(
            Binding(str(n), f"app.show_pane({n - 1})", title, id=f"pane-{n}", show=False)
            for n, (_name, title) in enumerate(PANES, start=1)
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.active = "jobs"
        self.slot = "providers"
        self.layout_name = "grid"
        self.snapshot: Snapshot | None = None
        self.state_styles: Mapping[str, str] = {}
        self.task_query = ""
        self.now = 0.0
        self._previews: dict[str, str] = {}
        self._lines: dict[str, Text] = {}
        self._heights: dict[str, int | None] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="tabs")
        with Horizontal(id="panes"):
            with Vertical(id="left"):
                with Vertical(id="jobs-pane", classes="pane -active"):
                    yield JobsTable(id="jobs")
                    yield Static(EMPTY_TEXT, id="empty")
                    yield Static(id="jobs-preview", classes="preview")
                with Vertical(id="events-pane", classes="pane"):
                    yield EventList(id="events")
                    yield Static(id="events-preview", classes="preview")
            with Vertical(id="side"):
                for name, table in (
                    ("running", RunningTable),
                    ("needs", NeedsTable),
                    ("providers", ProvidersTable),
                    ("planner", PlannerTable),
                ):
                    with Vertical(id=f"{name}-pane", classes="pane"):
                        yield table(id=name)
                        yield Static(id=f"{name}-preview", classes="preview")
        yield Input(id="filter")
        yield Static(id="status")
        yield KeyBar(id="keys")

    @closable_while_mounting
    def on_mount(self) -> None:
        self._set_titles()
        for table in self.query(LiveTable):
            table.show_cursor = False
        self.query_one(JobsTable).focus()
        self._render_tabs()

    # -- layout -----------------------------------------------------------------------
    def on_resize(self, event: Resize) -> None:
        self.layout_name = layout_for(event.size.width, event.size.height)
        for name in ("grid", "columns", "single"):
            self.set_class(self.layout_name == name, f"-{name}")
        self._show_only()

    def _activate(self, name: str) -> None:
        """The pane keys act on; marked so its preview stays shown while the filter box,
        outside every pane, holds the focus."""
        self.active = name
        for pane in self.query(".pane"):
            pane.set_class(pane.id == f"{name}-pane", "-active")

    def pane_widget(self, name: str) -> Widget:
        return self.query_one(f"#{name}")

    def show_pane(self, index: int) -> None:
        """Number keys and tab: show that pane (where the layout hides some) and focus it."""
        name = PANES[index % len(PANES)][0]
        if name in SLOT_PANES:
            self.slot = name
        self._activate(name)
        self._show_only()
        widget = self.pane_widget(name)
        if name == "jobs" and not widget.display:
            self.query_one("#jobs-pane").focus()
        else:
            widget.focus()

    def step_pane(self, step: int) -> None:
        index = next(i for i, (name, _t) in enumerate(PANES) if name == self.active)
        self.show_pane(index + step)

    def _shown(self, name: str) -> bool:
        if self.layout_name == "single":
            return name == self.active
        if self.layout_name == "columns":
            return name in ("jobs", "running", self.slot)
        if name == "needs":  # the grid shows it while something waits (or it has the focus)
            return bool(self.snapshot and self.snapshot.asks) or self.active == "needs"
        return True

    def _show_only(self) -> None:
        """Which panes are displayed, and how tall the fitted ones are."""
        for name, _title in PANES:
            self.query_one(f"#{name}-pane").display = self._shown(name)
        self.query_one("#left").display = self._shown("jobs") or self._shown("events")
        self.query_one("#side").display = any(self._shown(n) for n in SIDE_PANES)
        self._fit_heights()
        self._render_tabs()

    def _fit_heights(self) -> None:
        """In the grid, running agents, asks and providers as tall as their rows."""
        heights: dict[str, int | None] = dict.fromkeys(FITTED_PANES)
        if self.layout_name == "grid" and self.snapshot is not None:
            rows = {
                "running": len(self.snapshot.runs),
                "needs": len(self.snapshot.asks),
                "providers": self.query_one(ProvidersTable).row_count,
            }
            if self.active in rows:  # its preview, under its rows, may take more than a line
                rows[self.active] += self._preview_lines(self.active) - 1
            shown = {name: count for name, count in rows.items() if self._shown(name)}
            heights.update(fitted_heights(shown, self.query_one("#side").size.height))
        for name, height in heights.items():
            if self._heights.get(name, -1) != height:
                self._heights[name] = height
                self.query_one(f"#{name}-pane").styles.height = height or "1fr"

    def _preview_lines(self, name: str) -> int:
        """How many lines the preview of ``name`` takes at its pane's width (its max-height
        is 6)."""
        text = self._previews.get(name, "")
        width = self.query_one(f"#{name}-pane").content_region.width - 2  # the padding
        if not text or width <= 0:
            return 1
        return min(6, len(Text(text).wrap(self.app.console, width)))

    def _render_tabs(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        asks = len(self.snapshot.asks) if self.snapshot else 0
        for number, (name, _title) in enumerate(PANES, start=1):
            title = TAB_TITLES[name]
            label = f" {number} {title}" + (f" ({asks})" if name == "needs" and asks else "") + " "
            style = "reverse" if name == self.active else ""
            if name == "needs" and asks and name != self.active:
                style = self.state_styles.get("PARKED", "bold")
            text.append(label, style=style)
        self.query_one("#tabs", Static).update(text)

    def _set_titles(self) -> None:
        """Each pane's number and name, and what filters what it shows (the filter chip)."""
        for number, (name, title) in enumerate(PANES, start=1):
            self.query_one(f"#{name}-pane").border_title = Text(f"{number} {title}")
        jobs = self.query_one("#jobs-pane")
        chips = []
        if self.task_query:
            chips.append(f"⧩ {self.task_query} · esc clears")
        if not self.query_one(JobsTable).fold_done:
            chips.append("finished jobs unfolded (f)")
        if chips:
            jobs.border_title = Text(f"1 Jobs & tasks ─ {' ─ '.join(chips)}")
        events = self.query_one(EventList)
        chips = [] if events.level == "all" else [f"≥ {events.level}s (l)"]
        if events.query_text:
            chips.append(f"⧩ {events.query_text} · esc clears")
        if chips:
            self.query_one("#events-pane").border_title = Text(f"5 Events ─ {' ─ '.join(chips)}")

    @on(FiltersChanged)
    def _filters_changed(self) -> None:
        self._set_titles()
        self.post_message(CursorMoved())

    # -- focus and target -------------------------------------------------------------
    @on(DescendantFocus)
    def _focus_moved(self, event: DescendantFocus) -> None:
        widget = event.widget
        name = next((n for n, _t in PANES if widget.id == n), None)
        if name is None:
            return  # the filter box or a pane container: the active pane stays
        self._activate(name)
        for table in self.query(LiveTable):
            table.show_cursor = table.id == name
        self._render_tabs()
        self._update_preview(name)
        self._fit_heights()
        self.post_message(CursorMoved())

    def active_title(self) -> str:
        return dict(PANES)[self.active]

    def active_table(self) -> LiveTable | None:
        widget = self.pane_widget(self.active)
        return widget if isinstance(widget, LiveTable) else None

    def cursor_row(self) -> tuple[str, str | None]:
        """The focused pane and the key of its cursor row (None in an empty pane): what
        :mod:`relay_tui.actions.target` turns into the row a key acts on."""
        widget = self.pane_widget(self.active)
        if isinstance(widget, LiveTable | EventList):
            return self.active, widget.cursor_key
        return self.active, None

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == self.active:
            self._update_preview(event.data_table.id)
            self.post_message(CursorMoved())

    @on(OptionList.OptionHighlighted, "#events")
    def _event_highlighted(self) -> None:
        if self.active == "events":
            self._update_preview("events")
            self.post_message(CursorMoved())

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == self.active:
            self.app.call_later(self.app.run_action, "open")

    @on(OptionList.OptionSelected, "#events")
    def _event_selected(self) -> None:
        self.app.call_later(self.app.run_action, "open")

    def _update_preview(self, name: str | None) -> None:
        if name is None or self.snapshot is None:
            return
        widget = self.pane_widget(name)
        if isinstance(widget, EventList):
            entry = widget.entry(widget.cursor_key)
            text = event_preview(entry) if entry else ""
        elif isinstance(widget, LiveTable) and hasattr(widget, "preview"):
            text = widget.preview(widget.cursor_key, self.snapshot)
        else:
            return
        if self._previews.get(name) != text:  # a layout pass costs; skip it when unchanged
            self._previews[name] = text
            self.query_one(f"#{name}-preview", Static).update(Text(text))
            if name == self.active:
                self._fit_heights()

    def cycle_sort(self) -> str | None:
        table = self.active_table()
        if not isinstance(table, SortableTable):
            return None
        return table.cycle_sort()

    # -- data -------------------------------------------------------------------------
    def apply_snapshot(self, snapshot: Snapshot, styles: Mapping[str, str], now: float) -> None:
        asks_before = len(self.snapshot.asks) if self.snapshot else -1
        self.snapshot, self.state_styles, self.now = snapshot, styles, now
        empty = not snapshot.jobs
        jobs = self.query_one(JobsTable)
        jobs.display = not empty
        self.query_one("#empty").display = empty
        jobs.apply(snapshot, self.task_query, styles, now)
        self.query_one(RunningTable).apply(snapshot, now, styles)
        self.query_one(NeedsTable).apply(snapshot, now, styles)
        self.query_one(ProvidersTable).apply(snapshot, now, styles)
        self.query_one(PlannerTable).apply(snapshot, styles)
        self.query_one(EventList).add_events(snapshot.new_events, styles, now)
        if len(snapshot.asks) != asks_before:
            self._show_only()
        else:
            self._fit_heights()
        self._update_preview(self.active)

    def refilter(self) -> None:
        if self.snapshot is not None:
            jobs = self.query_one(JobsTable)
            jobs.apply(self.snapshot, self.task_query, self.state_styles, self.now)
            self._update_preview("jobs")
        self._set_titles()

    def tick(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        """Once a second: elapsed times, idle times and countdowns move on their own."""
        self.now = now
        self.query_one(RunningTable).apply(snapshot, now, styles)
        self.query_one(NeedsTable).apply(snapshot, now, styles)
        self.query_one(ProvidersTable).apply(snapshot, now, styles)

    def set_header(self, text: Text) -> None:
        self._set_line("#header", text)

    def set_status(self, text: Text) -> None:
        self._set_line("#status", text)

    def _set_line(self, selector: str, text: Text) -> None:
        """One-line bars never change size: repaint them only when their text changed."""
        if self._lines.get(selector) == text:
            return
        self._lines[selector] = text
        for line in self.query(selector).results(Static):
            line.update(text, layout=False)

    # -- filter (tasks), views and search (events) ----------------------------------------
    @property
    def event_query(self) -> str:
        return self.query_one(EventList).query_text

    def open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        searching = self.active == "events"
        self.set_class(searching, "-searching")
        box.value = self.event_query if searching else self.task_query
        views = " ".join(f":{name}" for name in VIEWS)
        box.placeholder = (
            "search events: every word must match"
            if searching
            else f"filter tasks: words, a state (failed, parked…), or a view: {views}"
        )
        self.add_class("-filtering")
        box.focus()

    def close_filter(self, *, clear: bool) -> None:
        box = self.query_one("#filter", Input)
        if clear:  # what escape clears is the filter of the pane it is pressed on
            self.set_class(self.active == "events", "-searching")
            box.value = ""
            self._query_changed("")
        self.set_class(bool(box.value) and self.active != "events", "-filtering")
        self.pane_widget(self.active).focus()

    def set_view(self, view: str | None) -> None:
        """A saved view (``:failed``) as the task filter, or none."""
        self.query_one("#filter", Input).value = f":{view}" if view else ""
        self.set_class(False, "-searching")
        self._query_changed(f":{view}" if view else "")

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._query_changed(event.value)

    def _query_changed(self, value: str) -> None:
        if self.has_class("-searching"):
            self.query_one(EventList).search(value)
            self._set_titles()
        else:
            self.task_query = value.strip()
            self.refilter()
        self.post_message(CursorMoved())

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.close_filter(clear=False)


def event_preview(entry: EventEntry) -> str:
    """The whole burst: every task it keeps (the line names a few), and how many more."""
    events = entry.events
    if entry.count == 1:
        event = events[0]
        where = event.task_key or event.job_id or ""
        return f"{where}: {event.message}" + ("  (enter opens it)" if where else "")
    keys = ", ".join(e.task_key or "?" for e in events)
    more = f", … (+{entry.count - len(events)})" if entry.count > len(events) else ""
    return f"{entry.count} {events[0].kind}: {keys}{more}  (enter opens the job)"

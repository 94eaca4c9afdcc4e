"""The console: live panes in a grid, two columns, or one at a time, by terminal size."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.events import DescendantFocus, Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Static

from relay_tui.data.snapshot import Snapshot
from relay_tui.messages import CursorMoved
from relay_tui.screens.base import fit_footer
from relay_tui.widgets.events import EventLog
from relay_tui.widgets.jobs import JobsTable
from relay_tui.widgets.live_table import LiveTable, SortableTable
from relay_tui.widgets.planner import PlannerTable
from relay_tui.widgets.providers import ProvidersTable
from relay_tui.widgets.running import RunningTable

PANES = (
    ("jobs", "Jobs & tasks"),
    ("running", "Running agents"),
    ("providers", "Providers"),
    ("planner", "Planner waves"),
    ("events", "Events"),
)
"""Pane names in key order (1-5); the DOM order puts Events under Jobs in the grid."""
SLOT_PANES = (2, 3, 4)
"""In two columns, these share the lower right, one at a time."""
GRID_WIDTH, GRID_HEIGHT = 150, 34
COLUMNS_WIDTH, COLUMNS_HEIGHT = 110, 24
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


class MainScreen(Screen[None]):
    BINDINGS = [
        Binding("c", "app.cancel_task", "Cancel", id="cancel"),
        Binding("r", "app.retry_task", "Retry", id="retry"),
        Binding("p", "app.replan", "Replan", id="replan"),
        Binding("a", "app.pin", "Pin agent", id="pin"),
        Binding("g", "app.approve", "Approve wave", id="approve"),
        Binding("C", "app.cancel_job", "Cancel job", id="cancel-job", show=False),
        Binding("m", "app.merge", "Merge", id="merge"),
        Binding("x", "app.close_pr", "Close PR", id="close-pr", show=False),
        Binding("b", "app.raise_budget", "Raise budget", id="budget", show=False),
        Binding("R", "app.reset_agent", "Reset agent", id="agent-reset", show=False),
        Binding("u", "app.usage", "Usage", id="usage"),
        Binding("enter", "app.open", "Open", id="open", show=False),
        Binding("slash", "app.filter", "Filter/search", id="filter", key_display="/"),
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
        self._previews: dict[str, str] = {}
        self._lines: dict[str, Text] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="tabs")
        with Container(id="panes"):
            with Vertical(id="jobs-pane", classes="pane"):
                yield JobsTable(id="jobs")
                yield Static(EMPTY_TEXT, id="empty")
                yield Static(id="jobs-preview", classes="preview")
            with Vertical(id="running-pane", classes="pane"):
                yield RunningTable(id="running")
                yield Static(id="running-preview", classes="preview")
            with Vertical(id="providers-pane", classes="pane"):
                yield ProvidersTable(id="providers")
                yield Static(id="providers-preview", classes="preview")
            with Vertical(id="events-pane", classes="pane"):
                yield EventLog(id="events")
            with Vertical(id="planner-pane", classes="pane"):
                yield PlannerTable(id="planner")
                yield Static(id="planner-preview", classes="preview")
        yield Input(id="filter")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        for number, (name, title) in enumerate(PANES, start=1):
            self.query_one(f"#{name}-pane").border_title = f"{number} {title}"
        for table in self.query(LiveTable):
            table.show_cursor = False
        self.query_one(JobsTable).focus()
        self._render_tabs()

    # -- layout -----------------------------------------------------------------------
    def on_resize(self, event: Resize) -> None:
        self.layout_name = layout_for(event.size.width, event.size.height)
        for name in ("grid", "columns", "single"):
            self.set_class(self.layout_name == name, f"-{name}")
        fit_footer(self.query_one(Footer), event.size.width)
        self._show_only()

    def pane_widget(self, name: str) -> Widget:
        return self.query_one(f"#{name}")

    def show_pane(self, index: int) -> None:
        """Number keys and tab: show that pane (where the layout hides some) and focus it."""
        name = PANES[index % len(PANES)][0]
        if index % len(PANES) in SLOT_PANES:
            self.slot = name
        self.active = name
        self._show_only()
        widget = self.pane_widget(name)
        if name == "jobs" and not widget.display:
            self.query_one("#jobs-pane").focus()
        else:
            widget.focus()

    def step_pane(self, step: int) -> None:
        index = next(i for i, (name, _t) in enumerate(PANES) if name == self.active)
        self.show_pane(index + step)

    def _show_only(self) -> None:
        """Which panes are displayed: all (grid), jobs + running + the slot, or the active one."""
        for name, _title in PANES:
            if self.layout_name == "grid":
                shown = True
            elif self.layout_name == "columns":
                shown = name in ("jobs", "running", self.slot)
            else:
                shown = name == self.active
            self.query_one(f"#{name}-pane").display = shown
        self._render_tabs()

    def _render_tabs(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        for number, (name, title) in enumerate(PANES, start=1):
            label = f" {number} {title} "
            text.append(label, style="reverse" if name == self.active else "")
        self.query_one("#tabs", Static).update(text)

    # -- focus and target -------------------------------------------------------------
    @on(DescendantFocus)
    def _focus_moved(self, event: DescendantFocus) -> None:
        widget = event.widget
        name = next((n for n, _t in PANES if widget.id == n), None)
        if name is None:
            return  # the filter box or a pane container: the active pane stays
        self.active = name
        for table in self.query(LiveTable):
            table.show_cursor = table.id == name
        self._render_tabs()
        self.post_message(CursorMoved())

    def active_table(self) -> LiveTable | None:
        widget = self.pane_widget(self.active)
        return widget if isinstance(widget, LiveTable) else None

    def cursor_row(self) -> tuple[str, str | None]:
        """The focused pane and the key of its cursor row (None in the event log or an empty
        table): what :mod:`relay_tui.actions.target` turns into the row a key acts on."""
        table = self.active_table()
        return self.active, table.cursor_key if table is not None else None

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == self.active:
            self._update_preview(event.data_table.id)
            self.post_message(CursorMoved())

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == self.active:
            self.app.call_later(self.app.run_action, "open")

    def _update_preview(self, name: str | None) -> None:
        if name is None or self.snapshot is None:
            return
        table = self.pane_widget(name)
        preview = getattr(table, "preview", None)
        if not isinstance(table, LiveTable) or preview is None:
            return
        text = preview(table.cursor_key, self.snapshot)
        box = self.query_one(f"#{name}-preview", Static)
        if self._previews.get(name) != text:  # a layout pass costs; skip it when unchanged
            self._previews[name] = text
            box.update(Text(text, overflow="ellipsis"), layout=False)  # fixed height

    def cycle_sort(self) -> str | None:
        table = self.active_table()
        if not isinstance(table, SortableTable):
            return None
        return table.cycle_sort()

    # -- data -------------------------------------------------------------------------
    def apply_snapshot(self, snapshot: Snapshot, styles: Mapping[str, str], now: float) -> None:
        self.snapshot, self.state_styles = snapshot, styles
        empty = not snapshot.jobs
        jobs = self.query_one(JobsTable)
        jobs.display = not empty
        self.query_one("#empty").display = empty
        jobs.apply(snapshot, self.task_query, styles)
        self.query_one(RunningTable).apply(snapshot, now)
        self.query_one(ProvidersTable).apply(snapshot, now, styles)
        self.query_one(PlannerTable).apply(snapshot, styles)
        self.query_one(EventLog).add_events(snapshot.new_events, styles)
        self._update_preview(self.active)

    def refilter(self) -> None:
        if self.snapshot is not None:
            self.query_one(JobsTable).apply(self.snapshot, self.task_query, self.state_styles)
            self._update_preview("jobs")

    def tick(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        """Once a second: elapsed times and countdowns move even when nothing else does."""
        self.query_one(RunningTable).apply(snapshot, now)
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

    # -- filter (tasks) and search (events) ---------------------------------------------
    @property
    def event_query(self) -> str:
        return self.query_one(EventLog).query_text

    def open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        searching = self.active == "events"
        self.set_class(searching, "-searching")
        box.value = self.event_query if searching else self.task_query
        box.placeholder = (
            "search events: every word must match"
            if searching
            else "filter tasks: words, a state (failed, running…) or state:parked"
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

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._query_changed(event.value)

    def _query_changed(self, value: str) -> None:
        if self.has_class("-searching"):
            self.query_one(EventLog).search(value)
        else:
            self.task_query = value.strip()
            self.refilter()
        self.post_message(CursorMoved())

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.close_filter(clear=False)

"""The console: a grid of live panes (or one pane at a time on small terminals)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from relay_tui.data import Snapshot
from relay_tui.messages import TaskSelected
from relay_tui.widgets.panes import EventLog, JobsTable, PlannerTable, ProvidersTable, RunningTable

PANES = (
    ("jobs-pane", "Jobs & tasks"),
    ("running-pane", "Running agents"),
    ("providers-pane", "Providers"),
    ("planner-pane", "Planner waves"),
    ("events-pane", "Events"),
)
NARROW_WIDTH = 150  # below this the grid's half-width panes cannot show every column
NARROW_HEIGHT = 34
COMPACT_FOOTER_WIDTH = 120
PALETTE_HINT_WIDTH = 100
EMPTY_TEXT = (
    "No jobs yet.\n\n"
    "Describe one in a TOML job file, then:\n\n"
    "    relay init && relay submit job.toml\n\n"
    "It shows up here as soon as it is stored. Want to see relay work first?\n"
    "Quit (q) and run  relay-tui --demo .  Press ? for every key."
)


def fit_footer(footer: Footer, width: int) -> None:
    """Narrow terminals: compact keys, and the palette hint gives way (ctrl+p still works)."""
    footer.compact = width < COMPACT_FOOTER_WIDTH
    footer.show_command_palette = width >= PALETTE_HINT_WIDTH


class MainScreen(Screen[None]):
    BINDINGS = [
        Binding("c", "app.cancel_task", "Cancel", id="cancel"),
        Binding("r", "app.retry_task", "Retry", id="retry"),
        Binding("p", "app.replan", "Replan", id="replan"),
        Binding("a", "app.pin", "Pin agent", id="pin"),
        Binding("g", "app.approve", "Approve wave", id="approve"),
        Binding("enter", "app.detail", "Detail", id="detail", show=False),
        Binding("slash", "app.filter", "Filter", id="filter", key_display="/"),
        Binding("escape", "app.clear_filter", "Clear filter", id="clear-filter", show=False),
        Binding("tab", "app.next_pane", "Next pane", id="next-pane", show=False),
        Binding("shift+tab", "app.previous_pane", "Previous pane", id="previous-pane", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.active_pane = 0

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="tabs")
        with Container(id="panes"):
            with Vertical(id="jobs-pane", classes="pane -active"):
                yield JobsTable(id="jobs")
                yield Static(EMPTY_TEXT, id="empty")
            with Vertical(id="running-pane", classes="pane"):
                yield RunningTable(id="running")
            with Vertical(id="providers-pane", classes="pane"):
                yield ProvidersTable(id="providers")
            with Vertical(id="events-pane", classes="pane"):
                yield EventLog(id="events")
            with Vertical(id="planner-pane", classes="pane"):
                yield PlannerTable(id="planner")
        yield Input(
            placeholder="filter: words, a state (failed, running…) or state:parked", id="filter"
        )
        yield Footer()

    def on_mount(self) -> None:
        for pane_id, title in PANES:
            self.query_one(f"#{pane_id}").border_title = title
        self.query_one(JobsTable).focus()
        self._render_tabs()

    # -- layout -----------------------------------------------------------------------
    def on_resize(self, event: Resize) -> None:
        narrow = event.size.width < NARROW_WIDTH or event.size.height < NARROW_HEIGHT
        self.set_class(narrow, "-narrow")
        fit_footer(self.query_one(Footer), event.size.width)

    def show_pane(self, index: int) -> None:
        self.active_pane = index % len(PANES)
        for position, (pane_id, _title) in enumerate(PANES):
            self.query_one(f"#{pane_id}").set_class(position == self.active_pane, "-active")
        pane = self.query_one(f"#{PANES[self.active_pane][0]}")
        target = (
            pane.query(DataTable).first() if pane.query(DataTable) else pane.query_one(EventLog)
        )
        if target.display:
            target.focus()
        else:
            pane.focus()
        self._render_tabs()

    def _render_tabs(self) -> None:
        parts = []
        for position, (_pane_id, title) in enumerate(PANES):
            label = f" {position + 1} {title} "
            parts.append(f"[reverse]{label}[/]" if position == self.active_pane else label)
        self.query_one("#tabs", Static).update("".join(parts))

    # -- data -------------------------------------------------------------------------
    def apply_snapshot(
        self, snapshot: Snapshot, query: str, styles: dict[str, str], now: float
    ) -> None:
        empty = not snapshot.jobs
        jobs = self.query_one(JobsTable)
        jobs.display = not empty
        self.query_one("#empty").display = empty
        jobs.apply(snapshot, query, styles)
        self.query_one(RunningTable).apply(snapshot, now)
        self.query_one(ProvidersTable).apply(snapshot, now, styles)
        self.query_one(PlannerTable).apply(snapshot, styles)
        self.query_one(EventLog).add_events(snapshot.new_events, styles)

    def refilter(self, snapshot: Snapshot, query: str, styles: dict[str, str]) -> None:
        self.query_one(JobsTable).apply(snapshot, query, styles)

    def tick(self, snapshot: Snapshot, now: float, styles: dict[str, str]) -> None:
        """Once a second: elapsed times and countdowns move even when nothing else does."""
        self.query_one(RunningTable).apply(snapshot, now)
        self.query_one(ProvidersTable).apply(snapshot, now, styles)

    def set_status(self, text: str) -> None:
        for status in self.query("#status").results(Static):
            status.update(text)

    # -- selection --------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#jobs")
    def _job_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value or ""
        if key.startswith("job:"):
            self.post_message(TaskSelected(None, key[4:]))
        elif key.startswith("wave:"):
            self.post_message(TaskSelected(None, key.split(":")[1]))
        else:
            self.post_message(TaskSelected(key, key.partition("/")[0]))

    @on(DataTable.RowHighlighted, "#running")
    def _run_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        snapshot = getattr(self.app, "snapshot", None)
        run = (
            next((r for r in snapshot.runs if r.execution_id == event.row_key.value), None)
            if snapshot
            else None
        )
        if run is not None and run.task_key:
            self.post_message(TaskSelected(run.task_key, run.job_id))

    @on(DataTable.RowSelected, "#jobs, #running")
    async def _row_selected(self) -> None:
        await self.app.run_action("detail")

    # -- filter -----------------------------------------------------------------------
    def open_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one("#filter", Input).focus()

    def close_filter(self, *, clear: bool) -> None:
        box = self.query_one("#filter", Input)
        if clear:
            box.value = ""
        self.set_class(bool(box.value), "-filtering")
        self.show_pane(0)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.close_filter(clear=False)

"""Usage: spend by job, agent and provider, spend over time as a bar chart, budget bars.

Everything is read in a worker with :func:`relay_engine.store.usage.read_usage` and rolled up
with the engine's own :func:`~relay_engine.store.usage.rollup`, so the numbers are those of
``relay usage``. Estimated costs carry a ``~`` wherever they show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.events import DescendantFocus, Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.budgets import local_midnight
from relay_engine.core.usage import Grouping, UsageRecord, UsageRow, rollup, total
from relay_engine.store.db import Store
from relay_engine.store.read_model.jobs import BudgetView, JobView
from relay_engine.store.spend import read_usage
from relay_tui.messages import DetailRead
from relay_tui.render.spend import (
    bar_chart,
    budget_bar,
    budget_words,
    chart_caption,
    money,
    spend_series,
    tokens_text,
)
from relay_tui.render.styles import styled
from relay_tui.screens.base import ClosesOnce, closable_while_mounting, pane_keys
from relay_tui.widgets.keybar import KeyBar

NARROW_WIDTH = 120
RELOAD_SECONDS = 5.0
CHART = {"hour": 24, "day": 14}  # buckets shown per unit
CHART_HEIGHT = 6
BAR = 12  # budget bar cells
TABLES: tuple[tuple[Grouping, str], ...] = (
    ("job", "By job"),
    ("agent", "By agent"),
    ("provider", "By provider"),
)


@dataclass(frozen=True)
class DailyBudget:
    """An agent's or provider's ``daily_budget_usd`` and today's spend against it."""

    what: str  # "agent codex-b" | "provider claude"
    spent: float
    cap: float

    @property
    def budget(self) -> BudgetView:
        fraction = self.spent / self.cap if self.cap else 1.0
        level = "exhausted" if fraction >= 1 else "warning" if fraction >= 0.8 else "ok"
        return BudgetView(level, f"{money(self.spent)} of {money(self.cap)} today", fraction)


@dataclass(frozen=True)
class UsageData:
    rows: Mapping[str, list[UsageRow]]
    overall: UsageRow
    records: tuple[UsageRecord, ...]
    daily: tuple[DailyBudget, ...]


def daily_budgets(
    records: Sequence[UsageRecord], config: RelayConfig, now: float
) -> tuple[DailyBudget, ...]:
    today = [r for r in records if r.at >= local_midnight(now)]
    found = []
    for agent in config.agents:
        if agent.daily_budget_usd is not None:
            spent = sum(r.cost_usd or 0.0 for r in today if r.agent == agent.id)
            found.append(DailyBudget(f"agent {agent.id}", spent, agent.daily_budget_usd))
    for name, provider in sorted(config.providers.items()):
        if provider.daily_budget_usd is not None:
            spent = sum(r.cost_usd or 0.0 for r in today if r.provider == name)
            found.append(DailyBudget(f"provider {name}", spent, provider.daily_budget_usd))
    return tuple(found)


def usage_cells(row: UsageRow) -> tuple[str, str, str, str, str]:
    cost = money(row.cost_usd, row.estimated) + (" +?" if row.unpriced else "")
    tokens = f"{tokens_text(row.input_tokens)} / {tokens_text(row.output_tokens)}"
    return (row.key, cost, tokens, tokens_text(row.cached_tokens), str(row.executions))


class UsageTable(DataTable[object]):
    """A table of the Usage screen: the cursor runs on into the next table (and back), and
    page and end keys move through the whole screen, so every table is reachable at 80x24
    where they are stacked under one another."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", id="usage-down", show=False),
        Binding("k", "cursor_up", "Up", id="usage-up", show=False),
        Binding("pagedown", "page(1)", "Page down", id="usage-page-down", show=False),
        Binding("pageup", "page(-1)", "Page up", id="usage-page-up", show=False),
        Binding("end,G", "edge(1)", "Last table", id="usage-last", show=False),
        Binding("home", "edge(-1)", "First table", id="usage-first", show=False),
    ]

    def action_cursor_down(self) -> None:
        if self.row_count == 0 or self.cursor_row >= self.row_count - 1:
            self.screen.focus_next()
            return
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.row_count == 0 or self.cursor_row <= 0:
            self.screen.focus_previous()
            return
        super().action_cursor_up()

    def action_page(self, direction: int) -> None:
        screen = self.screen
        if isinstance(screen, UsageScreen):
            screen.page(direction)

    def action_edge(self, direction: int) -> None:
        tables = list(self.screen.query(UsageTable))
        target = tables[-1] if direction > 0 else tables[0]
        target.focus()
        target.move_cursor(row=target.row_count - 1 if direction > 0 else 0)

    def on_focus(self) -> None:
        """The table, with its section title, comes into view."""
        self.call_after_refresh(self._into_view)

    def _into_view(self) -> None:
        if not self.is_attached:
            return
        title = self.parent.children[self.parent.children.index(self) - 1] if self.parent else None
        target = title if title is not None else self
        target.scroll_visible(animate=False, top=True)
        self.scroll_visible(animate=False)


class UsageScreen(ClosesOnce, Screen[None]):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="usage-close"),
        Binding("t", "toggle_unit", "Hour/day", id="usage-unit"),
        Binding("b", "app.raise_budget", "Raise budget", id="budget"),
        *pane_keys(),
    ]

    def __init__(self, store: Store, config: RelayConfig, styles: Mapping[str, str]) -> None:
        super().__init__()
        self.store = store
        self.config = config
        self.state_styles = styles
        self.unit = "hour"
        self.loaded = threading.Event()
        self.data: UsageData | None = None
        self._read_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static(id="usage-title")
        with Horizontal(id="usage-body"):
            with VerticalScroll(id="usage-tables"):
                yield Static("Budgets", classes="section")
                yield UsageTable(id="usage-budgets", cursor_type="row")
                yield from self._table("job", "By job")
            with VerticalScroll(id="usage-side"):
                yield Static(id="usage-chart-title", classes="section")
                yield Static(id="usage-chart")
                yield from self._table("agent", "By agent")
                yield from self._table("provider", "By provider")
        yield KeyBar()

    @staticmethod
    def _table(key: str, title: str) -> ComposeResult:
        yield Static(title, classes="section")
        yield UsageTable(id=f"usage-{key}", cursor_type="row")

    @on(DescendantFocus)
    def _focus_moved(self, event: DescendantFocus) -> None:
        """Only the focused table shows its cursor: ``b`` acts on that row."""
        for table in self.query(DataTable):
            table.show_cursor = table is event.widget

    @closable_while_mounting
    def on_mount(self) -> None:
        for column in self.query("#usage-tables, #usage-side"):
            column.can_focus = False  # the tables take the focus; their columns scroll
        for key, _title in TABLES:
            table = self.query_one(f"#usage-{key}", DataTable)
            table.add_columns(key.capitalize(), "Cost", "Tokens in/out", "Cached", "Runs")
        self.query_one("#usage-budgets", DataTable).add_columns("Budget", "Spent", "Of")
        for table in self.query(DataTable):
            table.show_cursor = False
        self.query_one("#usage-budgets", DataTable).focus()
        self.reload()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

    def action_back(self) -> None:
        self.close_once()

    def page(self, direction: int) -> None:
        """Page the part of the screen that scrolls: the whole body when the tables are
        stacked, else the column the focused table is in."""
        focused = self.focused
        body = self.query_one("#usage-body")
        holder = body if self.has_class("-narrow") else (focused.parent if focused else body)
        if not isinstance(holder, Widget):  # None, or the app: nothing of ours scrolls
            return
        if direction > 0:
            holder.scroll_page_down(animate=False)
        else:
            holder.scroll_page_up(animate=False)

    def action_toggle_unit(self) -> None:
        self.unit = "day" if self.unit == "hour" else "hour"
        if self.data is not None:
            self._show_chart(self.data)

    def cursor_key(self) -> str | None:
        """The key of the focused table's cursor row: ``job:ID`` in the job and budget tables
        (``b`` raises that job's budget), None when no table with rows has the focus."""
        table = self.focused
        if not isinstance(table, DataTable) or table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate)[0].value

    def concerns(self, has_events: bool) -> bool:
        """Spend moves with executions: read again after events, at most every few seconds."""
        return has_events and time.monotonic() - self._read_at >= RELOAD_SECONDS

    @work(thread=True, exclusive=True, group="usage")
    def reload(self) -> None:
        self._read_at = time.monotonic()
        now = getattr(self.app, "clock", time.time)()
        records = tuple(read_usage(self.store))
        rows: dict[str, list[UsageRow]] = {key: rollup(records, key) for key, _title in TABLES}
        data = UsageData(
            rows, total(rows["job"]), records, daily_budgets(records, self.config, now)
        )
        self.post_message(DetailRead(lambda: self._show(data)))

    @on(DetailRead)
    def _detail_read(self, message: DetailRead) -> None:
        message.show()

    def _show(self, data: UsageData) -> None:
        if not self.is_attached or self._dismissing:
            return
        try:
            self._fill(data)
        except NoMatches:  # closed while the read was on its way: its tables are gone
            return
        self.loaded.set()

    def _fill(self, data: UsageData) -> None:
        self.data = data
        overall = data.overall
        title = Text.assemble((" Usage ", "bold reverse"), "  ")
        title.append(
            f"{money(overall.cost_usd, overall.estimated)} · "
            f"{tokens_text(overall.input_tokens + overall.output_tokens)} tokens · "
            f"{overall.executions} runs"
            + (" · ~ estimated from the price table" if overall.estimated else "")
        )
        self.query_one("#usage-title", Static).update(title)
        for key, _title in TABLES:
            table = self.query_one(f"#usage-{key}", DataTable)
            table.clear()
            for row in data.rows[key]:
                table.add_row(*usage_cells(row), key=f"{key}:{row.key}")
        self._show_chart(data)
        self._show_budgets(data)

    def _show_chart(self, data: UsageData) -> None:
        now = getattr(self.app, "clock", time.time)()
        series = spend_series(data.records, now, self.unit, CHART[self.unit])
        style = self.state_styles.get("RUNNING", "")
        self.query_one("#usage-chart-title", Static).update(chart_caption(series) + "  (t)")
        lines = bar_chart(series, CHART_HEIGHT, style)
        self.query_one("#usage-chart", Static).update(Text("\n").join(lines))

    def _show_budgets(self, data: UsageData) -> None:
        table = self.query_one("#usage-budgets", DataTable)
        table.clear()
        snapshot = getattr(self.app, "snapshot", None)
        jobs: Sequence[JobView] = snapshot.jobs if snapshot is not None else ()
        for job in jobs:
            if job.budget.level == "none":
                continue
            label = styled(
                f"job {job.id}", "FAILED" if job.budget_exhausted else "", self.state_styles
            )
            text = budget_words(job).replace("budget exhausted: ", "spent: ")
            table.add_row(
                label,
                budget_bar(job.budget, self.state_styles, BAR),
                text + (" · b raises it" if job.budget_exhausted else ""),
                key=f"job:{job.id}",
            )
        for daily in data.daily:
            table.add_row(
                daily.what,
                budget_bar(daily.budget, self.state_styles, BAR),
                daily.budget.text,
                key=daily.what,
            )
        if table.row_count == 0:
            table.add_row(
                Text("no budgets set", style="dim"), "", "budget_usd in a job file", key="none"
            )

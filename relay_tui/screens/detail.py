"""One task in full: facts, executions, its worktree; its output, diff and events in tabs.

The output follows the live execution (only appended bytes are read) and stays at the end
unless the operator scrolls up. It shows the agent's parsed stream (messages, tool calls,
file changes, errors); ``v`` shows the raw lines instead.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Input, RichLog, Static, TabbedContent, TabPane

from relay_engine.git.diffs import Diff, task_diff
from relay_engine.store.db import Store
from relay_engine.store.read_model.executions import ExecutionView
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.details import TaskDetail, task_detail
from relay_tui.data.output import STDOUT_NAME, OutputFollower
from relay_tui.data.stream import StreamItem
from relay_tui.messages import DetailRead, OutputRead
from relay_tui.render.styles import clock_time, short_id
from relay_tui.render.task_facts import failure_text, item_line, summary
from relay_tui.screens.base import ClosesOnce, closable_while_mounting, pane_keys
from relay_tui.widgets.events import EventList, FollowLog
from relay_tui.widgets.keybar import KeyBar

NARROW_WIDTH = 120  # below this the facts and the tabs stack
KEPT_LINES = 20_000


EXECUTION_COLUMNS = ("Run", "Agent", "Try", "Started", "Outcome")


def matches_words(text: str, query: str) -> bool:
    lowered = text.lower()
    return all(word in lowered for word in query.lower().split())


class DetailScreen(ClosesOnce, Screen[None]):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="detail-close"),
        Binding("c", "app.cancel_task", "Cancel", id="cancel"),
        Binding("r", "app.retry_task", "Retry", id="retry"),
        Binding("T", "app.take_over", "Take over/back", id="takeover"),
        Binding("S", "app.say", "Say", id="say"),
        Binding("a", "app.pin", "Pin agent", id="pin"),
        Binding("o", "show_tab('output')", "Output", id="detail-output"),
        Binding("d", "show_tab('diff')", "Diff", id="detail-diff"),
        Binding("e", "show_tab('events')", "Events", id="detail-events"),
        Binding("v", "toggle_raw", "Raw/parsed", id="output-raw"),
        Binding("w", "toggle_wrap", "Wrap", id="output-wrap"),
        Binding("slash", "search", "Search", id="output-search", key_display="/"),
        *pane_keys(),
    ]

    def __init__(self, store: Store, key: str, styles: Mapping[str, str]) -> None:
        super().__init__()
        self.store = store
        self.key = key
        self.state_styles = styles
        self.loaded = threading.Event()
        self.tail_ready = threading.Event()
        self.diff_ready = threading.Event()
        self.raw = False
        self.query_text = ""
        self.items: deque[StreamItem] = deque(maxlen=KEPT_LINES)
        self.raw_lines: deque[str] = deque(maxlen=KEPT_LINES)
        self.follower: OutputFollower | None = None
        self._execution: str | None = None
        self._run_label = ""
        self._execution_rows: list[tuple[str, ...]] = []
        self._repo: tuple[str | None, str, str] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with Horizontal(id="detail-body"):
            with VerticalScroll(id="detail-facts"):
                yield Static(id="detail-summary")
                for section in ("Input", "Result", "Error", "Worktree"):
                    yield Static(section, classes="section")
                    yield Static(id=f"detail-{section.lower()}")
                yield Static("Executions", classes="section")
                yield DataTable(id="executions", cursor_type="none")
            with TabbedContent(id="detail-tabs", initial="output-tab"):
                with TabPane("Output", id="output-tab"):
                    yield FollowLog(id="output", wrap=True, max_lines=KEPT_LINES)
                with TabPane("Diff", id="diff-tab"):
                    yield RichLog(id="diff", wrap=False, markup=False, auto_scroll=False)
                with TabPane("Events", id="events-tab"):
                    yield EventList(id="task-events")
        yield Input(id="output-query", placeholder="search the output: every word must match")
        yield KeyBar()

    @closable_while_mounting
    def on_mount(self) -> None:
        self.query_one("#executions", DataTable).add_columns(*EXECUTION_COLUMNS)
        self.query_one("#output", FollowLog).focus()
        self.reload()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

    def on_unmount(self) -> None:
        if self.follower is not None:
            self.follower.stop.set()

    def action_back(self) -> None:
        """Escape: out of the search box; then clears an active search; then leaves."""
        if self.query_one("#output-query", Input).has_focus:
            self._close_search()
        elif self.query_text:
            self.query_one("#output-query", Input).value = ""
            self.query_text = ""
            self._rerender()
        else:
            self.close_once()

    # -- facts ------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="detail")
    def reload(self) -> None:
        detail = task_detail(self.store, self.key)
        self.post_message(DetailRead(lambda: self._show(detail)))

    @on(DetailRead)
    def _detail_read(self, message: DetailRead) -> None:
        message.show()

    def _show(self, detail: TaskDetail) -> None:
        if not self.is_attached:  # closed while the worker read
            return
        task = detail.task
        title = self.query_one("#detail-title", Static)
        if task is None:
            title.update(Text(f"{self.key}: no such task"))
            self.loaded.set()
            self.tail_ready.set()
            return
        title.update(Text.assemble((f" {task.key} ", "bold reverse"), " ", task.title))
        self.query_one("#detail-summary", Static).update(
            summary(
                task,
                detail.diffstat,
                self.state_styles,
                getattr(self.app, "clock", time.time)(),
                detail.wait,
            )
        )
        self.query_one("#detail-input", Static).update(Text(detail.input or "—"))
        self.query_one("#detail-result", Static).update(Text(task.result_summary or "—"))
        self.query_one("#detail-error", Static).update(failure_text(task, detail.executions))
        self.query_one("#detail-worktree", Static).update(worktree_text(detail))
        self._show_executions(detail.executions)
        log = self.query_one("#task-events", EventList)
        log.clear_events()
        log.add_events(detail.events, self.state_styles)
        if detail.job is not None:
            self._repo = (detail.job.repo_path, task.job_id, task.task_id)
            if not self.diff_ready.is_set():
                self.load_diff()
        self._follow(task, detail.executions)
        self.loaded.set()

    def _show_executions(self, executions: Sequence[ExecutionView]) -> None:
        """The runs, newest first; rewritten only when they changed."""
        rows: list[tuple[str, ...]] = []
        for ex in executions:
            outcome = (ex.outcome or "ended") if ex.ended_at else "running"
            if ex.exit_code not in (None, 0):
                outcome = f"{outcome} (exit {ex.exit_code})"
            rows.append(
                (
                    short_id(ex.id),
                    ex.agent or "",
                    str(ex.attempt),
                    clock_time(ex.started_at),
                    outcome,
                )
            )
        if rows == self._execution_rows:
            return
        self._execution_rows = rows
        table = self.query_one("#executions", DataTable)
        table.clear(columns=True)  # widths of their own: auto widths could leave the labels
        for index, label in enumerate(EXECUTION_COLUMNS):  # at the old ones for a frame
            table.add_column(label, width=max([len(label), *(len(row[index]) for row in rows)]))
        table.add_rows(rows)

    # -- output -------------------------------------------------------------------------
    def _follow(self, task: TaskView, executions: Sequence[ExecutionView]) -> None:
        current = next((e for e in executions if e.id == task.execution_id), None)
        chosen = current or (executions[0] if executions else None)
        if chosen is None or not chosen.artifact_dir:
            self._run_label = "no execution yet"
            self._show_search(0)
            self.tail_ready.set()
            return
        if self.follower is not None and chosen.id == self._execution:
            self.follower.finished = chosen.ended_at is not None
            return
        if self.follower is not None:
            self.follower.stop.set()
        self._execution = chosen.id
        self.items.clear()
        self.raw_lines.clear()
        self.query_one("#output", FollowLog).clear()
        self._run_label = f"execution {short_id(chosen.id)} · {chosen.provider or '?'}"
        self._show_search(0)
        execution_id = chosen.id

        def deliver(items: list[StreamItem], raw: list[str], restarted: bool) -> None:
            self.post_message(OutputRead(execution_id, items, raw, restarted))

        self.follower = OutputFollower(
            Path(chosen.artifact_dir) / STDOUT_NAME, chosen.provider, deliver
        )
        self.follower.finished = chosen.ended_at is not None
        self.follower.start()

    @on(OutputRead)
    def _output_read(self, message: OutputRead) -> None:
        if message.execution_id != self._execution:
            return
        log = self.query_one("#output", FollowLog)
        if message.restarted and (self.items or self.raw_lines):
            self.items.clear()
            self.raw_lines.clear()
            log.clear()
        self.items.extend(message.items)
        self.raw_lines.extend(message.raw)
        log.add(self._lines(message.items, message.raw))
        self.tail_ready.set()

    def _lines(self, items: Iterable[StreamItem], raw: Iterable[str]) -> Iterable[Text]:
        if self.raw:
            lines = (Text(line, end="") for line in raw)
        else:
            lines = (item_line(item) for item in items)
        if not self.query_text:
            return lines
        query = self.query_text
        shown = [line for line in lines if matches_words(line.plain, query)]
        for line in shown:
            line.highlight_words(query.split(), style="reverse", case_sensitive=False)
        return shown

    def _rerender(self) -> None:
        log = self.query_one("#output", FollowLog)
        log.clear()
        log.following = True
        lines = list(self._lines(self.items, self.raw_lines))
        log.add(lines)
        self._show_search(len(lines))

    def _show_search(self, matched: int) -> None:
        """The output's title says a search is on (and how to leave it), or what runs."""
        log = self.query_one("#output", FollowLog)
        self.set_class(bool(self.query_text), "-searched")
        if self.query_text:
            noun = "line" if matched == 1 else "lines"
            log.border_title = Text(f"⧩ search: {self.query_text} · {matched} {noun} · esc clears")
        else:
            log.border_title = Text(self._run_label)

    def action_toggle_raw(self) -> None:
        self.raw = not self.raw
        self._rerender()
        self.notify("raw output" if self.raw else "parsed output", timeout=2)

    def action_toggle_wrap(self) -> None:
        log = self.query_one("#output", FollowLog)
        log.wrap = not log.wrap
        self._rerender()

    def action_search(self) -> None:
        self.add_class("-searching")
        self.query_one(TabbedContent).active = "output-tab"
        box = self.query_one("#output-query", Input)
        box.value = self.query_text
        box.focus()

    @on(Input.Changed, "#output-query")
    def _query_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self._rerender()

    @on(Input.Submitted, "#output-query")
    def _query_submitted(self) -> None:
        self._close_search()

    def _close_search(self) -> None:
        self.remove_class("-searching")
        self.query_one("#output", FollowLog).focus()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = f"{tab}-tab"
        widget = {"output": "#output", "diff": "#diff", "events": "#task-events"}[tab]
        self.query_one(widget).focus()

    # -- diff ---------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="diff")
    def load_diff(self) -> None:
        assert self._repo is not None
        diff = task_diff(*self._repo)
        self.post_message(DetailRead(lambda: self._show_diff(diff)))

    def _show_diff(self, diff: Diff) -> None:
        if not self.is_attached:  # closed while the worker read
            return
        log = self.query_one("#diff", RichLog)
        log.clear()
        if diff.missing:
            log.write(Text(diff.missing, style="dim"))
        else:
            log.write(Text(f"{diff.branch} against {diff.base} (where it was cut)", style="bold"))
            log.write(Text(diff.stat or "no changes"))
            if diff.text:
                log.write(Syntax(diff.text, "diff", theme="ansi_dark", background_color="default"))
            if diff.truncated:
                log.write(Text("… diff cut here: it is too long to show whole", style="dim"))
        log.scroll_home(animate=False)
        self.diff_ready.set()


def worktree_text(detail: TaskDetail) -> Text:
    latest = detail.executions[0] if detail.executions else None
    if latest is None or not latest.cwd:
        return Text("—")
    exists = Path(latest.cwd).exists()
    return Text.assemble(latest.cwd, ("" if exists else "  (removed after the run)", "dim"))

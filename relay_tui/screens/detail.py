"""One task in full: input, result, error, executions, live output tail and its events."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import watchfiles
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Log, Static
from textual.worker import get_current_worker

from relay_engine.store import Store
from relay_tui.data import task_detail
from relay_tui.messages import OutputTailed
from relay_tui.screens.main import fit_footer
from relay_tui.widgets.panes import EventLog
from relay_tui.widgets.style import clock_time, styled

NARROW_WIDTH = 120  # below this the facts and the live output stack
STDOUT_NAME = "stdout.txt"
TAIL_BYTES = 16_384
TAIL_LINES = 200


def read_tail(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]
    return lines[-TAIL_LINES:]


class DetailScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back", id="detail-close"),
        Binding("c", "app.cancel_task", "Cancel", id="cancel"),
        Binding("r", "app.retry_task", "Retry", id="retry"),
        Binding("a", "app.pin", "Pin agent", id="pin"),
    ]

    def __init__(self, store: Store, key: str, styles: dict[str, str]) -> None:
        super().__init__()
        self.store = store
        self.key = key
        self.state_styles = styles
        self.loaded = threading.Event()
        self.tail_ready = threading.Event()
        self._tail_source: str | None = None
        self._tail_stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with Horizontal(id="detail-body"):
            with VerticalScroll(id="detail-facts"):
                yield Static(id="detail-summary")
                yield Static("Input", classes="section")
                yield Static(id="detail-input")
                yield Static("Result", classes="section")
                yield Static(id="detail-result")
                yield Static("Error", classes="section")
                yield Static(id="detail-error")
                yield Static("Executions", classes="section")
                table: DataTable[Any] = DataTable(id="executions", cursor_type="none")
                yield table
            with Vertical(id="detail-live"):
                yield Log(id="tail", max_lines=TAIL_LINES)
                yield EventLog(id="task-events")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tail").border_title = "Output (live)"
        self.query_one("#task-events").border_title = "Events"
        self.query_one("#executions", DataTable).add_columns(
            "Run", "Agent", "Try", "Started", "Ended", "Outcome"
        )
        self.reload()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")
        fit_footer(self.query_one(Footer), event.size.width)

    def on_unmount(self) -> None:
        self._tail_stop.set()

    @work(thread=True, exclusive=True, group="detail")
    def reload(self) -> None:
        detail = task_detail(self.store, self.key)
        self.app.call_from_thread(self._show, detail)

    def _show(self, detail: dict[str, Any]) -> None:
        task = detail["task"]
        title = self.query_one("#detail-title", Static)
        if task is None:
            title.update(f"{self.key}: no such task")
            self.loaded.set()
            return
        title.update(Text.assemble((f" {task.key} ", "bold reverse"), " ", task.title or ""))
        self.query_one("#detail-summary", Static).update(summary(task, self.state_styles))
        self.query_one("#detail-input", Static).update(Text(task.input or "—"))
        self.query_one("#detail-result", Static).update(Text(task.result_summary or "—"))
        self.query_one("#detail-error", Static).update(Text(task.error or "—"))
        self._show_executions(detail["executions"])
        log = self.query_one("#task-events", EventLog)
        log.clear()
        log.add_events(detail["events"], self.state_styles)
        self._follow(task, detail["executions"])
        self.loaded.set()

    def _show_executions(self, executions: list[Any]) -> None:
        table = self.query_one("#executions", DataTable)
        table.clear()
        for ex in executions:
            outcome = ex.outcome or ""
            if ex.exit_code not in (None, 0):
                outcome = f"{outcome} (exit {ex.exit_code})"
            table.add_row(
                ex.id[:8],
                ex.agent or "",
                str(ex.attempt),
                clock_time(ex.started_at),
                clock_time(ex.ended_at) if ex.ended_at else "running",
                outcome,
            )

    def _follow(self, task: Any, executions: list[Any]) -> None:
        current = next((e for e in executions if e.id == task.execution_id), None)
        chosen = current or (executions[0] if executions else None)
        if chosen is None or not chosen.artifact_dir:
            self.tail_ready.set()
            return
        if chosen.artifact_dir == self._tail_source:
            return
        self._tail_source = chosen.artifact_dir
        self._tail_stop.set()
        self._tail_stop = threading.Event()
        self.query_one("#tail", Log).border_subtitle = f"execution {chosen.id[:8]}"
        self.tail(Path(chosen.artifact_dir) / STDOUT_NAME, chosen.id, self._tail_stop)

    @work(thread=True, exclusive=True, group="tail")
    def tail(self, path: Path, execution_id: str, stop: threading.Event) -> None:
        """Follow the stdout artifact with watchfiles until the screen closes."""
        worker = get_current_worker()
        self.post_message(OutputTailed(execution_id, read_tail(path)))
        while not path.parent.exists() and not stop.wait(0.5):
            pass
        last: list[str] | None = None
        for _changes in watchfiles.watch(
            path.parent, stop_event=stop, yield_on_timeout=True, rust_timeout=1000, debounce=50
        ):
            if worker.is_cancelled or stop.is_set():
                return
            lines = read_tail(path)
            if lines != last:
                last = lines
                self.post_message(OutputTailed(execution_id, lines))

    @on(OutputTailed)
    def _tailed(self, message: OutputTailed) -> None:
        log = self.query_one("#tail", Log)
        log.clear()
        log.write_lines(message.lines or ["(no output yet)"])
        self.tail_ready.set()


def summary(task: Any, styles: dict[str, str]) -> Text:
    state = "BLOCKED" if task.state == "DRAFT" and task.blocked_by else str(task.state)
    text = Text()
    text.append_text(styled(state.lower(), state, styles))
    text.append(f" · try {task.attempt}/{task.max_attempts} · wave {task.wave} · role {task.role}")
    if task.agent:
        text.append(f"\nagent {task.agent} on {task.provider or '?'}")
    if task.dependencies:
        text.append("\ndepends on " + ", ".join(task.dependencies))
    if task.blocked_by:
        text.append(f"\nblocked by {task.blocked_by}")
    if task.waiting_on_provider:
        text.append(f"\nwaiting on {task.waiting_on_provider} until {clock_time(task.not_before)}")
    if task.started_at:
        ended = clock_time(task.finished_at) if task.finished_at else "now"
        text.append(f"\nran {clock_time(task.started_at)} → {ended}")
    return text

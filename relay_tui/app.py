"""``relay-tui``: the live operator console, with an embedded engine or attached to a database."""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import Input
from textual.worker import get_current_worker

from relay_engine.config import ConfigError, RelayConfig, load_config
from relay_engine.store import Store
from relay_tui.commands import RelayCommands
from relay_tui.data import AgentView, Projection, Snapshot, TaskView
from relay_tui.messages import CommandSent, EngineStopped, SnapshotLoaded, TaskSelected
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.modals import ConfirmScreen, GuidanceScreen, PinScreen
from relay_tui.widgets.style import palette

MIN_FRAME_SECONDS = 0.05  # at most 20 snapshots a second reach the UI
MAX_FRAME_SECONDS = 1.0
BUSY_SHARE = 0.25
"""Under load, snapshots come no faster than keeps the UI thread this busy with them, so
key presses always find it free."""
ENGINE_STOP_TIMEOUT = 20.0
RETRYABLE = frozenset({"FAILED", "CANCELLED"})
FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
JOB_FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "MERGED", "CLOSED"})
CONFIG_EVENTS = {"config.reloaded": "information", "config.invalid": "error"}


class RelayApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "relay"
    COMMANDS = App.COMMANDS | {RelayCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(
        self,
        workspace: Path,
        *,
        db_url: str | None = None,
        demo: bool = False,
        store: Store | None = None,
        config: RelayConfig | None = None,
        clock: Callable[[], float] = time.time,
        blink: bool = True,
        poll_interval: float = 1.0,
    ) -> None:
        super().__init__()
        self.workspace = Path(workspace)
        self.attached = db_url is not None
        self.demo = demo
        self.config = config or load_config(self.workspace)
        self.store = store or Store.for_workspace(self.workspace, db_url)
        self.clock = clock
        self.blink = blink
        self.poll_interval = poll_interval
        self.engine: Any = None
        self.snapshot: Snapshot | None = None
        self.selected_key: str | None = None
        self.selected_job: str | None = None
        self.query_text = ""
        self.state_styles: dict[str, str] = {}
        self.apply_seconds: list[float] = []
        self.ui_busy_seconds = 0.0
        self._nudge = threading.Event()
        self._consumed = threading.Event()
        self._reader_stop = threading.Event()
        self._engine_stop = threading.Event()
        self._engine_done = threading.Event()
        self._quit_started = False

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        svg = super().export_screenshot(title=title, simplify=simplify)
        # Without it rsvg drops each span's leading space ("✔schema", "running· try 1/3").
        return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)

    # -- lifecycle --------------------------------------------------------------------
    def get_default_screen(self) -> Screen[Any]:
        return MainScreen()

    @property
    def main_screen(self) -> MainScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.state_styles = palette(self.get_css_variables())
        if self.config.keymap:
            self.set_keymap(dict(self.config.keymap))
        self._consumed.set()
        if not self.attached:
            self.run_engine()
        else:
            self._engine_done.set()
        self.set_interval(1.0, self._tick)
        self._update_status()

    def on_ready(self) -> None:
        """The panes exist now, so snapshots can be applied to them."""
        self.read_loop()

    def on_unmount(self) -> None:
        self._reader_stop.set()
        self._nudge.set()
        self._consumed.set()
        if self.engine is not None and not self._engine_done.is_set():
            self._stop_engine_now(timeout=5.0)

    # -- background work --------------------------------------------------------------
    @work(thread=True, exclusive=True, group="reader", exit_on_error=False)
    def read_loop(self) -> None:
        """Read the change feed off the UI thread.

        At most one snapshot is in flight: the next is read (coalescing every change since)
        only once the UI has applied and painted the previous one, and no sooner than
        :data:`BUSY_SHARE` of the UI's time allows.
        """
        worker = get_current_worker()
        projection = Projection(self.store)
        while not (worker.is_cancelled or self._reader_stop.is_set()):
            started = time.monotonic()
            while not self._consumed.wait(0.25):
                if worker.is_cancelled or self._reader_stop.is_set():
                    return
            pace = min(MAX_FRAME_SECONDS, self.ui_busy_seconds / BUSY_SHARE)
            try:
                snapshot = projection.load()
            except Exception as error:  # a transient DB error must not kill the console
                self.call_from_thread(
                    self.notify, f"reading the database failed: {error}", severity="error"
                )
                self._reader_stop.wait(2.0)
                continue
            self._consumed.clear()
            self.post_message(SnapshotLoaded(snapshot))
            self._nudge.wait(self.poll_interval)
            self._nudge.clear()
            rest = max(MIN_FRAME_SECONDS, pace) - (time.monotonic() - started)
            if rest > 0:
                self._reader_stop.wait(rest)

    @work(thread=True, exclusive=True, group="engine", exit_on_error=False)
    def run_engine(self) -> None:
        try:
            try:
                from relay_engine.engine import Engine

                engine = Engine(self.workspace, store=self.store, config=self.config)
            except Exception as error:
                self.post_message(EngineStopped(f"the engine could not start: {error}"))
                return
            engine.subscribe(self._nudge.set)
            self.engine = engine
            if self._engine_stop.is_set():
                return
            try:
                engine.run(self._engine_stop)
            except Exception as error:
                self.post_message(EngineStopped(f"the engine stopped: {error!r}"))
                return
            self.post_message(EngineStopped(None))
        finally:
            self._engine_done.set()

    def _stop_engine_now(self, timeout: float) -> None:
        """Blocking: stop the engine, release its agents, wait for its thread to end."""
        self._engine_stop.set()
        if self.engine is not None:
            try:
                self.engine.stop(release=True, timeout=timeout)
            except Exception as error:  # the console must still exit
                print(f"relay-tui: stopping the engine failed: {error}", file=sys.stderr)
        self._engine_done.wait(timeout)

    @work(thread=True, exclusive=True, group="shutdown", exit_on_error=False)
    def shutdown(self) -> None:
        self._stop_engine_now(ENGINE_STOP_TIMEOUT)
        self.call_from_thread(self.exit)

    @work(thread=True, group="commands", exit_on_error=False)
    def send_command(self, kind: str, payload: dict[str, Any]) -> None:
        """Commands go through the engine's inbox when embedded, the Command table otherwise."""
        try:
            if self.engine is not None:
                command_id = self.engine.submit_command(kind, payload)
            else:
                command_id = self.store.enqueue_command(kind, payload)
        except Exception as error:
            self.post_message(CommandSent(kind, payload, None, str(error)))
            return
        self.post_message(CommandSent(kind, payload, command_id))
        self._nudge.set()

    # -- messages ---------------------------------------------------------------------
    @on(SnapshotLoaded)
    def _snapshot_loaded(self, message: SnapshotLoaded) -> None:
        started = time.perf_counter()
        snapshot = message.snapshot
        previous, self.snapshot = self.snapshot, snapshot
        try:
            self.main_screen.apply_snapshot(
                snapshot, self.query_text, self.state_styles, self.clock()
            )
        except NoMatches:  # the console is shutting down: its panes are gone
            self._consumed.set()
            return
        self._update_status()
        if isinstance(self.screen, DetailScreen) and self.screen.key in snapshot.changed_tasks:
            self.screen.reload()
        self._notify_changes(previous, snapshot)
        self.apply_seconds.append(time.perf_counter() - started)
        self.call_after_refresh(self._snapshot_painted, started)

    def _snapshot_painted(self, started: float) -> None:
        self.ui_busy_seconds = time.perf_counter() - started
        self._consumed.set()

    @on(TaskSelected)
    def _task_selected(self, message: TaskSelected) -> None:
        self.selected_key = message.key
        self.selected_job = message.job_id

    @on(CommandSent)
    def _command_sent(self, message: CommandSent) -> None:
        target = message.payload.get("task") or message.payload.get("job") or ""
        if message.error:
            self.notify(f"{message.kind} {target} failed: {message.error}", severity="error")
        else:
            self.notify(f"{message.kind} {target} sent", title="command")

    @on(EngineStopped)
    def _engine_stopped(self, message: EngineStopped) -> None:
        if message.error:
            self.notify(message.error, severity="error", timeout=10)
        self._update_status()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        if self.snapshot is not None:
            self.main_screen.refilter(self.snapshot, self.query_text, self.state_styles)
        self._update_status()

    def _tick(self) -> None:
        if self.snapshot is not None:
            self.main_screen.tick(self.snapshot, self.clock(), self.state_styles)

    # -- notifications ----------------------------------------------------------------
    def _notify_changes(self, previous: Snapshot | None, snapshot: Snapshot) -> None:
        if previous is None:
            return
        self._notify_config(snapshot)
        for key in snapshot.changed_tasks:
            task = snapshot.tasks.get(key)
            if task and task.state == "FAILED" and snapshot.previous_states.get(key) != "FAILED":
                self._alert(
                    "task.failed", f"{key} failed: {task.error or 'no error text'}", "error"
                )
        before_jobs = {job.id: job.state for job in previous.jobs}
        for job in snapshot.jobs:
            if job.state in JOB_FINISHED and before_jobs.get(job.id, "ACTIVE") not in JOB_FINISHED:
                self._alert("job.finished", f"job {job.id} {job.state.lower()}", "information")
        before_providers = {p.provider: p.status for p in previous.providers}
        for provider in snapshot.providers:
            if provider.status == "ok" and before_providers.get(provider.provider) == "limited":
                self._alert(
                    "provider.recovered", f"{provider.provider} is available again", "information"
                )

    def _notify_config(self, snapshot: Snapshot) -> None:
        """Editing relay.toml always gets an answer: reloaded, or why it was not."""
        for event in snapshot.new_events:
            severity = CONFIG_EVENTS.get(event.kind)
            if severity is None:
                continue
            error = severity == "error"
            self.notify(
                event.message, title=event.kind, severity=severity, timeout=12 if error else 5
            )  # type: ignore[arg-type]
            if not error and self.engine is not None:
                self._adopt_config(self.engine.config)

    def _adopt_config(self, config: RelayConfig) -> None:
        """Keys and notification settings follow a reloaded relay.toml."""
        self.config = config
        if config.keymap:
            self.set_keymap(dict(config.keymap))

    def _alert(self, kind: str, text: str, severity: str) -> None:
        settings = self.config.notifications
        if kind not in settings.on:
            return
        if settings.bell:
            self.bell()
        if settings.toast:
            self.notify(text, title=kind, severity=severity)  # type: ignore[arg-type]

    def _update_status(self) -> None:
        if not self.screen_stack:
            return
        self.main_screen.set_status(status_line(self))

    # -- actions ----------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in {"help", "quit"} and isinstance(self.screen, ModalScreen))

    def _selected_task(self) -> TaskView | None:
        task = self.snapshot.tasks.get(self.selected_key or "") if self.snapshot else None
        if task is None:
            self.notify("Select a task first (arrow keys in Jobs & tasks).", severity="warning")
        return task

    def _selected_job_id(self) -> str | None:
        if self.selected_job:
            return self.selected_job
        jobs = self.snapshot.jobs if self.snapshot else ()
        if len(jobs) == 1:
            return jobs[0].id
        self.notify("Select a job (or one of its tasks) first.", severity="warning")
        return None

    def action_cancel_task(self) -> None:
        task = self._selected_task()
        if task is None:
            return
        if task.state in FINISHED:
            self.notify(f"{task.key} already {task.state.lower()}.", severity="warning")
            return
        question = f"Cancel {task.key} ({task.state.lower()})?\nA running agent is stopped."

        def answered(yes: bool | None) -> None:
            if yes:
                self.send_command("cancel", {"task": task.key})

        self.push_screen(ConfirmScreen("Cancel task", question, yes="Cancel task"), answered)

    def action_retry_task(self) -> None:
        task = self._selected_task()
        if task is None:
            return
        if task.state not in RETRYABLE:
            self.notify(
                f"Only failed or cancelled tasks can be retried ({task.key} is {task.state.lower()}).",
                severity="warning",
            )
            return
        self.send_command("retry", {"task": task.key})

    def action_replan(self) -> None:
        job = self._selected_job_id()
        if job is None:
            return

        def answered(guidance: str | None) -> None:
            if guidance is not None:
                self.send_command("replan", {"job": job, "guidance": guidance})

        self.push_screen(GuidanceScreen(job, blink=self.blink), answered)

    def action_pin(self) -> None:
        task = self._selected_task()
        if task is None or self.snapshot is None:
            return
        agents = eligible_agents(self.snapshot.agents or config_agents(self.config), task.role)

        def answered(agent_id: str | None) -> None:
            if agent_id:
                self.send_command("pin", pin_payload(task, agent_id))

        self.push_screen(PinScreen(task.key, agents, self.snapshot.providers), answered)

    def action_approve(self) -> None:
        job = self._selected_job_id()
        if job is None or self.snapshot is None:
            return
        waiting = [w for w in self.snapshot.waves if w.job_id == job and w.awaiting_approval]
        wave = f"wave {waiting[0].wave}" if waiting else "the next wave"

        def answered(yes: bool | None) -> None:
            if yes:
                self.send_command("approve", {"job": job})

        question = f"Approve {wave} of {job}?\nIts tasks start as soon as agents are free."
        self.push_screen(ConfirmScreen("Approve wave", question, yes="Approve"), answered)

    def action_detail(self) -> None:
        task = self._selected_task()
        if task is not None:
            self.push_screen(DetailScreen(self.store, task.key, self.state_styles))

    def action_filter(self) -> None:
        if self.screen is self.main_screen:
            self.main_screen.open_filter()

    def action_clear_filter(self) -> None:
        if self.screen is self.main_screen:
            self.main_screen.close_filter(clear=True)

    def action_next_pane(self) -> None:
        if self.screen is self.main_screen:
            self.main_screen.show_pane(self.main_screen.active_pane + 1)

    def action_previous_pane(self) -> None:
        if self.screen is self.main_screen:
            self.main_screen.show_pane(self.main_screen.active_pane - 1)

    def action_help(self) -> None:
        bindings = [*MainScreen.BINDINGS, *DetailScreen.BINDINGS[:1], *self.BINDINGS]
        self.push_screen(HelpScreen(bindings, dict(self.config.keymap)))

    async def action_quit(self) -> None:
        if self._quit_started:
            return
        if self.engine is None or self._engine_done.is_set():
            self._quit_started = True
            self.exit()
            return
        live = self.engine.live_count()
        if live and not self.demo:
            question = (
                f"{live} agent(s) are running. Quitting stops them; their tasks go back to "
                "the queue without spending an attempt."
            )
            self.push_screen(
                ConfirmScreen("Quit relay", question, yes="Stop agents and quit"),
                self._quit_answered,
            )
            return
        self._begin_shutdown()

    def _quit_answered(self, yes: bool | None) -> None:
        if yes:
            self._begin_shutdown()

    def _begin_shutdown(self) -> None:
        self._quit_started = True
        self.notify("Stopping the engine and its agents…", timeout=30)
        self.shutdown()


def eligible_agents(agents: Any, role: str) -> list[AgentView]:
    return [a for a in agents if a.enabled and (not a.roles or role in a.roles)]


def config_agents(config: RelayConfig) -> tuple[AgentView, ...]:
    """Agents from relay.toml, for when no engine has published AgentRecords yet."""
    return tuple(AgentView(a.id, a.provider, tuple(a.roles), a.enabled) for a in config.agents)


def pin_payload(task: TaskView, agent_id: str) -> dict[str, Any]:
    if task.workstream:
        return {
            "job": task.job_id,
            "workstream": task.workstream,
            "role": task.role,
            "agent": agent_id,
        }
    return {"task": task.key, "agent": agent_id}


def status_line(app: RelayApp) -> str:
    snapshot = app.snapshot
    if app.attached:
        mode = f"attached · {Path(app.store.display_url().split('///')[-1]).name}"
    elif app.demo:
        mode = "demo · embedded engine"
    else:
        mode = "embedded engine" if not app._engine_done.is_set() else "engine stopped"
    parts = [f"[b]relay[/b] · {mode}"]
    if snapshot is not None:
        counts = snapshot.state_counts
        parts.append(f"{len(snapshot.jobs)} jobs · {len(snapshot.runs)} running")
        parts.append(f"{counts.get('PARKED', 0)} parked · {counts.get('FAILED', 0)} failed")
    else:
        parts.append("loading…")
    if app.query_text:
        parts.append("filter: " + escape(app.query_text))
    return " · ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="relay-tui", description="The relay operator console.")
    parser.add_argument(
        "--workspace", type=Path, default=Path.cwd(), help="workspace directory (default: cwd)"
    )
    parser.add_argument("--db", metavar="URL", help="attach to this database; no embedded engine")
    parser.add_argument(
        "--demo", action="store_true", help="run sim agents in a throw-away workspace"
    )
    args = parser.parse_args(argv)
    workspace: Path = args.workspace
    if args.demo:
        from relay_tui.demo import make_demo_workspace

        workspace = make_demo_workspace()
    try:
        app = RelayApp(workspace, db_url=args.db, demo=args.demo)
    except ConfigError as error:
        print(f"relay-tui: {error}", file=sys.stderr)
        return 2
    try:
        app.run()
    finally:
        app.store.dispose()
        if args.demo:
            shutil.rmtree(workspace, ignore_errors=True)
    return 0

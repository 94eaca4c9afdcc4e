"""``relay-tui``: the live operator console, with an embedded engine or attached to a database.

The app wires three things together: the reader thread (:mod:`relay_tui.data.feed`) that
turns the change feed into snapshots, the embedded engine (:mod:`relay_tui.engine_thread`),
and the screens. What keys do lives in the mixins of :mod:`relay_tui.actions`.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

from textual import on, work
from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.command import CommandListItem, SimpleProvider
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.theme import ThemeProvider
from textual.widget import AwaitMount, MountError

from relay_engine.contracts.config import RelayConfig, load_config
from relay_engine.contracts.time_format import limit_words
from relay_engine.core.states import TERMINAL_JOB_STATES, JobState, TaskState
from relay_engine.ops.commands import OperatorCommand, enqueue
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind
from relay_tui.actions.agents import AgentActions
from relay_tui.actions.asks import AskActions
from relay_tui.actions.jobs import JobActions
from relay_tui.actions.keymap import checked_keymap
from relay_tui.actions.navigation import NavigationActions
from relay_tui.actions.palette import ActionPalette, SafePalette
from relay_tui.actions.takeover import TakeOverActions
from relay_tui.actions.target import screen_target
from relay_tui.actions.tasks import TaskActions
from relay_tui.crash import write_crash_report
from relay_tui.data.feed import FeedReader
from relay_tui.data.snapshot import CommandView, Snapshot
from relay_tui.engine_thread import EngineThread
from relay_tui.messages import CommandQueued, CursorMoved, EngineStopped, FeedFailed, SnapshotLoaded
from relay_tui.render.header import fleet_line, plural, status_line
from relay_tui.render.styles import theme_styles
from relay_tui.render.terminal import ControlCharacters
from relay_tui.render.words import english
from relay_tui.screens.bindings import binding_groups
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.live_table import SortableTable

CONFIG_EVENTS: dict[str, SeverityLevel] = {
    EventKind.CONFIG_RELOADED: "information",
    EventKind.CONFIG_INVALID: "error",
}
PLANNER_EVENTS: dict[str, SeverityLevel] = {
    EventKind.PLAN_REJECTED: "warning",
    EventKind.PLAN_FAILED: "error",
}
ERROR_TOAST_SECONDS = 15
APPLIED_KEPT = 10_000
CONTROL_CHARACTERS = ControlCharacters()


LEAVING_ERRORS = (MountError, NoMatches, ScreenStackError)
"""What a UI callback meets when it runs after the console began to quit."""


class RelayApp(
    NavigationActions,
    TaskActions,
    JobActions,
    AgentActions,
    AskActions,
    TakeOverActions,
    App[None],
):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    TITLE = "relay"
    COMMANDS = App.COMMANDS | {ActionPalette}
    BINDINGS: ClassVar[list[Any]] = [
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
        self.demo = demo
        self.config = config or load_config(self.workspace)
        self.store = store or Store.for_workspace(self.workspace, db_url)
        # A workspace we may not write (a read-only mount) is watched, never run.
        self.attached = db_url is not None or self.store.readonly
        self.store.wakes_engines = self.attached  # the engines it steers run elsewhere
        self.clock = clock
        self.blink = blink
        self.snapshot: Snapshot | None = None
        self.state_styles: dict[str, str] = {}
        self.applied: deque[tuple[float, int]] = deque(maxlen=APPLIED_KEPT)
        """(CPU seconds of the UI thread, tasks changed) per recent snapshot: for bench/."""
        self.crash_report: Path | None = None
        self.crash_error: BaseException | None = None
        self.feed = FeedReader(
            self.store,
            deliver=self._post_snapshot,
            failed=self._post_feed_failure,
            poll_interval=poll_interval,
            lease_seconds=self.config.engine.lease_seconds,
            clock=clock,
            config=self.config,
        )
        self.engine: EngineThread | None = None
        if not self.attached:
            self.engine = EngineThread(
                self.workspace,
                self.store,
                self.config,
                on_change=self.feed.nudge,
                on_stopped=self._post_engine_stop,
            )
        self._quit_started = False
        self._approve_offered: bool | None = None
        self._on_applied: dict[int, Callable[[bool], None]] = {}
        self._asks_seen: set[int] | None = None
        self.keymap_in_use: dict[str, str] = {}
        """relay.toml's keymap less the entries refused for a clash (what help lists)."""

    # Called from the feed's and the engine's threads: posting a message is thread-safe.
    def _post_snapshot(self, snapshot: Snapshot) -> None:
        self.post_message(SnapshotLoaded(snapshot))

    def _post_feed_failure(self, error: str) -> None:
        self.post_message(FeedFailed(error))

    def _post_engine_stop(self, error: str | None) -> None:
        self.post_message(EngineStopped(error))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Plain text unless a caller asks for markup: a toast quotes a task's error, a
        planner's rejection or a command's refusal, and Textual read ``[/usr/bin/x]`` in
        them as a closing tag that matched nothing, which ended the console. Widgets'
        ``notify`` pass their own ``markup=True``; relay's screens say only fixed words in
        theirs."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters (monochrome under NO_COLOR), then no control characters."""
        return [*super().get_line_filters(), CONTROL_CHARACTERS]

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        svg = super().export_screenshot(title=title, simplify=simplify)
        # Without it rsvg drops each span's leading space ("✔schema", "running· try 1/3").
        return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)

    def action_command_palette(self) -> None:
        """Textual's palette with page moves that cannot crash (see :class:`SafePalette`).

        One palette in the stack at a time, and without Textual's fixed id: a palette still
        being removed, or under another screen, is not the current screen, and a second
        one with that id ended the console (``DuplicateIds``, found by a tmux key burst)."""
        if self.use_command_palette and not any(
            isinstance(screen, SafePalette) for screen in self.screen_stack
        ):
            self.push_screen(SafePalette())

    def search_themes(self) -> None:
        """The palette's "Theme" command opens a palette of its own: the safe kind too."""
        self.push_screen(SafePalette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def search_commands(
        self, commands: Sequence[CommandListItem], placeholder: str = "Search for commands…"
    ) -> AwaitMount:
        return self.push_screen(
            # textual types providers as classes, yet its own search_commands passes this
            SafePalette(
                providers=[SimpleProvider(self.screen, list(commands))],  # type: ignore[list-item]
                placeholder=placeholder,
            )
        )

    # -- lifecycle --------------------------------------------------------------------
    def get_default_screen(self) -> Screen[Any]:
        return MainScreen()

    @property
    def main_screen(self) -> MainScreen:
        """get_default_screen's. Once the app has closed its screens (quitting), a timer or a
        message still queued finds none: NoMatches, as a query of its gone panes would."""
        if not self.screen_stack:
            raise NoMatches("the console is closing: its main screen is gone")
        return cast(MainScreen, self.screen_stack[0])

    def on_mount(self) -> None:
        self.state_styles = theme_styles(self.get_css_variables())
        self._apply_keymap(self.config)
        if self.engine is not None:
            self.engine.start()
        self.set_interval(1.0, self._tick)

    def on_ready(self) -> None:
        """The panes exist now, so snapshots can be applied to them."""
        self.update_status()
        self.feed.start()

    def on_unmount(self) -> None:
        self.feed.stop()
        if self.engine is not None and self.engine.running:
            self.engine.stop(timeout=5.0)

    def _handle_exception(self, error: Exception) -> None:
        """A crash: keep the traceback in a file (the CLI names it) and exit non-zero.

        Once ``exit()`` has run, Textual reports every screen detached, refuses to mount on
        it and closes the screens. A callback queued before (the palette's Keys command
        picked in the burst that quit) then finds no screen, pane or place to mount on a
        console that is leaving anyway: that is no crash, and the quit stays clean."""
        if isinstance(error, LEAVING_ERRORS) and self.return_code is not None:
            return
        if self.crash_report is None:
            self.crash_error = error
            with contextlib.suppress(OSError):  # the demo's workspace is deleted on exit
                self.crash_report = write_crash_report(error, None if self.demo else self.workspace)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Textual would print the whole traceback with locals; the CLI says where it is."""
        self.bell()
        self._close_messages_no_wait()

    # -- commands ---------------------------------------------------------------------
    def _apply_keymap(self, config: RelayConfig) -> None:
        """relay.toml's ``[keymap]``, less the entries that would take a key another action
        has: those are refused with an error toast that names both (Textual would silently
        drop the other binding)."""
        keymap, refusals = checked_keymap(dict(config.keymap), self.all_bindings())
        self.keymap_in_use = keymap
        self.set_keymap(keymap)
        for refusal in refusals:
            self.notify(refusal, title="keymap refused", severity="error", timeout=30)

    @work(thread=True, group="commands", exit_on_error=False)
    def send_command(
        self, command: OperatorCommand, on_applied: Callable[[bool], None] | None = None
    ) -> None:
        """Store the command (the engine's inbox when embedded) and watch for its outcome."""
        if self.store.readonly:
            why = (
                f"{self.store.where} is read-only here: watch only, commands need a "
                "writable database"
            )
            self.post_message(CommandQueued(command.kind, command.payload(), None, why))
            return
        try:
            if self.engine is not None:
                command_id = self.engine.submit(command)
            else:
                command_id = enqueue(self.store, command)
        except Exception as error:
            self.post_message(CommandQueued(command.kind, command.payload(), None, str(error)))
            return
        if on_applied is not None:
            self._on_applied[command_id] = on_applied
        self.feed.watch_command(command_id)
        self.post_message(CommandQueued(command.kind, command.payload(), command_id))
        self.feed.nudge()

    @on(CommandQueued)
    def _command_queued(self, message: CommandQueued) -> None:
        target = command_target(message.payload)
        if message.error:
            self.notify(
                f"{message.kind} {target}: not stored: {message.error}",
                title="command failed",
                severity="error",
                timeout=ERROR_TOAST_SECONDS,
            )
        elif self.snapshot is not None and self.snapshot.fleet.engines_alive == 0:
            self.notify(
                f"{message.kind} {target} is waiting: no engine is running to apply it.",
                title="command queued",
                severity="warning",
            )

    def _command_applied(self, command: CommandView) -> None:
        then = self._on_applied.pop(command.id, None)
        if then is not None:
            then(bool(command.succeeded))
        target = command_target(command.payload)
        outcome = english(limit_words(command.outcome, self.clock()))
        if command.succeeded:
            self.notify(outcome or f"{command.kind} {target} done", title=command.kind)
        else:
            self.notify(
                outcome or f"{command.kind} {target} refused",
                title=f"{command.kind} refused",
                severity="error",
                timeout=ERROR_TOAST_SECONDS,
            )

    # -- messages ---------------------------------------------------------------------
    @on(SnapshotLoaded)
    def _snapshot_loaded(self, message: SnapshotLoaded) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        snapshot = message.snapshot
        previous, self.snapshot = self.snapshot, snapshot
        try:
            self.main_screen.apply_snapshot(snapshot, self.state_styles, self.clock())
        except NoMatches:  # the console is shutting down: its panes are gone
            self.feed.painted(0.0)
            return
        self.update_status()
        screen = self.screen
        if isinstance(screen, DetailScreen) and screen.key in snapshot.changed_tasks:
            screen.reload()
        if isinstance(screen, JobScreen) and screen.concerns(snapshot):
            screen.reload()
        if isinstance(screen, UsageScreen) and screen.concerns(bool(snapshot.new_events)):
            screen.reload()
        for command in snapshot.command_outcomes:
            self._command_applied(command)
        self._ring_for_new_asks(snapshot)
        self._notify_changes(previous, snapshot)
        self.applied.append((time.thread_time() - cpu, len(snapshot.changed_tasks)))
        self.call_after_refresh(lambda: self.feed.painted(time.perf_counter() - started))

    @on(CursorMoved)
    def _cursor_moved(self, _message: CursorMoved) -> None:
        self.update_status()

    @on(EngineStopped)
    def _engine_stopped(self, message: EngineStopped) -> None:
        if message.error:
            self.notify(message.error, severity="error", timeout=ERROR_TOAST_SECONDS)
        self.update_status()

    @on(FeedFailed)
    def _feed_failed(self, message: FeedFailed) -> None:
        self.notify(message.error, severity="error")

    def _tick(self) -> None:
        if self.snapshot is not None:
            with contextlib.suppress(NoMatches):  # quitting: the panes may be gone already
                self.main_screen.tick(self.snapshot, self.clock(), self.state_styles)
                self.update_status()  # countdowns and heartbeat ages in the header

    # -- notifications ----------------------------------------------------------------
    def _ring_for_new_asks(self, snapshot: Snapshot) -> None:
        """The bell rings once per new ask (not for the ones open when the console started)."""
        ids = {ask.id for ask in snapshot.asks}
        if self._asks_seen is not None:
            for ask in sorted(ids - self._asks_seen):
                self.bell()
                self.notify(
                    f"{ask_word(snapshot, ask)} — 6 shows what waits on you",
                    title="waiting on you",
                    severity="warning",
                )
        self._asks_seen = ids

    def _notify_changes(self, previous: Snapshot | None, snapshot: Snapshot) -> None:
        if previous is None:
            return
        self._notify_events(snapshot)
        failed = TaskState.FAILED
        for key in snapshot.changed_tasks:
            task = snapshot.tasks.get(key)
            if task and task.state == failed and snapshot.previous_states.get(key) != failed:
                why = task.error or "no error text"
                self._alert(EventKind.TASK_FAILED, f"{key} failed: {why}", "error")
        finished = TERMINAL_JOB_STATES
        before_jobs = {job.id: job.state for job in previous.jobs}
        for job in snapshot.jobs:
            if job.state in finished and before_jobs.get(job.id, JobState.ACTIVE) not in finished:
                why = f": {job.error}" if job.error else ""
                text = f"job {job.id} {job.state.lower()}{why}"
                self._alert(EventKind.JOB_FINISHED, text, "information")
        before_providers = {p.provider: p.status for p in previous.providers}
        for provider in snapshot.providers:
            if provider.status == "ok" and before_providers.get(provider.provider) == "limited":
                text = f"{provider.provider} is available again"
                self._alert(EventKind.PROVIDER_RECOVERED, text, "information")

    def _notify_events(self, snapshot: Snapshot) -> None:
        """relay.toml edits and planner rejections always get a toast with the full reason."""
        for event in snapshot.new_events:
            severity = CONFIG_EVENTS.get(event.kind) or PLANNER_EVENTS.get(event.kind)
            if severity is None:
                continue
            error = severity == "error" or event.kind in PLANNER_EVENTS
            self.notify(
                event.message,
                title=event.kind,
                severity="error" if error else severity,
                timeout=ERROR_TOAST_SECONDS if error else 5,
            )
            if event.kind == EventKind.CONFIG_RELOADED and self.engine and self.engine.engine:
                self._adopt_config(self.engine.engine.config)

    def _adopt_config(self, config: RelayConfig) -> None:
        """Keys and notification settings follow a reloaded relay.toml."""
        self.config = config
        self.feed.projection.config = config
        self._apply_keymap(config)

    def _alert(self, kind: EventKind, text: str, severity: SeverityLevel) -> None:
        """A toast and the bell for the kinds relay.toml's ``[notifications] on`` names."""
        settings = self.config.notifications
        if kind not in settings.on:
            return
        if settings.bell:
            self.bell()
        if settings.toast:
            self.notify(text, title=kind, severity=severity)

    def mode_label(self) -> str:
        database = Path(self.store.display_url().split("///")[-1]).name
        if self.store.readonly:
            return f"read-only · {database}"
        if self.attached:
            return f"attached · {database}"
        if self.engine is not None and not self.engine.running and self.engine.engine:
            return "embedded engine stopped"
        return "demo" if self.demo else "embedded"

    def update_status(self) -> None:
        if not self.screen_stack:
            return
        main = self.main_screen
        capacity = self.config.engine.max_concurrent_agents
        width = max(20, main.size.width - 2)
        header = fleet_line(
            self.mode_label(),
            self.snapshot,
            capacity,
            self.state_styles,
            now=self.clock(),
            width=width,
            lines=2 if main.layout_name == "grid" else 1,
        )
        main.set_header(header)
        table = main.active_table()
        sort = table.current_sort if isinstance(table, SortableTable) else None
        main.set_status(
            status_line(
                screen_target(main).label,
                self.snapshot,
                pane=main.active_title(),
                task_query=main.task_query,
                event_query=main.event_query,
                sort=sort if sort not in (None, "wave", "started") else None,
            )
        )
        offered = self.approve_offered()
        if offered != self._approve_offered:
            self._approve_offered = offered
            self.refresh_bindings()

    # -- bindings ---------------------------------------------------------------------
    def approve_offered(self) -> bool:
        """``g`` is offered only for a job with a wave gate."""
        job = self.snapshot.job(self.current_target().job_id) if self.snapshot else None
        return job is not None and job.gated and job.state == JobState.ACTIVE

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in {"help", "quit"}:
            return not isinstance(self.screen, ModalScreen)
        return True

    def key_hidden(self, action: str) -> bool:
        """``g`` works on every job (one without a gate is told so) but is shown for a
        gated one only."""
        return action == "approve" and not self.approve_offered()

    def all_bindings(self) -> list[list[Binding]]:
        """The bindings that are active together, per screen and focused widget: what a
        remapped key must not collide with."""
        return binding_groups(self.BINDINGS)

    # -- quitting ---------------------------------------------------------------------
    async def action_quit(self) -> None:
        if self._quit_started:
            return
        engine = self.engine
        if engine is None or not engine.running:
            self._quit_started = True
            self.exit()
            return
        live = engine.live_count()
        if live and not self.demo:
            question = (
                f"{plural(live, 'agent')} {'is' if live == 1 else 'are'} running. Quitting "
                "stops them; their tasks go back to the queue without spending an attempt."
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

    @work(thread=True, exclusive=True, group="shutdown", exit_on_error=False)
    def shutdown(self) -> None:
        if self.engine is not None:
            self.engine.stop()
        self.call_from_thread(self.exit)


def ask_word(snapshot: Snapshot, ask_id: int) -> str:
    ask = snapshot.ask(ask_id)
    return f"{ask.task_key or ask.job_id}: {ask.waiting}" if ask else f"ask {ask_id}"


def command_target(payload: Any) -> str:
    return str(payload.get("task") or payload.get("job") or "")

"""Keys that move the operator around rather than change anything: open a row, filter, show
a pane, sort, the Usage screen, help; and the target every other key reads first.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`). Every key reads
its target when it arrives (:meth:`NavigationActions.current_target`), never a selection
remembered from earlier events.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding
from textual.screen import ModalScreen

from relay_engine.store.read_model.tasks import TaskView
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.actions.target import Target, screen_target
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.events import EventList, FollowLog
from relay_tui.widgets.jobs import VIEWS, JobsTable
from relay_tui.widgets.live_table import LiveTable
from relay_tui.widgets.needs import NeedsTable


def table_bindings() -> Iterable[Binding]:
    """The keys every table and log has (moving, following), for the help screen."""
    declared = [*LiveTable.BINDINGS, *FollowLog.BINDINGS, *EventList.BINDINGS, *NeedsTable.BINDINGS]
    return [binding for binding in declared if isinstance(binding, Binding)]  # all of them


class NavigationActions:
    """Open, filter, panes, sort, Usage, help; the target of the key being handled."""

    def current_target(self: ConsoleApp) -> Target:
        return screen_target(self.screen)

    def target_task(self: ConsoleApp) -> TaskView | None:
        target = self.current_target()
        task = target.task(self.snapshot)
        if task is None:
            where = {"none": "here"}.get(target.pane, f"in {target.pane}")
            self.notify(
                f"No task under the cursor {where}: move to a task row.", severity="warning"
            )
        return task

    def target_job(self: ConsoleApp) -> str | None:
        job_id = self.current_target().job_id
        if job_id is None:
            self.notify("No job under the cursor: move to a job or task row.", severity="warning")
        return job_id

    def action_open(self: ConsoleApp) -> None:
        """Enter: a task's detail, or the job view for a job, wave, plan or planner row; an
        event's task or job."""
        target = self.current_target()
        if target.ask_id is not None:
            self.action_read_ask()
        elif target.task_key:
            self.push_screen(DetailScreen(self.store, target.task_key, self.state_styles))
        elif target.job_id and not isinstance(self.screen, JobScreen):
            lease = self.config.engine.lease_seconds
            self.push_screen(
                JobScreen(self.store, target.job_id, self.state_styles, lease_seconds=lease)
            )
        elif target.pane not in ("detail", "job"):
            where = "an event" if target.pane == "events" else "a job or task row"
            self.notify(f"Nothing to open here: move to {where}.", severity="warning")

    def action_filter(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.open_filter()

    def action_clear_filter(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.close_filter(clear=True)

    def action_view(self: ConsoleApp, view: str) -> None:
        """A saved view of the tasks (``:running``, ``:blocked``, ``:failed``, ``:waiting``)."""
        main = self.screen if isinstance(self.screen, MainScreen) else None
        if main is None:
            return
        main.set_view(None if main.task_query == f":{view}" else view)
        main.show_pane(0)
        self.update_status()

    def action_next_view(self: ConsoleApp) -> None:
        """``v``: the next saved view, then every task again."""
        main = self.screen if isinstance(self.screen, MainScreen) else None
        if main is None:
            return
        names = list(VIEWS)
        current = main.task_query.removeprefix(":")
        cycle: list[str | None] = [*names, None]
        following = names[0] if current not in names else cycle[names.index(current) + 1]
        main.set_view(following)
        main.show_pane(0)
        shown = f":{following} ({VIEWS[following]})" if following else "every task"
        self.notify(f"view: {shown}", timeout=2)
        self.update_status()

    def action_fold_done(self: ConsoleApp) -> None:
        """``f``: finished jobs as one line each, or with their tasks again."""
        if not isinstance(self.screen, MainScreen):
            return
        jobs = self.screen.query_one(JobsTable)
        jobs.fold_done = not jobs.fold_done
        self.screen.refilter()

    def action_event_level(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.query_one(EventList).action_cycle_level()

    def action_next_pane(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(1)

    def action_previous_pane(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(-1)

    def action_show_pane(self: ConsoleApp, index: int) -> None:
        """A number key: on the main screen, that pane; on a screen above it (a task, a
        job, Usage), back to the main screen first, once the screen on top has mounted:
        popping one still mounting left its mount handler a screen without its widgets."""
        if not self.screen.is_mounted:
            self.call_after_refresh(self.run_action, f"show_pane({index})")
            return
        if not isinstance(self.screen, MainScreen):
            while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
                self.pop_screen()
        if isinstance(self.screen, MainScreen):
            self.screen.show_pane(index)

    def action_cycle_sort(self: ConsoleApp) -> None:
        if not isinstance(self.screen, MainScreen):
            return
        sort = self.screen.cycle_sort()
        if sort is None:
            self.notify("This pane has one order.", severity="warning")
            return
        if self.snapshot is not None:
            self.screen.apply_snapshot(self.snapshot, self.state_styles, self.clock())
        self.update_status()

    def action_usage(self: ConsoleApp) -> None:
        if not isinstance(self.screen, UsageScreen):
            self.push_screen(UsageScreen(self.store, self.config, self.state_styles))

    def refused_read_only(self: ConsoleApp) -> bool:
        """A console on a database it may not write refuses commands before any dialog."""
        if not self.store.readonly:
            return False
        self.notify(
            f"{self.store.where} is read-only here: this console watches only. Commands "
            "need a writable database (relay-tui --db URL of one you may write).",
            title="read-only",
            severity="warning",
        )
        return True

    def action_help(self: ConsoleApp) -> None:
        bindings = [
            *MainScreen.BINDINGS,
            *DetailScreen.BINDINGS,
            *JobScreen.BINDINGS,
            *UsageScreen.BINDINGS,
            *table_bindings(),
            *self.BINDINGS,
        ]
        self.push_screen(HelpScreen(bindings, self.keymap_in_use))

"""Keys that move the operator around rather than change anything: open a row, filter, show
a pane, sort, the Usage screen, help; and the target every other key reads first.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`). Every key reads
its target when it arrives (:meth:`NavigationActions.current_target`), never a selection
remembered from earlier events.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding

from relay_engine.store.read_model import TaskView
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.actions.target import Target, screen_target
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.events import FollowLog
from relay_tui.widgets.live_table import LiveTable


def table_bindings() -> Iterable[Binding]:
    """The keys every table and log has (moving, following), for the help screen."""
    return [*LiveTable.BINDINGS, *FollowLog.BINDINGS]


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
        """Enter: a task's detail, or the job view for a job, wave, plan or planner row."""
        target = self.current_target()
        if target.task_key:
            self.push_screen(DetailScreen(self.store, target.task_key, self.state_styles))
        elif target.job_id and not isinstance(self.screen, JobScreen):
            lease = self.config.engine.lease_seconds
            self.push_screen(
                JobScreen(self.store, target.job_id, self.state_styles, lease_seconds=lease)
            )
        elif target.pane not in ("detail", "job"):
            self.notify("Nothing to open here: move to a job or task row.", severity="warning")

    def action_filter(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.open_filter()

    def action_clear_filter(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.close_filter(clear=True)

    def action_next_pane(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(1)

    def action_previous_pane(self: ConsoleApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(-1)

    def action_show_pane(self: ConsoleApp, index: int) -> None:
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

    def action_help(self: ConsoleApp) -> None:
        bindings = [
            *MainScreen.BINDINGS,
            *DetailScreen.BINDINGS,
            *JobScreen.BINDINGS,
            *UsageScreen.BINDINGS,
            *table_bindings(),
            *self.BINDINGS,
        ]
        self.push_screen(HelpScreen(bindings, dict(self.config.keymap)))

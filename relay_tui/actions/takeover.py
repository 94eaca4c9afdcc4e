"""Stepping in on a task: take it over in the agent's own CLI, hand it back, say something.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`), doing what ``relay
takeover``, ``relay handback`` and ``relay say`` do: the state changes are operator commands
(``TakeOver``, ``HandBack``, ``Say``); the git and file work either side of them (the
worktree and resume line, the merge of a task handed back done) runs in a worker, in this
process, like the CLI's.
"""

from __future__ import annotations

import os

from textual import work

from relay_engine.agents.takeover import TakeOverLine, open_in_tmux
from relay_engine.core.states import TAKEOVER_STATES, TERMINAL_TASK_STATES, TaskState
from relay_engine.ops.commands import HandBack, Say, TakeOver
from relay_engine.ops.refusals import Refused
from relay_engine.ops.takeover import merge_handed_back, resume_line
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.actions.asks import operator_name
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.takeover import HandBackScreen, TakeOverScreen
from relay_tui.screens.text import TextScreen

TAKEN_STATES = ", ".join(sorted(s.lower() for s in TAKEOVER_STATES))


def take_over_question(task: TaskView) -> str:
    running = (
        "Its headless run is stopped (the attempt is not counted). "
        if task.state == TaskState.RUNNING
        else ""
    )
    return (
        f"Take over {task.key} ({task.shown_state.lower()})?\n{running}The task is HELD: no "
        "engine runs it until you hand it back (T again). The agent's own CLI opens in its "
        "worktree, resumed from its session: in a new tmux window inside tmux, else as a "
        "line to paste."
    )


class TakeOverActions:
    """T (take over, or hand back a held task) and S (say) on the task under the cursor."""

    def action_take_over(self: ConsoleApp) -> None:
        task = self.target_task()
        if task is None or self.refused_read_only():
            return
        if task.state == TaskState.HELD:

            def handed(choice: tuple[str, ...] | None) -> None:
                if choice:
                    hand_back(self, task, *choice)

            self.push_screen(HandBackScreen(task, blink=self.blink), handed)
            return
        if task.state not in TAKEOVER_STATES:
            self.notify(
                f"{task.key} is {task.shown_state.lower()}: only {TAKEN_STATES} tasks can be "
                "taken over.",
                severity="warning",
            )
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                send_take_over(self, task.key)

        self.push_screen(
            ConfirmScreen("Take over", take_over_question(task), yes="Take over", target=task.key),
            confirmed,
        )

    def action_say(self: ConsoleApp) -> None:
        task = self.target_task()
        if task is None or self.refused_read_only():
            return
        if task.state in TERMINAL_TASK_STATES:
            self.notify(
                f"{task.key} is {task.state.lower()}: no agent reads it.", severity="warning"
            )
            return
        now = (
            "its running session reads it now"
            if task.state == TaskState.RUNNING
            else ("its next prompt carries it")
        )
        screen = TextScreen(
            f"Say to {task.key}",
            f"Tell {task.agent or 'its agent'} something ({now}):",
            placeholder="e.g. the fixtures live in tests/data",
            yes="Say",
            blink=self.blink,
            target=task.key,
        )
        self.push_screen(
            screen, lambda text: text and self.send_command(Say(task=task.key, text=text))
        )

    @work(thread=True, group="takeover", exit_on_error=False)
    def open_take_over(self: ConsoleApp, key: str) -> None:
        """Once the task is HELD: its worktree and resume line, opened in tmux or shown."""
        try:
            line = resume_line(self.store, self.workspace, self.config, key)
        except Refused as refused:
            self.call_from_thread(self.notify, str(refused), severity="error", timeout=15)
            return
        why = open_in_tmux(line, f"relay:{key}")
        self.call_from_thread(self.took_over, key, line, why)

    def took_over(self: ConsoleApp, key: str, line: TakeOverLine, why: str | None) -> None:
        if why is None:
            self.notify(
                f"{key}: the agent's CLI opened in a new tmux window on {line.worktree}. "
                "T hands it back.",
                title="taken over",
            )
            return
        self.push_screen(TakeOverScreen(key, line, why))

    @work(thread=True, group="takeover", exit_on_error=False)
    def merge_then_hand_back(self: ConsoleApp, key: str) -> None:
        """``--done``: what the worktree holds is committed and merged first (a conflict is
        refused with its paths, and the task stays held)."""
        try:
            merge_handed_back(self.store, self.workspace, key)
        except Refused as refused:
            self.call_from_thread(
                self.notify, str(refused), title="hand back refused", severity="error", timeout=20
            )
            return
        self.call_from_thread(self.send_command, HandBack(task=key, done=True))


def send_take_over(app: ConsoleApp, key: str) -> None:
    def applied(succeeded: bool) -> None:
        if succeeded:
            app.open_take_over(key)

    app.send_command(TakeOver(task=key, by=operator_name()), on_applied=applied)


def hand_back(app: ConsoleApp, task: TaskView, how: str, text: str | None = None) -> None:
    if how == "done":
        app.merge_then_hand_back(task.key)
    else:
        app.send_command(HandBack(task=task.key, done=False, text=text))


def in_tmux() -> bool:
    return bool(os.environ.get("TMUX"))

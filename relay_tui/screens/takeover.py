"""Take over and hand back: the line to paste where relay cannot open a tmux window, and
the choice a held task is handed back with (done, or go on headless reading your words)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Static

from relay_engine.agents.takeover import TakeOverLine
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.render.styles import clock_time
from relay_tui.screens.base import Dialog, closable_while_mounting


class TakeOverScreen(Dialog[None]):
    """The exact line that opens the agent's CLI on the held task, to paste in a shell."""

    BINDINGS = [Binding("escape,enter", "close", "Close", id="takeover-close")]

    def __init__(self, key: str, line: TakeOverLine, why: str) -> None:
        super().__init__(key)
        self.key = key
        self.line = line
        self.why = why

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide") as box:
            box.border_title = Text(f"{self.key} is yours")
            box.border_subtitle = "escape closes"
            yield Static(
                Text(f"No window opened ({self.why}). Run this in a shell to work on it:"),
                classes="question",
            )
            yield Static(Text(self.line.command_line, style="bold"), id="takeover-line")
            yield Static(
                Text(
                    f"It opens {' '.join(self.line.argv)} in {self.line.worktree}.\n"
                    "When you are done, press T on the task here (or run relay handback "
                    f"{self.key} --done, or --continue TEXT)."
                ),
                classes="hint",
            )

    def action_close(self) -> None:
        self.answer(None)


class HandBackScreen(Dialog[tuple[str, ...]]):
    """Done (merge what the worktree holds) or continue (headless, reading the text)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="handback-cancel"),
        Binding("ctrl+d", "done", "Done", id="handback-done", priority=True),  # over Input's
    ]

    def __init__(self, task: TaskView, *, blink: bool = True) -> None:
        super().__init__(task.key)
        self.held = task
        self.blink = blink

    def compose(self) -> ComposeResult:
        task = self.held
        since = f" since {clock_time(task.held_at)[:5]}" if task.held_at else ""
        with Vertical(classes="dialog") as box:
            box.border_title = Text(f"Hand back {task.key}")
            yield Static(
                Text(f"Held by {task.held_by or 'an operator'}{since}. How does it go on?"),
                classes="question",
            )
            yield Static(
                Text.assemble(
                    ("Done (ctrl+d): ", "bold"),
                    "commit and merge what its worktree holds; the task succeeds.",
                )
            )
            yield Static(Text.assemble(("Or continue: ", "bold"), "the next headless attempt "
                                       "runs in the same session and reads (enter sends):"))  # fmt: skip
            yield Input(placeholder="e.g. finish the migration, the tests are in place", id="words")
            yield Static("", id="words-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Done (ctrl+d)", id="done", variant="success")
                yield Button("Continue", id="continue", variant="warning")
                yield Button("Cancel", id="cancel")

    @closable_while_mounting
    def on_mount(self) -> None:
        box = self.query_one("#words", Input)
        box.cursor_blink = self.blink
        box.focus()

    def action_done(self) -> None:
        self.answer(("done",))

    def action_cancel(self) -> None:
        self.answer(None)

    @on(Input.Submitted)
    def _continue(self) -> None:
        words = self.query_one("#words", Input).value.strip()
        if not words:
            self.query_one("#words-error", Static).update(
                "Write what the agent should do next, or press ctrl+d: done."
            )
            return
        self.answer(("continue", words))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "done":
            self.action_done()
        elif event.button.id == "continue":
            self._continue()
        else:
            self.answer(None)

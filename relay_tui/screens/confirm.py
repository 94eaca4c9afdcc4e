"""Yes or no, before anything destructive (cancel, merge, close, reset, quitting with agents
running); the question says what will happen."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from relay_tui.screens.base import Dialog, closable_while_mounting


class ConfirmScreen(Dialog[bool]):
    """Yes/no for destructive keys (cancel, quitting with agents running)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, title: str, question: str, yes: str = "Yes", *, target: str = "") -> None:
        super().__init__(target)
        self.title_text = title
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = Text(self.title_text)
            yield Static(Text(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("No (n)", id="no", variant="default")

    @closable_while_mounting
    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.answer(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.answer(event.button.id == "yes")

"""A line of words for the engine: a deny's reason, what to say to an agent, how a handed
back task should go on. Checked before anything is sent."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from relay_tui.screens.base import Dialog, closable_while_mounting

MAX_CHARS = 4000


class TextScreen(Dialog[str]):
    """Enter sends the text (empty only when ``optional``); escape sends nothing."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="text-cancel")]

    def __init__(
        self,
        title: str,
        question: str,
        *,
        placeholder: str = "",
        yes: str = "Send",
        optional: bool = False,
        blink: bool = True,
        target: str = "",
    ) -> None:
        super().__init__(target)
        self.title_text = title
        self.question = question
        self.placeholder = placeholder
        self.yes = yes
        self.optional = optional
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = Text(self.title_text)
            yield Label(Text(self.question))
            yield Input(placeholder=self.placeholder, id="words")
            yield Static("", id="words-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button(self.yes, id="send", variant="warning")
                yield Button("Cancel", id="cancel")

    @closable_while_mounting
    def on_mount(self) -> None:
        box = self.query_one("#words", Input)
        box.cursor_blink = self.blink
        box.focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#send")
    def _send(self) -> None:
        words = self.query_one("#words", Input).value.strip()
        problem = None
        if not words and not self.optional:
            problem = "Write something first: there is nothing to send."
        elif len(words) > MAX_CHARS:
            problem = f"That is {len(words)} characters; keep it under {MAX_CHARS}."
        if problem:
            self.query_one("#words-error", Static).update(problem)
            return
        self.answer(words)

    def action_cancel(self) -> None:
        self.answer(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.answer(None)

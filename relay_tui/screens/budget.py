"""Raise a job's budget: dollars to add, checked before anything is sent."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from relay_engine.contracts.amounts import parse_dollars
from relay_tui.screens.base import Dialog, closable_while_mounting


class BudgetScreen(Dialog[float]):
    """Add dollars to a job's budget; parked work resumes when the engine applies it."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="budget-cancel")]

    def __init__(self, job_id: str, standing: str, *, blink: bool = True) -> None:
        super().__init__(f"job:{job_id}")
        self.job_id = job_id
        self.standing = standing
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = Text(f"Raise the budget of {self.job_id}")
            yield Static(Text(self.standing or "No budget yet: this sets one."), classes="question")
            yield Label("Dollars to add (enter adds, escape cancels):")
            yield Input(placeholder="e.g. 5", id="dollars")
            yield Static("", id="dollars-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Add", id="send", variant="warning")
                yield Button("Cancel", id="cancel")

    @closable_while_mounting
    def on_mount(self) -> None:
        box = self.query_one("#dollars", Input)
        box.cursor_blink = self.blink
        box.focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#send")
    def _send(self) -> None:
        amount = parse_dollars(self.query_one("#dollars", Input).value)
        if isinstance(amount, str):
            self.query_one("#dollars-error", Static).update(Text(amount))  # quotes what was typed
            return
        self.answer(amount)

    def action_cancel(self) -> None:
        self.answer(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.answer(None)

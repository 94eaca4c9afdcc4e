"""Raise a job's budget: dollars to add, checked before anything is sent."""

from __future__ import annotations

import re

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from relay_tui.screens.base import Dialog, closable_while_mounting

MAX_RAISE_USD = 10_000.0
"""More than this at once is a typo (``1e308``, a misplaced digit), not a budget."""
AMOUNT = re.compile(r"^\d{1,7}(\.\d{1,4})?$|^\.\d{1,4}$")
"""Plain decimal dollars: no exponents, no signs, at most four decimals."""


def parse_dollars(value: str) -> float | str:
    """Dollars to add, or what is wrong with what was typed."""
    text = value.strip().removeprefix("$").replace(",", "")
    if not AMOUNT.match(text):
        return f"“{value.strip()}” is not an amount of dollars: type a number such as 5 or 2.50."
    amount = float(text)
    if amount <= 0:
        return "Type a positive amount: a budget is raised, never lowered, from here."
    if amount < 0.001:
        return "Type at least $0.001: smaller amounts change nothing a run would notice."
    if amount > MAX_RAISE_USD:
        return (
            f"${amount:,.2f} is more than ${MAX_RAISE_USD:,.0f} at once: raise it in steps, "
            "or set budget_usd in the job file."
        )
    return amount


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

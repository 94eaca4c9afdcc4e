"""Replan: what the new round supersedes, in words, then the planner's guidance."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from relay_tui.screens.base import Dialog, closable_while_mounting


class ReplanScreen(Dialog[str]):
    """Replan: says what the new round supersedes, then takes the planner's guidance."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="replan-cancel")]

    def __init__(
        self, job_id: str, superseded: Sequence[str], *, manual: bool, blink: bool = True
    ) -> None:
        super().__init__(f"job:{job_id}")
        self.job_id = job_id
        self.superseded = list(superseded)
        self.manual = manual
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = Text(f"Replan {self.job_id}")
            yield Static(replan_consequences(self.job_id, self.superseded, self.manual))
            yield Label("Guidance for the planner (enter replans, escape cancels):")
            yield Input(placeholder="e.g. split the API work; skip the docs", id="guidance")
            yield Static("", id="guidance-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Replan", id="send", variant="warning")
                yield Button("Cancel", id="cancel")

    @closable_while_mounting
    def on_mount(self) -> None:
        box = self.query_one("#guidance", Input)
        box.cursor_blink = self.blink
        box.focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#send")
    def _send(self) -> None:
        guidance = self.query_one("#guidance", Input).value.strip()
        if not guidance:
            self.query_one("#guidance-error", Static).update(
                "Write what the planner should change first: a replan without guidance "
                "would only repeat the plan."
            )
            return
        self.answer(guidance)

    def action_cancel(self) -> None:
        self.answer(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.answer(None)


def replan_consequences(job_id: str, superseded: Sequence[str], manual: bool) -> Text:
    """What pressing enter will do, in words, before the operator does it."""
    text = Text()
    if manual:
        text.append(f"{job_id} is a manual job: ", style="bold")
        text.append(
            "replanning hands it to the planner (the job becomes autonomous). "
            "The planner sees every task and may run superseded ones again.\n"
        )
    if superseded:
        names = ", ".join(superseded[:12]) + (" …" if len(superseded) > 12 else "")
        count = len(superseded)
        text.append(f"Supersedes {count} unstarted task{'s' if count != 1 else ''}: ", style="bold")
        text.append(f"{names} (cancelled now). Running and finished tasks are kept.\n")
    else:
        text.append("No unstarted task is superseded; running and finished tasks are kept.\n")
    return text

"""Small modal dialogs: confirm, replan, agent picker, budget.

Every dialog answers through :meth:`Dialog.answer`, which dismisses exactly once (see
:mod:`relay_tui.screens.base`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from relay_engine.store.read_model import AgentRow
from relay_tui.screens.base import ClosesOnce
from relay_tui.views import ProviderView
from relay_tui.widgets.style import clock_time

T = TypeVar("T")


class Dialog(ClosesOnce, ModalScreen[T], Generic[T]):
    """A modal that dismisses once; later answers are ignored."""

    def __init__(self, target: str) -> None:
        super().__init__(classes="dialog-screen")
        self.target = target
        """The row the dialog acts on, as the operator saw it when pressing the key."""

    def answer(self, value: T | None) -> None:
        self.close_once(value)


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
            box.border_title = self.title_text
            yield Static(Text(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("No (n)", id="no", variant="default")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.answer(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.answer(event.button.id == "yes")


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
            box.border_title = f"Replan {self.job_id}"
            yield Static(replan_consequences(self.job_id, self.superseded, self.manual))
            yield Label("Guidance for the planner (enter replans, escape cancels):")
            yield Input(placeholder="e.g. split the API work; skip the docs", id="guidance")
            yield Static("", id="guidance-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Replan", id="send", variant="warning")
                yield Button("Cancel", id="cancel")

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
        text.append(f"Supersedes {len(superseded)} unstarted task(s): ", style="bold")
        text.append(f"{names} (cancelled now). Running and finished tasks are kept.\n")
    else:
        text.append("No unstarted task is superseded; running and finished tasks are kept.\n")
    return text


def agent_label(agent: AgentRow, provider: ProviderView | None) -> str:
    if provider is not None and provider.status == "limited":
        state = f"limited until {clock_time(provider.reset_at)}"
    else:
        state = "ok"
    running = f", {provider.running} running" if provider and provider.running else ""
    return f"{agent.id}  ·  {agent.provider}: {state}{running}"


class PinScreen(Dialog[str]):
    """Pick the agent that keeps a task's workstream (the pin outlives this task)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pin-cancel")]

    def __init__(
        self, target: str, agents: Sequence[AgentRow], providers: Sequence[ProviderView]
    ) -> None:
        super().__init__(target)
        self.agents = list(agents)
        self.providers = {p.provider: p for p in providers}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = f"Pin an agent to {self.target}"
            if self.agents:
                yield Label("Eligible agents (enter pins, escape cancels):")
                options = [
                    Option(agent_label(a, self.providers.get(a.provider)), id=a.id)
                    for a in self.agents
                ]
                yield OptionList(*options, id="agents")
            else:
                yield Label("No enabled agent has this task's role. Add one in relay.toml.")
                yield Button("Close", id="close")

    def action_cancel(self) -> None:
        self.answer(None)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.answer(event.option.id)

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.answer(None)


def parse_dollars(value: str) -> float | str:
    """Dollars to add, or what is wrong with what was typed."""
    text = value.strip().removeprefix("$").replace(",", "")
    try:
        amount = float(text)
    except ValueError:
        return f"“{value.strip()}” is not an amount of dollars: type a number such as 5 or 2.50."
    if not amount > 0 or amount == float("inf"):
        return "Type a positive amount: a budget is raised, never lowered, from here."
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
            box.border_title = f"Raise the budget of {self.job_id}"
            yield Static(Text(self.standing or "No budget yet: this sets one."), classes="question")
            yield Label("Dollars to add (enter adds, escape cancels):")
            yield Input(placeholder="e.g. 5", id="dollars")
            yield Static("", id="dollars-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Add", id="send", variant="warning")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        box = self.query_one("#dollars", Input)
        box.cursor_blink = self.blink
        box.focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#send")
    def _send(self) -> None:
        amount = parse_dollars(self.query_one("#dollars", Input).value)
        if isinstance(amount, str):
            self.query_one("#dollars-error", Static).update(amount)
            return
        self.answer(amount)

    def action_cancel(self) -> None:
        self.answer(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.answer(None)

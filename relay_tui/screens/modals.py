"""Small modal dialogs: confirm, replan guidance, agent picker."""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from relay_tui.data import AgentView, ProviderView
from relay_tui.widgets.style import clock_time


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no for destructive keys (cancel, quitting with agents running)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, title: str, question: str, yes: str = "Yes") -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = self.title_text
            yield Static(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("No (n)", id="no", variant="default")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class GuidanceScreen(ModalScreen[str | None]):
    """Replan: the operator's guidance for the next planner round."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="guidance-cancel")]

    def __init__(self, job_id: str, *, blink: bool = True) -> None:
        super().__init__(classes="dialog-screen")
        self.job_id = job_id
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = f"Replan {self.job_id}"
            yield Label("Guidance for the planner (enter sends, escape cancels):")
            yield Input(placeholder="e.g. split the API work; skip the docs", id="guidance")
            with Horizontal(classes="buttons"):
                yield Button("Replan", id="send", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        box = self.query_one("#guidance", Input)
        box.cursor_blink = self.blink
        box.focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#send")
    def _send(self) -> None:
        self.dismiss(self.query_one("#guidance", Input).value.strip())

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def agent_label(agent: AgentView, provider: ProviderView | None) -> str:
    if provider is not None and provider.status == "limited":
        state = f"limited until {clock_time(provider.reset_at)}"
    else:
        state = "ok"
    running = f", {provider.running} running" if provider and provider.running else ""
    return f"{agent.id}  ·  {agent.provider}: {state}{running}"


class PinScreen(ModalScreen[str | None]):
    """Pick the agent that keeps a task's workstream (the pin outlives this task)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="pin-cancel")]

    def __init__(
        self, target: str, agents: Sequence[AgentView], providers: Sequence[ProviderView]
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.target = target
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

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

"""The agent picker: which agent keeps a task's workstream, with its provider's state."""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Button, Label, OptionList
from textual.widgets.option_list import Option

from relay_engine.store.read_model import AgentRow
from relay_tui.data.snapshot import ProviderView
from relay_tui.render.styles import clock_time
from relay_tui.screens.base import Dialog


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

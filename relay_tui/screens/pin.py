"""The agent picker: which agent keeps a task's workstream, with its provider's state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Button, Label, OptionList
from textual.widgets.option_list import Option

from relay_engine.store.read_model.agents import AgentRow
from relay_tui.data.snapshot import ProviderView
from relay_tui.render.styles import clock_time
from relay_tui.screens.base import Dialog
from relay_tui.widgets.options import SafeOptionList

CANNOT_WORK = frozenset({"auth", "cli-missing", "cli-rejected", "unreachable"})
"""Agents listed but not offered: a pin to one would park the work."""


def agent_label(agent: AgentRow, provider: ProviderView | None, running: int = 0) -> Text:
    """The agent, whether it can work (its own state first: not logged in, CLI missing;
    then its provider's limit), and how many runs it has now (its own, not its
    provider's: two agents of one provider are told apart here). Text, not a string: an
    option's string is read as markup, and the fix is the CLI's own words."""
    if agent.status != "ready":
        state = agent.summary + (
            f" — {agent.fix}" if agent.fix and agent.status in CANNOT_WORK else ""
        )
    elif provider is not None and provider.status == "limited":
        state = f"{agent.provider} limited until {clock_time(provider.reset_at)}"
    else:
        state = f"{agent.provider} ok"
    busy = f", {running} running" if running else ""
    return Text(f"{agent.id}  ·  {state}{busy}")


class PinScreen(Dialog[str]):
    """Pick the agent that keeps a task's workstream (the pin outlives this task)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pin-cancel")]

    def __init__(
        self,
        target: str,
        agents: Sequence[AgentRow],
        providers: Sequence[ProviderView],
        running: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(target)
        self.agents = list(agents)
        self.providers = {p.provider: p for p in providers}
        self.running = dict(running or {})

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = Text(f"Pin an agent to {self.target}")
            if self.agents:
                yield Label("Eligible agents (enter pins, escape cancels):")
                options = [
                    Option(
                        agent_label(a, self.providers.get(a.provider), self.running.get(a.id, 0)),
                        id=a.id,
                        disabled=a.status in CANNOT_WORK,
                    )
                    for a in self.agents
                ]
                yield SafeOptionList(*options, id="agents")
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

"""The key that acts on an agent row (Providers pane): reset an agent that failed its login,
was unreachable or whose CLI was missing, once the operator fixed it.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`).
"""

from __future__ import annotations

from relay_engine.ops.commands import ResetAgent
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.render.styles import clock_time
from relay_tui.screens.confirm import ConfirmScreen


class AgentActions:
    """Agent reset: relay gives the agent work again, and what waited on it is queued."""

    def action_reset_agent(self: ConsoleApp) -> None:
        agent_id = self.current_target().agent_id
        agent = self.snapshot.agent_row(agent_id) if self.snapshot and agent_id else None
        if agent is not None and self.refused_read_only():
            return
        if agent is None:
            self.notify(
                "No agent under the cursor: move to an agent row in the Providers pane (3).",
                severity="warning",
            )
            return
        if agent.status in ("ready", "limited", "budget"):
            why = {
                "ready": "it is ready",
                "limited": f"its provider's limit resets at {clock_time(agent.until)} on its own",
                "budget": agent.fix or "its daily budget is spent",
            }[agent.status]
            self.notify(f"Nothing to reset for {agent.id}: {why}.", severity="warning")
            return
        question = (
            f"Reset agent {agent.id} ({agent.summary})?\nrelay gives it the next task again; "
            f"tasks waiting on it are queued.\nFix first: {agent.fix or 'see relay doctor'}"
        )
        self.push_screen(
            ConfirmScreen("Reset agent", question, yes="Reset", target=f"agent:{agent.id}"),
            lambda yes: yes and self.send_command(ResetAgent(agent=agent.id)),
        )

"""Every operator command relay understands, for engines and the CLI alike."""

from __future__ import annotations

from relay_engine.ops import agents as agent_status
from relay_engine.ops import assignments, budgets, commands, pulls
from relay_engine.ops import plans as planning

HANDLERS: dict[str, commands.Handler] = {
    **commands.HANDLERS,
    "replan": planning.replan,
    "approve": planning.approve_wave,
    "install_plan": planning.install_plan,
    "pin": assignments.pin_agent,
    "budget": budgets.raise_budget,
    "agent.reset": agent_status.reset,
    "merge": pulls.request_merge,
    "close": pulls.request_close,
}

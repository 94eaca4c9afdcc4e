"""Keys that act on a task row: cancel, retry, pin an agent to its workstream.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`): each reads its
target when the key arrives, asks before anything destructive, and sends one command; the
engine's answer comes back as a toast.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.states import RETRYABLE_TASK_STATES, TERMINAL_TASK_STATES, TaskState
from relay_engine.ops.commands import CancelTask, Pin, RetryTask
from relay_engine.store.read_model.agents import AgentRow
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.pin import PinScreen


def config_agents(config: RelayConfig) -> tuple[AgentRow, ...]:
    """Agents from relay.toml, for when no engine has published AgentRecords yet."""
    return tuple(
        AgentRow(a.id, a.provider, a.enabled, "ready", None, None, None, "ready", a.roles)
        for a in config.agents
    )


def eligible_agents(agents: Iterable[AgentRow], role: str) -> list[AgentRow]:
    return [a for a in agents if a.enabled and (not a.roles or role in a.roles)]


def cancel_consequence(task: TaskView) -> str:
    """What a cancel does to this task, in its state's words."""
    if task.state == TaskState.RUNNING:
        return f"Its agent ({task.agent or 'running'}) is stopped; tasks after it are blocked."
    if task.state == TaskState.HELD:
        return "It is held: what its worktree holds stays on its branch; nothing is merged."
    return "It will not run; tasks after it are blocked."


def pin_command(task: TaskView, agent_id: str) -> Pin:
    """A task with a workstream pins the workstream (its later tasks follow); one without,
    just itself."""
    if task.workstream:
        return Pin(job=task.job_id, workstream=task.workstream, role=task.role, agent=agent_id)
    return Pin(task=task.key, agent=agent_id)


class TaskActions:
    """Cancel, retry and pin, on the task under the cursor (or the detail screen's task)."""

    def action_cancel_task(self: ConsoleApp) -> None:
        task = self.target_task()
        if task is None or self.refused_read_only():
            return
        if task.state in TERMINAL_TASK_STATES:
            self.notify(f"{task.key} already {task.state.lower()}.", severity="warning")
            return
        question = f"Cancel {task.key} ({task.shown_state.lower()})?\n{cancel_consequence(task)}"
        self.push_screen(
            ConfirmScreen("Cancel task", question, yes="Cancel task", target=task.key),
            lambda yes: yes and self.send_command(CancelTask(task=task.key)),
        )

    def action_retry_task(self: ConsoleApp) -> None:
        task = self.target_task()
        if task is None or self.refused_read_only():
            return
        if task.state not in RETRYABLE_TASK_STATES:
            self.notify(
                f"Only failed or cancelled tasks retry ({task.key} is {task.shown_state.lower()}).",
                severity="warning",
            )
            return
        self.send_command(RetryTask(task=task.key))

    def action_pin(self: ConsoleApp) -> None:
        task = self.target_task()
        if task is None or self.snapshot is None or self.refused_read_only():
            return
        agents = eligible_agents(
            self.snapshot.agent_rows or self.snapshot.agents or config_agents(self.config),
            task.role,
        )
        snapshot = self.snapshot
        running = Counter(
            run.agent for run in snapshot.runs if run.agent and snapshot.run_alive(run)
        )
        self.push_screen(
            PinScreen(task.key, agents, snapshot.providers, running),
            lambda agent_id: agent_id and self.send_command(pin_command(task, agent_id)),
        )

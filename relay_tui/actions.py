"""The operator's actions: what each key does to the row under the focused cursor.

A mixin of :class:`relay_tui.app.RelayApp`. Every action reads its target when the key
arrives (:meth:`current_target`), asks before anything destructive, and sends one command;
the engine's answer comes back as a toast (see ``RelayApp._command_applied``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relay_engine.ops.commands import ApproveWave, CancelJob, CancelTask, Pin, Replan, RetryTask
from relay_engine.store.read_model import AgentRow, TaskView
from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.help import HelpScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.modals import ConfirmScreen, PinScreen, ReplanScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.target import Target
from relay_tui.views import Snapshot

if TYPE_CHECKING:
    from relay_tui.app import RelayApp

RETRYABLE = frozenset({"FAILED", "CANCELLED"})
FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
JOB_FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "MERGED", "CLOSED"})
SUPERSEDABLE = frozenset({"DRAFT", "QUEUED", "PARKED"})


def superseded_by_replan(snapshot: Snapshot, job_id: str) -> list[str]:
    """The tasks a replan cancels: not started yet (a claimed, starting task runs on)."""
    return sorted(
        t.task_id
        for t in snapshot.tasks.values()
        if t.job_id == job_id
        and t.state in SUPERSEDABLE
        and not (t.state == "QUEUED" and t.execution_id)
    )


def eligible_agents(agents: Any, role: str) -> list[AgentRow]:
    return [a for a in agents if a.enabled and (not a.roles or role in a.roles)]


def pin_command(task: TaskView, agent_id: str) -> Pin:
    """A task with a workstream pins the workstream (its later tasks follow); one without,
    just itself."""
    if task.workstream:
        return Pin(job=task.job_id, workstream=task.workstream, role=task.role, agent=agent_id)
    return Pin(task=task.key, agent=agent_id)


class OperatorActions:
    """Actions bound to keys on the main, detail and job screens."""

    def current_target(self: RelayApp) -> Target:
        screen = self.screen
        if isinstance(screen, DetailScreen):
            return Target("detail", screen.key, screen.key, screen.key.partition("/")[0])
        if isinstance(screen, JobScreen):
            return Target("job", f"job:{screen.job_id}", None, screen.job_id)
        if isinstance(screen, MainScreen):
            return screen.target()
        if isinstance(screen, UsageScreen):
            return screen.target()
        return Target("none")

    def _target_task(self: RelayApp) -> TaskView | None:
        target = self.current_target()
        task = target.task(self.snapshot)
        if task is None:
            where = {"none": "here"}.get(target.pane, f"in {target.pane}")
            self.notify(
                f"No task under the cursor {where}: move to a task row.", severity="warning"
            )
        return task

    def _target_job(self: RelayApp) -> str | None:
        job_id = self.current_target().job_id
        if job_id is None:
            self.notify("No job under the cursor: move to a job or task row.", severity="warning")
        return job_id

    def action_cancel_task(self: RelayApp) -> None:
        task = self._target_task()
        if task is None:
            return
        if task.state in FINISHED:
            self.notify(f"{task.key} already {task.state.lower()}.", severity="warning")
            return
        question = f"Cancel {task.key} ({task.shown_state.lower()})?\nA running agent is stopped."
        self.push_screen(
            ConfirmScreen("Cancel task", question, yes="Cancel task", target=task.key),
            lambda yes: yes and self.send_command(CancelTask(task=task.key)),
        )

    def action_retry_task(self: RelayApp) -> None:
        task = self._target_task()
        if task is None:
            return
        if task.state not in RETRYABLE:
            self.notify(
                f"Only failed or cancelled tasks retry ({task.key} is {task.shown_state.lower()}).",
                severity="warning",
            )
            return
        self.send_command(RetryTask(task=task.key))

    def action_replan(self: RelayApp) -> None:
        job_id = self._target_job()
        job = self.snapshot.job(job_id) if self.snapshot and job_id else None
        if job is None or self.snapshot is None:
            return
        superseded = superseded_by_replan(self.snapshot, job.id)
        screen = ReplanScreen(job.id, superseded, manual=job.mode == "manual", blink=self.blink)
        self.push_screen(
            screen,
            lambda guidance: guidance and self.send_command(Replan(job=job.id, guidance=guidance)),
        )

    def action_pin(self: RelayApp) -> None:
        task = self._target_task()
        if task is None or self.snapshot is None:
            return
        agents = eligible_agents(self.snapshot.agents or self.config_agents(), task.role)
        self.push_screen(
            PinScreen(task.key, agents, self.snapshot.providers),
            lambda agent_id: agent_id and self.send_command(pin_command(task, agent_id)),
        )

    def action_approve(self: RelayApp) -> None:
        job_id = self._target_job()
        job = self.snapshot.job(job_id) if self.snapshot and job_id else None
        if job is None or self.snapshot is None:
            return
        if not job.gated:
            self.notify(
                f"{job.id} has no wave gate: its waves start on their own.", severity="warning"
            )
            return
        waiting = [w for w in self.snapshot.waves if w.job_id == job.id and w.awaiting_approval]
        wave = f"wave {waiting[0].wave}" if waiting else "the next wave"
        question = f"Approve {wave} of {job.id}?\nIts tasks start as soon as agents are free."
        self.push_screen(
            ConfirmScreen("Approve wave", question, yes="Approve", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(ApproveWave(job=job.id)),
        )

    def action_cancel_job(self: RelayApp) -> None:
        job_id = self._target_job()
        job = self.snapshot.job(job_id) if self.snapshot and job_id else None
        if job is None or self.snapshot is None:
            return
        if job.state in JOB_FINISHED:
            self.notify(f"job {job.id} already {job.state.lower()}.", severity="warning")
            return
        active = sum(
            1
            for t in self.snapshot.tasks.values()
            if t.job_id == job.id and t.state not in FINISHED
        )
        question = (
            f"Cancel job {job.id}?\n{active} unfinished task(s) are cancelled; "
            "running agents are stopped."
        )
        self.push_screen(
            ConfirmScreen("Cancel job", question, yes="Cancel job", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(CancelJob(job=job.id)),
        )

    def action_open(self: RelayApp) -> None:
        """Enter: a task's detail, or the job view for a job, wave, plan or planner row."""
        target = self.current_target()
        if target.task_key:
            self.push_screen(DetailScreen(self.store, target.task_key, self.state_styles))
        elif target.job_id and not isinstance(self.screen, JobScreen):
            lease = self.config.engine.lease_seconds
            self.push_screen(
                JobScreen(self.store, target.job_id, self.state_styles, lease_seconds=lease)
            )
        elif target.pane not in ("detail", "job"):
            self.notify("Nothing to open here: move to a job or task row.", severity="warning")

    def action_filter(self: RelayApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.open_filter()

    def action_clear_filter(self: RelayApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.close_filter(clear=True)

    def action_next_pane(self: RelayApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(1)

    def action_previous_pane(self: RelayApp) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.step_pane(-1)

    def action_show_pane(self: RelayApp, index: int) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.show_pane(index)

    def action_cycle_sort(self: RelayApp) -> None:
        if not isinstance(self.screen, MainScreen):
            return
        sort = self.screen.cycle_sort()
        if sort is None:
            self.notify("This pane has one order.", severity="warning")
            return
        if self.snapshot is not None:
            self.screen.apply_snapshot(self.snapshot, self.state_styles, self.clock())
        self.update_status()

    def action_help(self: RelayApp) -> None:
        bindings = [
            *MainScreen.BINDINGS,
            *DetailScreen.BINDINGS,
            *JobScreen.BINDINGS,
            *UsageScreen.BINDINGS,
            *self.table_bindings(),
            *self.BINDINGS,
        ]
        self.push_screen(HelpScreen(bindings, dict(self.config.keymap)))

"""Keys that act on a job's pull request, its budget, or an agent: merge, close, budget,
agent reset, and the Usage screen.

A mixin of :class:`relay_tui.app.RelayApp`, like :mod:`relay_tui.actions`: each reads its
target when the key arrives, says what will happen in a dialog, and sends one durable
command; refusals come back from the engine as error toasts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_engine.ops.commands import Close, Merge, RaiseBudget, ResetAgent
from relay_engine.ops.pulls import no_pull_reason
from relay_engine.store.read_model import JobView, ReviewView
from relay_tui.screens.modals import BudgetScreen, ConfirmScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.style import clock_time

if TYPE_CHECKING:
    from relay_tui.app import RelayApp

UNFINISHED = frozenset({"DRAFT", "QUEUED", "RUNNING", "PARKED"})


def merge_words(job: JobView) -> str:
    """``merge relay/x @ 1a2b3c4d5e6f into main on origin``."""
    pr = job.pr
    if pr is None:
        return ""
    return f"merge {pr.head_branch} @ {(pr.head_sha or '?')[:12]} into {pr.target}"


def verdict_words(review: ReviewView | None, head_sha: str | None) -> str:
    if review is None:
        return "no review has run yet"
    if review.verdict is None:
        return f"review {review.round} is still running"
    head = "a stale head" if review.stale else "the current head"
    sha = f" ({(review.head_sha or '')[:7]})" if review.stale and review.head_sha else ""
    return f"review {review.round}: {review.verdict} at {head}{sha}"


class JobActions:
    """Merge, close, budget and agent reset; the Usage screen."""

    def _job_view(self: RelayApp) -> JobView | None:
        job_id = self._target_job()
        return self.snapshot.job(job_id) if self.snapshot and job_id else None

    def _open_pull_of(self: RelayApp, job: JobView) -> bool:
        pr = job.pr
        if pr is None:
            self.notify(no_pull_reason(job.id, job.state, job.repo_path), severity="warning")
            return False
        if pr.state != "OPEN":
            self.notify(
                f"the pull request of {job.id} is already {pr.state.lower()}.", severity="warning"
            )
            return False
        return True

    def action_merge(self: RelayApp) -> None:
        job = self._job_view()
        if job is None or not self._open_pull_of(job):
            return
        pr = job.pr
        assert pr is not None
        verdict = verdict_words(job.review, pr.head_sha)
        target = f"job:{job.id}"
        if job.state == "READY":
            question = f"{merge_words(job)}?\n{verdict}."
            self.push_screen(
                ConfirmScreen(f"Merge {job.id}", question, yes="Merge", target=target),
                lambda yes: yes and self.send_command(Merge(job=job.id, force=False)),
            )
            return
        question = (
            f"{merge_words(job)}?\nNot approved: the job is {job.state.lower()}, {verdict}.\n"
            "Merging it anyway needs a second confirmation."
        )
        self.push_screen(
            ConfirmScreen("Merge without approval", question, yes="Force merge…", target=target),
            lambda yes: yes and self._confirm_force(job),
        )

    def _confirm_force(self: RelayApp, job: JobView) -> None:
        question = (
            f"Really {merge_words(job)}?\nNo review approved this head: the change lands "
            "unreviewed."
        )
        self.push_screen(
            ConfirmScreen("Force merge", question, yes="Merge anyway", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(Merge(job=job.id, force=True)),
        )

    def action_close_pr(self: RelayApp) -> None:
        job = self._job_view()
        if job is None or not self._open_pull_of(job) or self.snapshot is None:
            return
        pr = job.pr
        assert pr is not None
        unfinished = sum(
            1 for t in self.snapshot.tasks.values() if t.job_id == job.id and t.state in UNFINISHED
        )
        question = (
            f"Close the pull request of {job.id} ({pr.head_branch} → {pr.base_branch}) "
            f"and cancel unfinished work?\n{unfinished} unfinished task(s) are cancelled; "
            "the branch stays."
        )
        self.push_screen(
            ConfirmScreen("Close pull request", question, yes="Close PR", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(Close(job=job.id)),
        )

    def action_raise_budget(self: RelayApp) -> None:
        job = self._job_view()
        if job is None:
            return
        standing = job.budget.text
        if standing and job.budget_usd is None:
            standing += " (a token budget; dollars added here start a dollar budget)"
        self.push_screen(
            BudgetScreen(job.id, standing, blink=self.blink),
            lambda amount: amount and self.send_command(RaiseBudget(job=job.id, add_usd=amount)),
        )

    def action_reset_agent(self: RelayApp) -> None:
        agent_id = self.current_target().agent_id
        agent = self.snapshot.agent_row(agent_id) if self.snapshot and agent_id else None
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

    def action_usage(self: RelayApp) -> None:
        if not isinstance(self.screen, UsageScreen):
            self.push_screen(UsageScreen(self.store, self.config, self.state_styles))

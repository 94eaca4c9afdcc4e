"""Keys that act on a job: replan, approve a wave, cancel it, merge or close its pull request,
raise its budget.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`): each reads its
target when the key arrives, says what will happen in a dialog, and sends one durable
command; refusals come back from the engine as error toasts.
"""

from __future__ import annotations

from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    SUPERSEDABLE_TASK_STATES,
    TERMINAL_JOB_STATES,
    TERMINAL_TASK_STATES,
    JobState,
    PullState,
    TaskState,
)
from relay_engine.ops.commands import ApproveWave, CancelJob, Close, Merge, RaiseBudget, Replan
from relay_engine.ops.pulls import no_pull_reason
from relay_engine.store.read_model.jobs import JobView
from relay_engine.store.read_model.pulls import ReviewView
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.header import plural
from relay_tui.render.spend import budget_words
from relay_tui.screens.budget import BudgetScreen
from relay_tui.screens.confirm import ConfirmScreen
from relay_tui.screens.replan import ReplanScreen


def superseded_by_replan(snapshot: Snapshot, job_id: str) -> list[str]:
    """The tasks a replan cancels: not started yet (a claimed, starting task runs on)."""
    return sorted(
        t.task_id
        for t in snapshot.tasks.values()
        if t.job_id == job_id
        and t.state in SUPERSEDABLE_TASK_STATES
        and not (t.state == TaskState.QUEUED and t.execution_id)
    )


def merge_words(job: JobView) -> str:
    """``merge relay/x @ 1a2b3c4d5e6f into main on origin``."""
    pr = job.pr
    if pr is None:
        return ""
    return f"merge {pr.head_branch} @ {(pr.head_sha or '?')[:12]} into {pr.target}"


def verdict_words(review: ReviewView | None) -> str:
    if review is None:
        return "no review has run yet"
    if review.verdict is None:
        return f"review {review.round} is still running"
    head = "a stale head" if review.stale else "the current head"
    sha = f" ({(review.head_sha or '')[:7]})" if review.stale and review.head_sha else ""
    return f"review {review.round}: {review.verdict} at {head}{sha}"


def target_job_view(app: ConsoleApp) -> JobView | None:
    job_id = app.target_job()
    return app.snapshot.job(job_id) if app.snapshot and job_id else None


def has_open_pull(app: ConsoleApp, job: JobView) -> bool:
    """Whether the job's pull request is open; if not, the operator is told why."""
    pr = job.pr
    if pr is None:
        app.notify(no_pull_reason(job.id, job.state, job.repo_path), severity="warning")
        return False
    if pr.state != PullState.OPEN:
        app.notify(
            f"the pull request of {job.id} is already {pr.state.lower()}.", severity="warning"
        )
        return False
    return True


def confirm_force(app: ConsoleApp, job: JobView) -> None:
    """The second yes a merge without approval needs."""
    question = (
        f"Really {merge_words(job)}?\nNo review approved this head: the change lands unreviewed."
    )
    app.push_screen(
        ConfirmScreen("Force merge", question, yes="Merge anyway", target=f"job:{job.id}"),
        lambda yes: yes and app.send_command(Merge(job=job.id, force=True)),
    )


class JobActions:
    """Replan, approve, cancel job, merge, close and budget, on the job of the cursor row."""

    def action_replan(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.snapshot is None or self.refused_read_only():
            return
        superseded = superseded_by_replan(self.snapshot, job.id)
        screen = ReplanScreen(job.id, superseded, manual=job.mode == "manual", blink=self.blink)
        self.push_screen(
            screen,
            lambda guidance: guidance and self.send_command(Replan(job=job.id, guidance=guidance)),
        )

    def action_approve(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.snapshot is None or self.refused_read_only():
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

    def action_cancel_job(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.snapshot is None or self.refused_read_only():
            return
        if job.state in TERMINAL_JOB_STATES:
            self.notify(f"job {job.id} already {job.state.lower()}.", severity="warning")
            return
        active = sum(
            1
            for t in self.snapshot.tasks.values()
            if t.job_id == job.id and t.state not in TERMINAL_TASK_STATES
        )
        question = (
            f"Cancel job {job.id}?\n{plural(active, 'unfinished task')} "
            f"{'is' if active == 1 else 'are'} cancelled; running agents are stopped."
        )
        self.push_screen(
            ConfirmScreen("Cancel job", question, yes="Cancel job", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(CancelJob(job=job.id)),
        )

    def action_merge(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.refused_read_only() or not has_open_pull(self, job):
            return
        verdict = verdict_words(job.review)
        target = f"job:{job.id}"
        if job.state == JobState.READY:
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

        def force(yes: bool | None) -> None:
            if yes:
                confirm_force(self, job)

        self.push_screen(
            ConfirmScreen("Merge without approval", question, yes="Force merge…", target=target),
            force,
        )

    def action_close_pr(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.snapshot is None or self.refused_read_only():
            return
        if not has_open_pull(self, job):
            return
        pr = job.pr
        assert pr is not None
        unfinished = sum(
            1
            for t in self.snapshot.tasks.values()
            if t.job_id == job.id and t.state in ACTIVE_TASK_STATES
        )
        question = (
            f"Close the pull request of {job.id} ({pr.head_branch} → {pr.base_branch}) "
            f"and cancel unfinished work?\n{plural(unfinished, 'unfinished task')} "
            f"{'is' if unfinished == 1 else 'are'} cancelled; the branch stays."
        )
        self.push_screen(
            ConfirmScreen("Close pull request", question, yes="Close PR", target=f"job:{job.id}"),
            lambda yes: yes and self.send_command(Close(job=job.id)),
        )

    def action_raise_budget(self: ConsoleApp) -> None:
        job = target_job_view(self)
        if job is None or self.refused_read_only():
            return
        standing = budget_words(job)
        if standing and job.budget_usd is None:
            standing += " (a token budget; dollars added here start a dollar budget)"
        self.push_screen(
            BudgetScreen(job.id, standing, blink=self.blink),
            lambda amount: amount and self.send_command(RaiseBudget(job=job.id, add_usd=amount)),
        )

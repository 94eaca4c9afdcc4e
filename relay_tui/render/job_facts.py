"""The job view's facts as text: what waits (and the command that releases it), pull
request, final review, spend and budget, upstream, engines, the branch, and the planner
rounds.

Views in, Rich Text out (the read model's view types its only engine imports), so snapshot tests and the job view agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from relay_engine.contracts.review import finding_lines
from relay_engine.core.states import DONE_JOB_STATES, JobState
from relay_engine.core.waits import Wait, wait_lines
from relay_engine.git.diffs import Diff
from relay_engine.store.engines import EngineRow, age_text
from relay_engine.store.read_model.jobs import JobView
from relay_engine.store.read_model.plans import PlanView
from relay_engine.store.read_model.pulls import PullView, ReviewView
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.details import JobDetail
from relay_tui.render.spend import LEVEL_STATES, budget_bar, budget_words, spend_line
from relay_tui.render.styles import styled
from relay_tui.render.task_facts import held_line
from relay_tui.render.words import english

SEVERITY_STYLES = {"blocker": "bold red", "critical": "bold red", "major": "red", "minor": "yellow"}


def pull_text(pr: PullView | None, job: JobView | None, styles: Mapping[str, str]) -> Text:
    """Forge, url, head branch → target, head, mergeable, why it waits, the last error."""
    if pr is None:
        if job is not None and job.repo_path and job.state in (JobState.ACTIVE, JobState.DRAFT):
            return Text("opens once the job's work is done", style="dim")
        return Text("none: the job has no branch to merge", style="dim")
    text = Text()
    state = pr.state
    text.append_text(styled(state.lower(), "SUCCEEDED" if state == "MERGED" else state, styles))
    number = f" #{pr.number}" if pr.number else ""
    text.append(f" · {pr.forge}{number}\n")
    if pr.url:
        text.append(f"{pr.url}\n", style="underline")
    text.append(f"{pr.head_branch} → {pr.target}\n")
    text.append(f"head {(pr.head_sha or '?')[:12]}")
    mergeable = pr.mergeable
    if mergeable:
        style = styles.get("FAILED", "") if mergeable == "CONFLICTING" else ""
        text.append(" · ")
        text.append(str(mergeable).lower(), style=style)
    if pr.merge_requested:
        text.append(" · merge requested")
    text.append("\n")
    if pr.note:
        text.append(f"waiting: {english(pr.note)}\n", style="italic")
    if pr.error:
        text.append(f"error: {pr.error}\n", style=styles.get("FAILED", ""))
    return text


def review_text(reviews: Sequence[ReviewView], job: JobView | None = None) -> Text:
    """The latest round in full (verdict, head, summary, findings); earlier rounds one line."""
    if not reviews:
        return Text(no_review_words(job), style="dim")
    text = Text()
    for review in reviews[:-1]:
        text.append(f"round {review.round}: {review.verdict or 'unfinished'}", style="dim")
        text.append(f" at {(review.head_sha or '?')[:7]}\n", style="dim")
    latest = reviews[-1]
    current = not latest.stale  # it read the pull request's current head
    verdict = latest.verdict or "running"
    style = {"approve": "green", "changes": "yellow", "invalid": "red"}.get(verdict, "")
    text.append(f"round {latest.round}: ", style="bold")
    text.append(verdict, style=f"bold {style}".strip())
    where = "current head" if current else "stale head"
    text.append(f" · {where} {(latest.head_sha or '?')[:7]}\n")
    if latest.summary:
        text.append(f"{latest.summary}\n", style="italic")
    for finding, line in zip(latest.findings, finding_lines(latest.findings), strict=True):
        severity = str(finding.get("severity") or "minor")
        text.append(line.removeprefix("- ") + "\n", style=SEVERITY_STYLES.get(severity, ""))
    return text


def no_review_words(job: JobView | None) -> str:
    """Why there is no review: off, nothing to review (no git branch), or not yet."""
    if job is not None and not job.review_enabled:
        return "none: reviews are off for this job (review = false)"
    if job is not None and (
        job.repo_path is None or (job.state in DONE_JOB_STATES and job.pr is None)
    ):
        return "none: the job has no git branch, so there is nothing to review or merge"
    return "no review yet: it runs when the work is done"


def waits_text(waits: Sequence[Wait], styles: Mapping[str, str]) -> Text:
    """One line per distinct wait (a gated wave's tasks are one line), with the command that
    releases it: what an operator coming back types."""
    if not waits:
        return Text("nothing waits", style="dim")
    style = styles.get("PARKED", "")
    return Text("\n").join(Text(line, style=style) for line in wait_lines(waits))


def held_text(tasks: Sequence[TaskView], now: float, styles: Mapping[str, str]) -> Text:
    """The job's tasks taken over by hand: by whom, since when."""
    held = [t for t in tasks if t.state == "HELD"]
    if not held:
        return Text("nothing taken over", style="dim")
    text = Text()
    for task in held:
        text.append(f"{task.task_id}: ", style="bold")
        text.append(held_line(task, now) + "\n", style=styles.get("HELD", ""))
    return text


def spend_facts(job: JobView, styles: Mapping[str, str]) -> Text:
    """What the job spent; its budget as a bar; how to raise an exhausted one."""
    text = Text(spend_line(job.spend) + "\n")
    budget = job.budget
    if budget.level == "none":
        text.append("no budget set (budget_usd in the job file)", style="dim")
        return text
    text.append_text(budget_bar(budget, styles))
    text.append(" ")
    text.append(budget_words(job), style=styles.get(LEVEL_STATES.get(budget.level, ""), ""))
    if budget.level == "exhausted":
        text.append("\nnothing new starts until it is raised: press b", style="bold")
    return text


def upstream_text(job: JobView, upstream: Mapping[str, str], styles: Mapping[str, str]) -> Text:
    """Jobs this one comes after, and other jobs' tasks its tasks wait for."""
    names = [*job.after, *sorted(k for k in upstream if "/" in k)]
    if not names:
        return Text("nothing in other jobs", style="dim")
    text = Text()
    for name in names:
        state = upstream.get(name, "unknown")
        label = name if "/" in name else f"job {name}"
        text.append(f"{label}: ")
        text.append_text(
            styled(state.lower(), "SUCCEEDED" if state in DONE_JOB_STATES else state, styles)
        )
        text.append("\n")
    if job.blocked_by:
        text.append(f"blocked: {job.blocked_by}\n", style=styles.get("FAILED", ""))
    return text


def engines_text(engines: Sequence[EngineRow], styles: Mapping[str, str]) -> Text:
    """One line per engine holding this job's work: where it runs, whether it is still
    alive, and how many of the job's tasks it holds."""
    if not engines:
        return Text("no engine holds this job's work now", style="dim")
    text = Text()
    for row in engines:
        text.append(f"{row.id} ", style="bold")
        text.append(f"{row.host} pid {row.pid} · ")
        state = row.state if row.why_gone != "silent" else "gone (silent)"
        text.append(state, style=styles.get("SUCCEEDED" if row.state == "live" else "FAILED", ""))
        text.append(f" · hb {age_text(row.heartbeat_age)} · {row.running} running\n")
    return text


def branch_text(diff: Diff) -> Text:
    if diff.missing:
        return Text(diff.missing, style="dim")
    text = Text(f"{diff.branch} → {diff.base}\n", style="bold")
    text.append(diff.stat.strip() or "no changes yet")
    return text


def plans_text(detail: JobDetail, styles: Mapping[str, str]) -> Text:
    """Each round: trigger, guidance, status; the planner's assessment; the assessor's verdicts."""
    text = Text()
    if not detail.plans:
        text.append("No planner rounds: the tasks were given in the job file.\n", style="dim")
    for plan in detail.plans:
        text.append_text(_plan_text(plan, styles))
    assessments = [t for t in detail.tasks if t.kind == "assess" and t.result_summary]
    if assessments:
        text.append("\nAssessor\n", style="bold")
        for task in assessments:
            text.append(f"{task.title}: ", style="italic")
            text.append(f"{task.result_summary}\n")
    if detail.job is not None and detail.job.error:
        text.append("\nWhy it ended: ", style="bold")
        text.append(detail.job.error)
    return text


def _plan_text(plan: PlanView, styles: Mapping[str, str]) -> Text:
    text = Text()
    text.append(f"round {plan.round} ", style="bold")
    text.append_text(styled(str(plan.status).lower(), str(plan.status), styles))
    text.append(f" · {plan.trigger}")
    if plan.objective_status:
        text.append(f" · objective {plan.objective_status.replace('_', ' ')}")
    text.append("\n")
    if plan.guidance:
        text.append(f"  guidance: “{plan.guidance}”\n", style="italic")
    if plan.assessment:
        text.append(f"  planner: {plan.assessment}\n")
    if plan.generated_task_ids:
        text.append(f"  planned: {', '.join(plan.generated_task_ids)}\n", style="dim")
    problem = plan.error or plan.rejection
    if problem:
        text.append(f"  {'failed' if plan.error else 'rejected'}: {problem}\n", style="red")
    return text

"""Pull request rows: the facts the lifecycle decides on, and applying what it decides.

Everything here runs inside the caller's transaction and does no I/O; the forge calls
happen in :mod:`relay_engine.loop.pullstep` between transactions. Review, fix and rebase work
are ordinary tasks (kinds ``review``, ``fix``, ``rebase``), so they get claims, leases,
retries and recovery like any other task.
"""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from relay_engine.contracts.planner import PlanRejected
from relay_engine.contracts.review import (
    ReviewResult,
    fix_guidance,
    fix_task,
    merge_prep_task,
    rebase_task,
    review_task,
    validate_review_output,
)
from relay_engine.contracts.task_definitions import TaskDef
from relay_engine.core import merge_prep
from relay_engine.core.lifecycle import (
    CONFLICTING,
    Action,
    Decision,
    LifecycleFacts,
    Observation,
    PullFacts,
    ReviewFacts,
)
from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    JobState,
    PullState,
    TaskState,
    check_pull,
)
from relay_engine.core.writeback import review_note
from relay_engine.git.forges import MergeAttempt, MergeKind, Opened, PullRef
from relay_engine.git.worktrees import job_branch, shared_directory
from relay_engine.ops.jobs import cancel_unfinished
from relay_engine.ops.notes import record_note
from relay_engine.ops.plans import open_round
from relay_engine.ops.refusals import Refused
from relay_engine.ops.tasks import cancel_task
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.job_rows import move_job
from relay_engine.store.plan_rows import latest_plan
from relay_engine.store.read_model.pulls import merge_target
from relay_engine.store.schema import Job, PullRequest, Review, Task
from relay_engine.store.task_rows import add_tasks, job_tasks


# -- the hand-off from work to review -------------------------------------------------------
def to_review(session: Session, job: Job, now: float) -> bool:
    """The job's work is done: with a branch to merge it goes to REVIEWING (True), else not."""
    if not (job.job_branch and job.repo_path):
        return False
    move_job(
        session, job, JobState.REVIEWING, now=now, why="work done; pull request and review next"
    )
    return True


# -- facts ----------------------------------------------------------------------------------
def reviews_of(session: Session, job_id: str) -> list[Review]:
    query = select(Review).where(Review.job_id == job_id).order_by(col(Review.number))
    return list(session.exec(query))


def _answer(task: Task | None) -> ReviewResult | PlanRejected | None:
    """A finished review task's answer (None while the task has not succeeded)."""
    if task is None or task.state != TaskState.SUCCEEDED:
        return None
    return validate_review_output(task.result if task.result is not None else task.result_summary)


def _verdict_of(task: Task | None) -> str | None:
    answer = _answer(task)
    if answer is None:
        return None
    return answer.verdict if isinstance(answer, ReviewResult) else "invalid"


def store_verdict(session: Session, review: Review, task: Task | None, now: float) -> None:
    """Copy a finished review task's answer onto its review row (checked at completion)."""
    answer = _answer(task) if review.verdict is None else None
    if answer is None:
        return
    review.finished_at = now
    session.add(review)
    if not isinstance(answer, ReviewResult):
        review.verdict, review.summary = "invalid", answer.reason
        return
    review.verdict, review.summary = answer.verdict, answer.summary
    review.findings = [f.model_dump(mode="json") for f in answer.findings]
    note = review_note(
        review.job_id, review.number, answer.verdict, answer.summary, review.findings
    )
    record_note(session, note, now)
    says = f"job {review.job_id}: review {review.number} says {answer.verdict}: {answer.summary}"
    record_event(
        session,
        EventKind(f"review.{answer.verdict}"),
        says[:500],
        now=now,
        job_id=review.job_id,
        task_key=review.task_key,
        data={"findings": len(answer.findings), "head": review.head_sha},
    )


def lifecycle_facts(
    session: Session,
    job: Job,
    pr: PullRequest | None,
    auto_merge_default: bool,
    observed: Observation | None,
    *,
    record_at: float | None = None,
    merge_checks: bool = False,
) -> LifecycleFacts:
    """The facts :func:`decide` needs; with ``record_at``, a finished review's verdict is
    stored on its row from the very task row the facts were read from (on PostgreSQL two
    reads in one transaction may see different commits)."""
    reviews = reviews_of(session, job.id)
    latest = reviews[-1] if reviews and not reviews[-1].stale else None
    tasks = job_tasks(session, job.id, ACTIVE_TASK_STATES)
    review_facts = None
    if latest is not None:
        task = session.get(Task, latest.task_key)
        if record_at is not None:
            store_verdict(session, latest, task, record_at)
        review_facts = ReviewFacts(
            number=latest.number,
            head_sha=latest.head_sha,
            task_state=TaskState(task.state) if task else TaskState.CANCELLED,
            verdict=latest.verdict or _verdict_of(task),
            followed_up=latest.followed_up,
        )
    preparations, prepared = _preparations(session, job.id)
    return LifecycleFacts(
        job_state=JobState(job.state),
        mode=job.mode,
        review_enabled=job.review_enabled,
        auto_merge=job.auto_merge or auto_merge_default,
        max_review_rounds=job.max_review_rounds,
        pr=_pull_facts(pr),
        observed=observed,
        review=review_facts,
        changes_rounds=sum(1 for r in reviews if r.verdict == "changes" and not r.stale),
        active_work=sum(1 for t in tasks if t.kind != "review"),
        merge_checks=merge_checks,
        prepared_head=prepared,
        preparations=preparations,
    )


def _preparations(session: Session, job_id: str) -> tuple[int, str | None]:
    """How many merge_prep tasks the job had, and the head the latest one left if it
    succeeded (its merge into the job branch is that head)."""
    query = (
        select(Task.state, Task.commit_sha)
        .where(Task.job_id == job_id, Task.kind == merge_prep.KIND)
        .order_by(col(Task.created_at), col(Task.key))
    )
    rows = list(session.exec(query))
    last = rows[-1] if rows else None
    prepared = last[1] if last is not None and last[0] == TaskState.SUCCEEDED else None
    return len(rows), prepared


def _pull_facts(pr: PullRequest | None) -> PullFacts | None:
    if pr is None:
        return None
    return PullFacts(
        state=PullState(pr.state),
        published=pr.published,
        head_sha=pr.head_sha,
        mergeable=pr.mergeable,
        merge_requested=pr.merge_requested,
        force_merge=pr.force_merge,
        close_requested=pr.close_requested,
        rebases=pr.rebases,
        review_decision=pr.review_decision,
    )


def pull_ref(job: Job, pr: PullRequest) -> PullRef:
    body = f"{job.objective.strip() or job.title}\n\nOpened by relay for job `{job.id}`."
    return PullRef(
        job_id=job.id,
        title=job.title or job.id,
        body=body,
        repo_path=job.repo_path or "",
        base_branch=pr.base_branch,
        head_branch=pr.head_branch,
        number=pr.number,
        head_sha=pr.head_sha,
    )


def new_pull(job: Job, forge: str, remote: str | None, now: float) -> PullRequest:
    return PullRequest(
        job_id=job.id,
        forge=forge,
        remote=remote,
        base_branch=job.base_branch,
        head_branch=job.job_branch or job_branch(job.id),
        head_sha=job.head_sha,
        created_at=now,
        updated_at=now,
    )


# -- applying a decision --------------------------------------------------------------------
def apply_decision(
    session: Session, job: Job, pr: PullRequest | None, decision: Decision, now: float
) -> None:
    """Record everything a decision says except its forge action."""
    if pr is not None:
        _track(session, job, pr, decision, now)
    if decision.review_stale:
        _mark_stale(session, job, decision, now)
    if decision.cancel_work:
        cancel_unfinished(session, job.id, f"job {decision.reason}", now)
    if decision.job_to is not None and decision.job_to != job.state:
        move_job(session, job, decision.job_to, now=now, why=decision.reason)


def _track(session: Session, job: Job, pr: PullRequest, decision: Decision, now: float) -> None:
    if decision.head_to:
        record_event(
            session,
            EventKind.PR_HEAD_MOVED,
            f"job {job.id}: {pr.head_branch} moved to {decision.head_to[:12]}",
            now=now,
            job_id=job.id,
            data={"from": pr.head_sha, "to": decision.head_to},
        )
        pr.head_sha = job.head_sha = decision.head_to
    if decision.mergeable is not None:
        pr.mergeable = decision.mergeable
    if decision.pr_to is not None:
        pr.state = check_pull(pr.state, decision.pr_to, key=f"pull request of job {job.id}")
        pr.merge_requested = pr.close_requested = False
        record_event(
            session,
            EventKind(f"pr.{decision.pr_to.lower()}"),
            f"job {job.id}: pull request {decision.pr_to.lower()}: {decision.reason}",
            now=now,
            job_id=job.id,
            data={"head": pr.head_sha, "merge_commit": pr.merge_commit},
        )
    if decision.action is not Action.MERGE:  # a merge attempt says itself why it waits
        pr.note = decision.note
    pr.updated_at = now
    session.add(pr)


def _mark_stale(session: Session, job: Job, decision: Decision, now: float) -> None:
    reviews = reviews_of(session, job.id)
    if not reviews or reviews[-1].stale:
        return
    review = reviews[-1]
    review.stale = True
    session.add(review)
    task = session.get(Task, review.task_key)
    if task is not None and task.state in ACTIVE_TASK_STATES:
        cancel_task(session, task, "stale: the head moved", now)
    record_event(
        session,
        EventKind.REVIEW_STALE,
        f"job {job.id}: review {review.number} is stale: {decision.reason}",
        now=now,
        job_id=job.id,
        task_key=review.task_key,
        level="warning",
    )


# -- follow-up work -------------------------------------------------------------------------
def _add_lifecycle_task(session: Session, job: Job, definition: TaskDef, now: float) -> Task:
    """Insert a review/fix/rebase task after the job's work, in a wave already let through."""
    taken = set(session.exec(select(Task.task_id).where(Task.job_id == job.id)))
    task_id, suffix = definition.id, 1
    while task_id in taken:
        suffix += 1
        task_id = f"{definition.id}.{suffix}"
    if task_id != definition.id:
        definition = definition.model_copy(update={"id": task_id})
    top = session.exec(select(func.max(Task.wave)).where(Task.job_id == job.id)).first()
    (row,) = add_tasks(session, job.id, job.priority, [definition], now=now)
    row.wave = int(top or 1)
    session.add(row)
    return row


def add_review(
    session: Session, job: Job, pr: PullRequest, head: str, prompt: str, now: float
) -> Review | None:
    """Queue a review of ``head``, unless one of it is already queued or done."""
    reviews = reviews_of(session, job.id)
    last = reviews[-1] if reviews else None
    if last is not None and not last.stale and last.head_sha == head and not last.followed_up:
        return None
    number = len(reviews) + 1
    script = (job.sim or {}).get("reviewer")
    row = _add_lifecycle_task(session, job, review_task(number, prompt, script), now)
    review = Review(job_id=job.id, number=number, task_key=row.key, head_sha=head, created_at=now)
    session.add(review)
    record_event(
        session,
        EventKind.REVIEW_QUEUED,
        f"job {job.id}: final review {number} of {pr.head_branch} at {head[:12]}",
        now=now,
        job_id=job.id,
        task_key=row.key,
        data={"round": number, "head": head},
    )
    return review


def start_fix(session: Session, job: Job, now: float) -> None:
    """Fix work for the latest review's findings: a task, or a planner round with guidance."""
    review = reviews_of(session, job.id)[-1]
    review.followed_up = True
    session.add(review)
    guidance = fix_guidance(review.summary, review.findings)
    if job.mode == "autonomous":
        open_round(
            session,
            job,
            trigger="continuation",
            now=now,
            guidance=guidance,
            previous=latest_plan(session, job.id),
        )
        return
    script = (job.sim or {}).get("fixer")
    row = _add_lifecycle_task(session, job, fix_task(review.number, guidance, script), now)
    record_event(
        session,
        EventKind.REVIEW_FIXING,
        f"job {job.id}: {row.task_id} fixes the findings of review {review.number}",
        now=now,
        job_id=job.id,
        task_key=row.key,
    )


def add_merge_prep(
    session: Session,
    job: Job,
    pr: PullRequest,
    conflicts: tuple[str, ...],
    checks: tuple[str, ...],
    now: float,
) -> Task:
    """Queue the preparation of the job branch's head for its merge."""
    pr.mergeable = None
    session.add(pr)
    number = _preparations(session, job.id)[0] + 1
    script = (job.sim or {}).get("preparer")
    definition = merge_prep_task(number, pr.base_branch, pr.head_branch, conflicts, checks, script)
    row = _add_lifecycle_task(session, job, definition, now)
    record_event(
        session,
        EventKind.PR_PREPARING,
        f"job {job.id}: {row.task_id} prepares {pr.head_branch} to merge into {pr.base_branch}",
        now=now,
        job_id=job.id,
        task_key=row.key,
        data={"conflicts": list(conflicts), "checks": list(checks)},
    )
    return row


def add_rebase(
    session: Session, job: Job, pr: PullRequest, conflicts: tuple[str, ...], now: float
) -> None:
    pr.rebases += 1
    pr.mergeable = None
    session.add(pr)
    script = (job.sim or {}).get("rebaser")
    definition = rebase_task(pr.rebases, pr.base_branch, pr.head_branch, conflicts, script)
    row = _add_lifecycle_task(session, job, definition, now)
    record_event(
        session,
        EventKind.PR_CONFLICT,
        f"job {job.id}: {pr.head_branch} conflicts with {pr.base_branch} in "
        f"{', '.join(conflicts) or 'unknown paths'}; {row.task_id} resolves it",
        now=now,
        job_id=job.id,
        task_key=row.key,
        level="warning",
    )


# -- forge outcomes -------------------------------------------------------------------------
def record_opened(session: Session, job: Job, pr: PullRequest, opened: Opened, now: float) -> None:
    if opened.head_sha is None:
        session.delete(pr)
        move_job(
            session, job, JobState.SUCCEEDED, now=now, why=f"{pr.base_branch} already has its work"
        )
        return
    pr.published = True
    pr.head_sha = job.head_sha = opened.head_sha
    pr.number, pr.url = opened.number, opened.url
    pr.error = None
    pr.updated_at = now
    session.add_all([pr, job])
    where = f" {pr.url}" if pr.url else ""
    record_event(
        session,
        EventKind.PR_OPENED,
        f"job {job.id}: pull request{where} {pr.head_branch} -> {merge_target(pr)}",
        now=now,
        job_id=job.id,
        data={"forge": pr.forge, "number": pr.number, "url": pr.url, "head": pr.head_sha},
    )


def record_merge(
    session: Session, job: Job, pr: PullRequest, attempt: MergeAttempt, retry_s: float, now: float
) -> None:
    pr.updated_at = now
    if attempt.kind is not MergeKind.FAILED:
        pr.error = None
    if attempt.kind is MergeKind.MERGED:
        pr.merge_commit = attempt.commit
        pr.note = None
        why = f"relay merged {pr.head_branch} at {(pr.head_sha or '')[:12]} into {pr.base_branch}"
        apply_decision(
            session,
            job,
            pr,
            Decision(pr_to=PullState.MERGED, job_to=JobState.MERGED, cancel_work=True, reason=why),
            now,
        )
        return
    if attempt.kind is MergeKind.CONFLICT:
        pr.mergeable = CONFLICTING
    elif attempt.kind is MergeKind.WAITING:
        pr.note, pr.retry_at = attempt.detail, now + retry_s
    else:
        record_error(session, pr, attempt.detail, retry_s, now)
    session.add(pr)


def record_error(session: Session, pr: PullRequest, error: str, retry_s: float, now: float) -> None:
    """A forge call failed: say so once (not on every retry) and back off."""
    if error != pr.error:
        record_event(
            session,
            EventKind.PR_ERROR,
            f"job {pr.job_id}: {error}"[:500],
            now=now,
            job_id=pr.job_id,
            level="warning",
        )
    pr.error, pr.retry_at, pr.updated_at = error, now + retry_s, now
    session.add(pr)


# -- operator commands ----------------------------------------------------------------------
def no_pull_reason(job_id: str, state: str, repo_path: str | None) -> str:
    """Why a job has nothing to merge or close: only a git job ever gets a pull request."""
    if not repo_path:
        return f"job {job_id} has no repository, so it never gets a pull request"
    if (directory := shared_directory(repo_path)) is not None:
        return (
            f"job {job_id} works in {directory}, which is not a git repository: its changes "
            "are made there directly and it never gets a pull request"
        )
    return (
        f"job {job_id} has no pull request yet (it is {state.lower()}): it opens once the "
        "work is done"
    )


def _open_pull(session: Session, job: Job) -> PullRequest:
    pr = session.get(PullRequest, job.id)
    if pr is None:
        raise Refused(no_pull_reason(job.id, job.state, job.repo_path))
    if pr.state != PullState.OPEN:
        raise Refused(f"the pull request of job {job.id} is already {pr.state}")
    return pr


def request_merge(session: Session, job: Job, now: float, *, force: bool = False) -> str:
    """``relay merge JOB [--force]``: merge an approved job (any open one with force, and a
    BLOCKED one as its branch stands)."""
    if job.state == JobState.BLOCKED:
        if not force:
            raise Refused(f"job {job.id} is BLOCKED; merge --force merges what its branch holds")
        return _merge_as_it_stands(session, job, now)
    pr = _open_pull(session, job)
    if job.state == JobState.ACTIVE:
        raise Refused(f"job {job.id} is still working (ACTIVE); merge it once READY")
    if job.state != JobState.READY and not force:
        raise Refused(
            f"job {job.id} is {job.state}: no review approved its head "
            f"{(pr.head_sha or '')[:12]}; merge --force merges it anyway"
        )
    pr.merge_requested, pr.force_merge, pr.retry_at = True, force, None
    session.add(pr)
    what = f"{pr.head_branch} at {(pr.head_sha or '')[:12]} into {pr.base_branch}"
    record_event(
        session, EventKind.PR_MERGE_REQUESTED, f"job {job.id}: merge {what}", now=now, job_id=job.id
    )
    return f"job {job.id}: merging {what}" + (" (forced)" if force else "")


def _merge_as_it_stands(session: Session, job: Job, now: float) -> str:
    """What the job's branch holds goes in without the rest: its unfinished work cancelled,
    a pull request opened and merged unreviewed (the operator said --force)."""
    if not (job.job_branch and job.repo_path):
        raise Refused(no_pull_reason(job.id, job.state, job.repo_path if job.job_branch else None))
    cancel_unfinished(session, job.id, "not needed: relay merge --force took the job as it is", now)
    pr = session.get(PullRequest, job.id) or new_pull(job, "local", None, now)
    pr.merge_requested, pr.force_merge, pr.retry_at = True, True, None
    session.add(pr)
    why = f"relay merge --force: {pr.head_branch} goes into {pr.base_branch} as it stands"
    move_job(session, job, JobState.REVIEWING, now=now, why=why, blocked_by=None)
    return f"job {job.id}: merging {pr.head_branch} into {pr.base_branch} as it stands (forced)"


def request_close(session: Session, job: Job, now: float) -> str:
    """``relay close JOB``: close the pull request; the job's unfinished work is cancelled."""
    pr = _open_pull(session, job)
    pr.close_requested, pr.retry_at = True, None
    session.add(pr)
    record_event(
        session, EventKind.PR_CLOSE_REQUESTED, f"job {job.id}: closing its pull request", now=now,
        job_id=job.id,
    )  # fmt: skip
    return f"job {job.id}: closing the pull request of {pr.head_branch}"

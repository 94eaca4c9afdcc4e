"""What a job with a branch does next: open, prepare, review, fix, rebase, merge, close, or wait.

After its work is done a job moves ACTIVE -> REVIEWING (pull request open, final review
queued or running) -> READY (review approved the current head) -> MERGED, or CLOSED.
The pull request's state as the forge reports it moves the job too: merged or closed by a
person means MERGED or CLOSED and the job's unfinished work is cancelled. A review is
stale as soon as the head moves after it.

Pure: :func:`decide` takes facts and returns one :class:`Decision`. The shell
(:mod:`relay_engine.loop.pullstep`) gathers the facts, performs the decision's forge action
and records the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from relay_engine.core.merge_prep import MAX_PREPARATIONS, needs_preparation
from relay_engine.core.states import (
    ACTIVE_TASK_STATES,
    JOB_TRANSITIONS,
    JobState,
    PullState,
    TaskState,
)

MAX_REBASES = 3
MERGEABLE, CONFLICTING = "MERGEABLE", "CONFLICTING"


class Action(StrEnum):
    """The one forge or task action a decision asks for (NONE: only record, or wait)."""

    NONE = "none"
    OPEN = "open"  # push the branch and create the pull request
    REVIEW = "review"  # queue a final review of the current head
    FIX = "fix"  # fix work for a "changes" verdict (task, or a planner round)
    REBASE = "rebase"  # a task that merges the moved base in and resolves the conflicts
    PREPARE = "prepare"  # a merge_prep task: the base merged in, the repository's checks run
    MERGE = "merge"
    CLOSE = "close"


@dataclass(frozen=True)
class PullFacts:
    """The stored pull request."""

    state: PullState
    published: bool
    head_sha: str | None
    mergeable: str | None
    merge_requested: bool = False
    force_merge: bool = False
    close_requested: bool = False
    rebases: int = 0
    review_decision: str | None = None


@dataclass(frozen=True)
class Observation:
    """What the forge says now. ``why`` explains a MERGED or CLOSED state."""

    state: PullState
    head_sha: str | None
    mergeable: str | None
    why: str = ""
    review_decision: str | None = None


@dataclass(frozen=True)
class ReviewFacts:
    """The latest review round, unless it went stale."""

    number: int
    head_sha: str | None
    task_state: TaskState
    verdict: str | None  # approve | changes | invalid; None until its task succeeded
    followed_up: bool = False


@dataclass(frozen=True)
class LifecycleFacts:
    job_state: JobState
    mode: str
    review_enabled: bool
    auto_merge: bool
    max_review_rounds: int
    pr: PullFacts | None
    observed: Observation | None = None
    review: ReviewFacts | None = None
    changes_rounds: int = 0  # reviews that asked for changes
    active_work: int = 0  # unfinished tasks other than reviews
    merge_checks: bool = False  # the repository has checks: every merge is prepared first
    prepared_head: str | None = None  # the head the latest merge_prep succeeded at
    preparations: int = 0  # merge_prep tasks the job had


@dataclass(frozen=True)
class Decision:
    action: Action = Action.NONE
    job_to: JobState | None = None
    pr_to: PullState | None = None
    head_to: str | None = None  # the head moved here
    mergeable: str | None = None  # newly observed mergeability
    review_stale: bool = False  # the latest review looked at another head
    cancel_work: bool = False
    note: str | None = None  # why the job waits, shown to the operator
    reason: str = ""

    @property
    def waits(self) -> bool:
        """Nothing to do or record but (perhaps) the note saying why."""
        return replace(self, note=None, reason="") == WAIT


WAIT = Decision()


def decide(facts: LifecycleFacts) -> Decision:
    """The next step of a job's pull request lifecycle."""
    if facts.job_state in (JobState.MERGED, JobState.CLOSED):
        return Decision(cancel_work=True, reason="job finished") if facts.active_work else WAIT
    pr = facts.pr
    if pr is not None and pr.state == PullState.OPEN:
        ended = _ended_outside(facts)
        if ended is not None:
            return ended
    tracked = _tracked(facts)
    if pr is not None and pr.state == PullState.OPEN and pr.close_requested:
        return replace(tracked, action=Action.CLOSE, reason="closed by the operator")
    if facts.job_state == JobState.REVIEWING:
        step = _reviewing(facts, _head(facts))
    elif facts.job_state == JobState.READY:
        step = _ready(facts, _head(facts))
    else:
        step = WAIT
    return replace(step, head_to=tracked.head_to, mergeable=tracked.mergeable)


def _ended_outside(facts: LifecycleFacts) -> Decision | None:
    """A pull request merged or closed on the forge (by a person, or by relay just now)."""
    seen = facts.observed
    if seen is None or seen.state == PullState.OPEN:
        return None
    job_to = JobState.MERGED if seen.state == PullState.MERGED else JobState.CLOSED
    return Decision(
        job_to=job_to if job_to in JOB_TRANSITIONS[facts.job_state] else None,
        pr_to=seen.state,
        head_to=_moved(facts),
        cancel_work=True,
        reason=seen.why or f"the forge says {seen.state.lower()}",
    )


def _moved(facts: LifecycleFacts) -> str | None:
    seen, pr = facts.observed, facts.pr
    if seen is None or pr is None or not seen.head_sha or seen.head_sha == pr.head_sha:
        return None
    return seen.head_sha


def _tracked(facts: LifecycleFacts) -> Decision:
    seen, pr = facts.observed, facts.pr
    mergeable = None
    if seen is not None and pr is not None and seen.mergeable != pr.mergeable:
        mergeable = seen.mergeable
    return Decision(head_to=_moved(facts), mergeable=mergeable)


def _head(facts: LifecycleFacts) -> str | None:
    moved = _moved(facts)
    return moved or (facts.pr.head_sha if facts.pr else None)


def _mergeable(facts: LifecycleFacts) -> str | None:
    if facts.observed is not None:
        return facts.observed.mergeable
    return facts.pr.mergeable if facts.pr else None


def _reviewing(facts: LifecycleFacts, head: str | None) -> Decision:
    pr = facts.pr
    if pr is None or not pr.published:
        return Decision(action=Action.OPEN, reason="the job's work is done")
    if facts.active_work:
        return WAIT
    if pr.merge_requested and pr.force_merge:
        return _merge(facts, forced=True)
    prepare = _prepare(facts, head)  # before the review: it reviews what will merge
    if prepare is not None:
        return prepare
    if not facts.review_enabled:
        return Decision(job_to=JobState.READY, reason="final review disabled for this job")
    review = facts.review
    if review is None or (review.verdict == "changes" and review.followed_up):
        return Decision(action=Action.REVIEW, reason=f"reviewing head {(head or '')[:12]}")
    if review.head_sha != head:
        return Decision(action=Action.REVIEW, review_stale=True, reason="the head moved")
    if review.task_state in ACTIVE_TASK_STATES:
        return WAIT
    if review.task_state != TaskState.SUCCEEDED or review.verdict == "invalid":
        why = f"final review {review.number} {review.task_state.lower()}"
        return Decision(job_to=JobState.FAILED, reason=why)
    if review.verdict == "approve":
        return Decision(job_to=JobState.READY, reason=f"review {review.number} approved")
    if facts.changes_rounds >= facts.max_review_rounds:
        note = (
            f"review asked for changes {facts.changes_rounds} times (max_review_rounds); "
            "waiting for the operator: relay merge --force, relay close, or relay replan"
        )
        return Decision(note=note)
    return Decision(
        action=Action.FIX,
        job_to=JobState.ACTIVE,
        reason=f"review {review.number} asked for changes",
    )


def _ready(facts: LifecycleFacts, head: str | None) -> Decision:
    review = facts.review
    if facts.review_enabled and (review is None or review.head_sha != head):
        return Decision(
            action=Action.REVIEW,
            job_to=JobState.REVIEWING,
            review_stale=review is not None,
            reason="the head moved after the review",
        )
    if facts.review_enabled and review is not None and review.verdict != "approve":
        # A review at this head that is not (or not yet) an approval: READY no longer holds.
        return Decision(
            job_to=JobState.REVIEWING, reason=f"review {review.number} is not an approval"
        )
    pr = facts.pr
    if pr is None or not (facts.auto_merge or pr.merge_requested):
        return WAIT
    return _merge(facts, forced=pr.force_merge)


def _merge(facts: LifecycleFacts, *, forced: bool) -> Decision:
    pr = facts.pr
    assert pr is not None
    decision = _forge_review_decision(facts)
    if decision == "CHANGES_REQUESTED" and not forced:
        return Decision(note="the forge's reviewers requested changes; not merging")
    prepare = None if forced else _prepare(facts, _head(facts))
    if prepare is not None:
        return prepare
    mergeable = _mergeable(facts)
    if mergeable == MERGEABLE:
        why = "merge requested" if pr.merge_requested else "auto-merge"
        return Decision(action=Action.MERGE, reason=why)
    if mergeable != CONFLICTING:
        return Decision(note="waiting for the forge to say whether it can merge")
    if pr.rebases >= MAX_REBASES:
        return Decision(
            note=f"still conflicts with the base after {pr.rebases} rebases; resolve by hand"
        )
    job_to = JobState.ACTIVE if facts.job_state != JobState.ACTIVE else None
    return Decision(action=Action.REBASE, job_to=job_to, reason="conflicts with the moved base")


def _prepare(facts: LifecycleFacts, head: str | None) -> Decision | None:
    """A merge_prep task for ``head`` when the repository has checks and none passed at it
    yet (a conflict included: the preparation merges the base in); past
    :data:`MAX_PREPARATIONS` the job waits on the operator instead."""
    if not needs_preparation(facts.merge_checks, head, facts.prepared_head):
        return None
    if facts.preparations >= MAX_PREPARATIONS:
        note = (
            f"merge preparation ran {facts.preparations} times without passing at the head; "
            "fix the branch by hand, or relay merge --force to merge it unprepared"
        )
        return Decision(note=note)
    job_to = JobState.ACTIVE if facts.job_state != JobState.ACTIVE else None
    why = f"preparing head {(head or '')[:12]} to merge: the base merged in, the checks run"
    return Decision(action=Action.PREPARE, job_to=job_to, reason=why)


def _forge_review_decision(facts: LifecycleFacts) -> str | None:
    if facts.observed is not None and facts.observed.review_decision is not None:
        return facts.observed.review_decision
    return facts.pr.review_decision if facts.pr else None

"""Pull requests and final reviews: where a job's pull request lives, its state and note,
why it waits, where a merge lands, and each review round with whether its head moved on.

The job views carry these (:mod:`.jobs`), the console's job screen reads every review
round, and the engine words a new pull request's target with :func:`merge_target`: all of
it from rows, with no I/O, since a console may be on another host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.store.schema import PullRequest, Review


@dataclass(frozen=True, slots=True)
class PullView:
    """A job's pull request: where it lives, its state, and why it waits."""

    forge: str
    state: str
    base_branch: str
    head_branch: str
    head_sha: str | None
    target: str
    number: int | None = None
    url: str | None = None
    remote: str | None = None
    mergeable: str | None = None
    merge_commit: str | None = None
    note: str | None = None
    error: str | None = None
    merge_requested: bool = False
    last_checked_at: float | None = None


@dataclass(frozen=True, slots=True)
class ReviewView:
    """A job's latest final review: the head it read, its verdict and findings; ``stale``
    once the head moved after it."""

    round: int
    verdict: str | None
    stale: bool
    head_sha: str | None = None
    summary: str | None = None
    findings: tuple[Mapping[str, Any], ...] = ()
    task: str | None = None


def read_pulls(
    session: Session, job_ids: Sequence[str]
) -> dict[str, tuple[PullView | None, ReviewView | None]]:
    """job id -> its pull request and latest final review (either None when it has none)."""
    if not job_ids:
        return {}
    ids = sorted(set(job_ids))
    prs = {
        p.job_id: p
        for p in session.exec(select(PullRequest).where(col(PullRequest.job_id).in_(ids)))
    }
    latest: dict[str, Review] = {}
    reviews = select(Review).where(col(Review.job_id).in_(ids)).order_by(col(Review.number))
    for review in session.exec(reviews):
        latest[review.job_id] = review
    return {
        job_id: (
            _pull_view(prs[job_id]) if job_id in prs else None,
            _review_view(latest[job_id], prs.get(job_id)) if job_id in latest else None,
        )
        for job_id in ids
    }


def merge_target(pr: PullRequest) -> str:
    """Where a merge of this pull request lands, in words (no I/O: consoles may be remote)."""
    if pr.forge == "github":
        return f"{pr.base_branch} on GitHub" + (f" ({pr.url})" if pr.url else "")
    if pr.remote:
        return f"{pr.base_branch} on {pr.remote}"
    return f"{pr.base_branch} in the job's repository (left to you while it is checked out)"


def _pull_view(pr: PullRequest) -> PullView:
    return PullView(
        forge=pr.forge,
        state=str(pr.state),
        base_branch=pr.base_branch,
        head_branch=pr.head_branch,
        head_sha=pr.head_sha,
        target=merge_target(pr),
        number=pr.number,
        url=pr.url,
        remote=pr.remote,
        mergeable=pr.mergeable,
        merge_commit=pr.merge_commit,
        note=pr.note,
        error=pr.error,
        merge_requested=pr.merge_requested,
        last_checked_at=pr.last_checked_at,
    )


def _review_view(review: Review, pr: PullRequest | None) -> ReviewView:
    current = pr is not None and review.head_sha == pr.head_sha and not review.stale
    return ReviewView(
        round=review.number,
        verdict=review.verdict,
        stale=review.stale or not current,
        head_sha=review.head_sha,
        summary=review.summary,
        findings=tuple(review.findings or ()),
        task=review.task_key,
    )


def read_reviews(session: Session, job_id: str) -> list[ReviewView]:
    """Every final review round of a job, oldest first (``stale`` against its pull
    request's current head, as in :func:`read_pulls`)."""
    pr = session.get(PullRequest, job_id)
    rows = session.exec(select(Review).where(Review.job_id == job_id).order_by(col(Review.number)))
    return [_review_view(review, pr) for review in rows]

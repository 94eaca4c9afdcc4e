"""The pull request lifecycle decision (pure) and the job / pull request state tables."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay_engine.core.lifecycle import (
    MAX_REBASES,
    Action,
    Decision,
    LifecycleFacts,
    Observation,
    PullFacts,
    ReviewFacts,
    decide,
)
from relay_engine.core.states import (
    JOB_TRANSITIONS,
    PULL_TRANSITIONS,
    IllegalTransition,
    JobState,
    PullState,
    TaskState,
    check_job,
    check_pull,
)

J, P, T = JobState, PullState, TaskState
HEAD, OLD = "b" * 40, "a" * 40


def pr(**changes: Any) -> PullFacts:
    base = PullFacts(state=P.OPEN, published=True, head_sha=HEAD, mergeable="MERGEABLE")
    return replace(base, **changes)


def review(**changes: Any) -> ReviewFacts:
    base = ReviewFacts(number=1, head_sha=HEAD, task_state=T.SUCCEEDED, verdict="approve")
    return replace(base, **changes)


def facts(job: JobState = J.REVIEWING, **changes: Any) -> LifecycleFacts:
    base = LifecycleFacts(
        job_state=job,
        mode="manual",
        review_enabled=True,
        auto_merge=False,
        max_review_rounds=3,
        pr=pr(),
        review=review(),
    )
    return replace(base, **changes)


def seen(state: PullState = P.OPEN, head: str = HEAD, **changes: Any) -> Observation:
    return Observation(state=state, head_sha=head, mergeable="MERGEABLE", **changes)


CASES: list[tuple[str, LifecycleFacts, Decision]] = [
    ("work done, no pull request yet: open one",
     facts(pr=None, review=None), Decision(action=Action.OPEN)),
    ("pull request not yet published: open it",
     facts(pr=pr(published=False), review=None), Decision(action=Action.OPEN)),
    ("published, never reviewed: review it",
     facts(review=None), Decision(action=Action.REVIEW)),
    ("review running on the current head: wait",
     facts(review=review(task_state=T.RUNNING, verdict=None)), Decision()),
    ("review approved the current head: ready",
     facts(), Decision(job_to=J.READY)),
    ("review asked for changes: fix work, back to active",
     facts(review=review(verdict="changes"), changes_rounds=1),
     Decision(action=Action.FIX, job_to=J.ACTIVE)),
    ("fix work done: review again",
     facts(review=review(verdict="changes", followed_up=True), changes_rounds=1),
     Decision(action=Action.REVIEW)),
    ("changes asked max_review_rounds times: wait for the operator",
     facts(review=review(verdict="changes"), changes_rounds=3), Decision()),
    ("review looked at another head: stale, review again",
     facts(review=review(head_sha=OLD)), Decision(action=Action.REVIEW, review_stale=True)),
    ("review task failed for good: the job fails",
     facts(review=review(task_state=T.FAILED, verdict=None)), Decision(job_to=J.FAILED)),
    ("review answer unusable: the job fails",
     facts(review=review(verdict="invalid")), Decision(job_to=J.FAILED)),
    ("final review disabled: ready at once",
     facts(review_enabled=False, review=None), Decision(job_to=J.READY)),
    ("operator forces a merge of an unapproved head",
     facts(pr=pr(merge_requested=True, force_merge=True), review=review(verdict="changes")),
     Decision(action=Action.MERGE)),
    ("ready without auto-merge or a request: wait",
     facts(J.READY), Decision()),
    ("ready with auto-merge and mergeable: merge",
     facts(J.READY, auto_merge=True), Decision(action=Action.MERGE)),
    ("ready, merge requested, conflicting: rebase task, active",
     facts(J.READY, pr=pr(merge_requested=True, mergeable="CONFLICTING")),
     Decision(action=Action.REBASE, job_to=J.ACTIVE)),
    ("still conflicting after the last rebase: wait for a person",
     facts(J.READY, auto_merge=True, pr=pr(mergeable="CONFLICTING", rebases=MAX_REBASES)),
     Decision()),
    ("forge has not computed mergeability: wait",
     facts(J.READY, auto_merge=True, pr=pr(mergeable="UNKNOWN")), Decision()),
    ("the head moved after approval: stale, reviewing again",
     facts(J.READY, observed=seen(head=OLD)),
     Decision(action=Action.REVIEW, job_to=J.REVIEWING, review_stale=True, head_to=OLD)),
    ("GitHub reviewers requested changes: no auto-merge",
     facts(J.READY, auto_merge=True, observed=seen(review_decision="CHANGES_REQUESTED")),
     Decision()),
    ("a person merged it: merged, unfinished work cancelled",
     facts(J.READY, observed=seen(P.MERGED)),
     Decision(job_to=J.MERGED, pr_to=P.MERGED, cancel_work=True)),
    ("a person merged it while fix work ran",
     facts(J.ACTIVE, observed=seen(P.MERGED)),
     Decision(job_to=J.MERGED, pr_to=P.MERGED, cancel_work=True)),
    ("closed on the forge: closed, work cancelled",
     facts(J.REVIEWING, observed=seen(P.CLOSED)),
     Decision(job_to=J.CLOSED, pr_to=P.CLOSED, cancel_work=True)),
    ("a failed job's pull request merged by a person",
     facts(J.FAILED, observed=seen(P.MERGED)),
     Decision(job_to=J.MERGED, pr_to=P.MERGED, cancel_work=True)),
    ("operator closes it",
     facts(J.READY, pr=pr(close_requested=True)), Decision(action=Action.CLOSE)),
    ("an active job's head moved: only recorded",
     facts(J.ACTIVE, observed=seen(head=OLD)), Decision(head_to=OLD)),
    ("a job without work to merge ignores a stray pull request's end",
     facts(J.SUCCEEDED, observed=seen(P.CLOSED)), Decision(pr_to=P.CLOSED, cancel_work=True)),
    ("merged job with tasks left: cancel them",
     facts(J.MERGED, pr=pr(state=P.MERGED), active_work=2), Decision(cancel_work=True)),
    ("merged job, nothing left: nothing to do",
     facts(J.MERGED, pr=pr(state=P.MERGED)), Decision()),
]  # fmt: skip


@pytest.mark.parametrize(("facts_", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision_table(facts_: LifecycleFacts, expected: Decision) -> None:
    decision = decide(facts_)
    assert replace(decision, reason="", note=None) == expected


def test_waiting_decisions_say_why() -> None:
    exhausted = decide(facts(review=review(verdict="changes"), changes_rounds=3))
    assert exhausted.waits and "max_review_rounds" in (exhausted.note or "")
    unknown = decide(facts(J.READY, auto_merge=True, pr=pr(mergeable="UNKNOWN")))
    assert unknown.waits and "forge" in (unknown.note or "")
    assert not decide(facts()).waits


def test_newly_observed_mergeability_is_recorded() -> None:
    observed = Observation(P.OPEN, HEAD, "CONFLICTING")
    decision = decide(facts(J.READY, observed=observed))
    assert decision.mergeable == "CONFLICTING" and decision.action is Action.NONE


# -- properties ------------------------------------------------------------------------------
shas = st.sampled_from([HEAD, OLD])
pull_facts = st.builds(
    PullFacts,
    state=st.sampled_from(list(P)),
    published=st.booleans(),
    head_sha=shas,
    mergeable=st.sampled_from(["MERGEABLE", "CONFLICTING", "UNKNOWN", None]),
    merge_requested=st.booleans(),
    force_merge=st.booleans(),
    close_requested=st.booleans(),
    rebases=st.integers(0, MAX_REBASES + 1),
    review_decision=st.sampled_from([None, "APPROVED", "CHANGES_REQUESTED"]),
)
review_facts = st.builds(
    ReviewFacts,
    number=st.integers(1, 5),
    head_sha=shas,
    task_state=st.sampled_from(list(T)),
    verdict=st.sampled_from([None, "approve", "changes", "invalid"]),
    followed_up=st.booleans(),
)
observations = st.builds(
    Observation,
    state=st.sampled_from(list(P)),
    head_sha=shas,
    mergeable=st.sampled_from(["MERGEABLE", "CONFLICTING", "UNKNOWN"]),
    review_decision=st.sampled_from([None, "APPROVED", "CHANGES_REQUESTED"]),
)
all_facts = st.builds(
    LifecycleFacts,
    job_state=st.sampled_from(list(J)),
    mode=st.sampled_from(["manual", "autonomous"]),
    review_enabled=st.booleans(),
    auto_merge=st.booleans(),
    max_review_rounds=st.integers(1, 4),
    pr=st.none() | pull_facts,
    observed=st.none() | observations,
    review=st.none() | review_facts,
    changes_rounds=st.integers(0, 5),
    active_work=st.integers(0, 3),
    merge_checks=st.booleans(),
    prepared_head=st.none() | shas,
    preparations=st.integers(0, 4),
)


@settings(max_examples=400)
@given(all_facts)
def test_every_job_move_decided_is_legal(f: LifecycleFacts) -> None:
    decision = decide(f)
    if decision.job_to is not None and decision.job_to != f.job_state:
        check_job(f.job_state, decision.job_to)
    if decision.pr_to is not None:
        assert f.pr is not None
        check_pull(f.pr.state, decision.pr_to)


@settings(max_examples=400)
@given(all_facts)
def test_nothing_is_merged_that_no_review_approved_at_that_head(f: LifecycleFacts) -> None:
    if decide(f).action is not Action.MERGE:
        return
    assert f.pr is not None
    head = f.observed.head_sha if f.observed and f.observed.head_sha else f.pr.head_sha
    approved = f.review is not None and f.review.verdict == "approve"
    assert f.pr.force_merge or not f.review_enabled or (approved and f.review.head_sha == head)


@settings(max_examples=400)
@given(all_facts)
def test_nothing_is_merged_unprepared_where_the_repository_has_checks(f: LifecycleFacts) -> None:
    if decide(f).action is not Action.MERGE or not f.merge_checks:
        return
    assert f.pr is not None
    head = f.observed.head_sha if f.observed and f.observed.head_sha else f.pr.head_sha
    assert f.pr.force_merge or f.prepared_head == head


@settings(max_examples=400)
@given(all_facts)
def test_a_merge_or_close_seen_on_the_forge_always_ends_an_open_job(f: LifecycleFacts) -> None:
    ended = f.observed is not None and f.observed.state != P.OPEN
    if not ended or f.pr is None or f.pr.state != P.OPEN:
        return
    if f.job_state not in (J.ACTIVE, J.REVIEWING, J.READY, J.FAILED, J.CANCELLED):
        return  # ended, waiting to start, or never had work to merge
    decision = decide(f)
    assert decision.cancel_work and decision.pr_to == f.observed.state  # type: ignore[union-attr]
    assert decision.job_to == (J.MERGED if f.observed.state == P.MERGED else J.CLOSED)  # type: ignore[union-attr]


@settings(max_examples=400)
@given(all_facts)
def test_ended_jobs_take_no_forge_action(f: LifecycleFacts) -> None:
    if f.job_state in (J.MERGED, J.CLOSED):
        assert decide(f).action is Action.NONE


# -- state tables ----------------------------------------------------------------------------
JOB_PAIRS = [(a, b) for a in J for b in J]


@pytest.mark.parametrize(("current", "target"), JOB_PAIRS, ids=[f"{a}->{b}" for a, b in JOB_PAIRS])
def test_every_job_move_is_allowed_exactly_when_the_table_says(
    current: JobState, target: JobState
) -> None:
    if target in JOB_TRANSITIONS[current]:
        assert check_job(current, target) is target
    else:
        with pytest.raises(IllegalTransition, match=f"job j cannot go from {current} to {target}"):
            check_job(current, target, key="j")


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (J.MERGED, J.ACTIVE),  # merged is final: a retry cannot revive it
        (J.CLOSED, J.MERGED),
        (J.SUCCEEDED, J.MERGED),  # a job without a branch has nothing to merge
        (J.ACTIVE, J.READY),  # readiness needs a review (or REVIEWING deciding there is none)
        (J.READY, J.SUCCEEDED),
        (J.REVIEWING, J.REVIEWING),
    ],
)
def test_named_illegal_job_moves_raise(current: JobState, target: JobState) -> None:
    with pytest.raises(IllegalTransition):
        check_job(current, target)


PULL_PAIRS = [(a, b) for a in P for b in P]


@pytest.mark.parametrize(
    ("current", "target"), PULL_PAIRS, ids=[f"{a}->{b}" for a, b in PULL_PAIRS]
)
def test_pull_request_moves_follow_their_table(current: PullState, target: PullState) -> None:
    if target in PULL_TRANSITIONS[current]:
        assert check_pull(current, target) is target
    else:
        with pytest.raises(IllegalTransition):
            check_pull(current, target)

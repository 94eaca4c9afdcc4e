"""Merge preparation's rules (pure): when a head is prepared before it merges, and how the
checks' record judges the merge_prep agent's attempt."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_lifecycle import HEAD, OLD, facts, pr, review

from relay_engine.core.lifecycle import Action, JobState, decide
from relay_engine.core.merge_prep import (
    MAX_PREPARATIONS,
    CheckRun,
    judge_checks,
    parse_record,
    record_json,
)
from relay_engine.core.outcomes import Outcome, OutcomeKind

CHECKED = {"merge_checks": True}


@pytest.mark.parametrize(
    ("case", "job", "changes", "action", "job_to"),
    [
        ("checks, never prepared: prepare before the review",
         JobState.REVIEWING, {**CHECKED, "review": None}, Action.PREPARE, JobState.ACTIVE),
        ("checks, prepared at this head: review it",
         JobState.REVIEWING, {**CHECKED, "review": None, "prepared_head": HEAD}, Action.REVIEW, None),
        ("no checks: review at once, as before",
         JobState.REVIEWING, {"review": None}, Action.REVIEW, None),
        ("ready, prepared at an older head: prepare again",
         JobState.READY, {**CHECKED, "auto_merge": True, "prepared_head": OLD},
         Action.PREPARE, JobState.ACTIVE),
        ("ready, prepared at the head: merge",
         JobState.READY, {**CHECKED, "auto_merge": True, "prepared_head": HEAD}, Action.MERGE, None),
        ("ready, conflicting, checks: the preparation merges the base in",
         JobState.READY, {**CHECKED, "auto_merge": True, "pr": pr(mergeable="CONFLICTING")},
         Action.PREPARE, JobState.ACTIVE),
        ("forced: merged unprepared",
         JobState.READY,
         {**CHECKED, "pr": pr(merge_requested=True, force_merge=True)}, Action.MERGE, None),
        ("work still running (the preparation itself): wait",
         JobState.REVIEWING, {**CHECKED, "active_work": 1}, Action.NONE, None),
    ],
)  # fmt: skip
def test_when_a_head_is_prepared(
    case: str, job: JobState, changes: dict, action: Action, job_to: JobState | None
) -> None:
    decision = decide(replace(facts(job), **changes))
    assert (decision.action, decision.job_to) == (action, job_to), case


def test_past_the_cap_the_job_waits_on_the_operator_with_the_way_out() -> None:
    capped = replace(
        facts(JobState.READY), merge_checks=True, auto_merge=True, preparations=MAX_PREPARATIONS
    )
    decision = decide(capped)
    assert decision.action is Action.NONE and decision.waits
    assert "relay merge --force" in (decision.note or "")
    assert decide(replace(capped, review=review(head_sha=OLD))).action is Action.REVIEW


DONE = Outcome(OutcomeKind.SUCCEEDED, summary="prepared")
CHECKS = ("pytest -q", "ruff check .")


def test_every_check_passing_keeps_the_success() -> None:
    runs = [CheckRun("pytest -q", 0), CheckRun("ruff check .", 0)]
    assert judge_checks(DONE, CHECKS, parse_record(record_json(runs, 0))) == DONE


@pytest.mark.parametrize(
    ("runs", "error"),
    [
        (None, "left no record"),
        ([CheckRun("pytest -q", 1, tail="1 failed, 3 passed")], "`pytest -q` failed (exit 1):\n1 failed"),
        ([CheckRun("pytest -q", 0)], "`ruff check .` did not run"),
        ([CheckRun("pytest -q", None, error="No such file")], "(could not start):\nNo such file"),
    ],
)  # fmt: skip
def test_a_failing_or_missing_check_fails_the_attempt(runs: list | None, error: str) -> None:
    judged = judge_checks(DONE, CHECKS, runs)
    assert judged.kind is OutcomeKind.FAILED and error in (judged.error or "")
    assert judged.summary == "prepared"


def test_an_attempt_that_failed_already_or_had_no_checks_is_left_alone() -> None:
    failed = Outcome(OutcomeKind.FAILED, error="the agent failed")
    assert judge_checks(failed, CHECKS, None) == failed
    assert judge_checks(DONE, (), None) == DONE
    assert parse_record("{not json") is None and parse_record(None) is None

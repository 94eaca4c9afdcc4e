"""The final review contract: what a reviewer is shown and what answer is accepted."""

from __future__ import annotations

import json

import pytest

from relay_engine.contracts.planner import PlanRejected, TaskSummary
from relay_engine.contracts.review import (
    ReviewInput,
    ReviewResult,
    fix_guidance,
    rebase_task,
    review_prompt,
    review_task,
    truncated,
    validate_review_output,
)

FINDING = {"file": "cli.py", "line": 3, "severity": "major", "text": "errors are swallowed"}


@pytest.mark.parametrize(
    "raw",
    [
        {"verdict": "approve", "summary": "fine"},
        {"verdict": "changes", "findings": [FINDING]},
        'Looked at it.\n```json\n{"verdict": "approve", "summary": "ok", "findings": []}\n```',
        json.dumps({"verdict": "changes", "summary": "s", "findings": [{"text": "no tests"}]}),
    ],
)
def test_good_answers_are_accepted(raw: object) -> None:
    assert isinstance(validate_review_output(raw), ReviewResult)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("LGTM!", "no JSON object found in the output"),
        ({"summary": "fine"}, "verdict: required field missing"),
        ({"verdict": "maybe"}, "verdict: Input should be 'approve' or 'changes'"),
        ({"verdict": "changes", "summary": "bad"}, "needs at least one finding"),
        ({"verdict": "changes", "findings": [{"file": "a.py"}]}, "findings[0].text"),
        ({"verdict": "changes", "findings": [{**FINDING, "line": -1}]}, "findings[0].line"),
    ],
)
def test_bad_answers_are_rejected_with_a_reason_for_the_retry(raw: object, reason: str) -> None:
    verdict = validate_review_output(raw)
    assert isinstance(verdict, PlanRejected)
    assert reason in verdict.reason


def parts(diff: str) -> ReviewInput:
    return ReviewInput(
        title="Add greet",
        base_branch="main",
        head_branch="relay/greet",
        head_sha="c0ffee" * 6,
        diffstat=" greet.py | 2 ++\n 1 file changed, 2 insertions(+)\n",
        diff=diff,
        round=2,
        tasks=[TaskSummary("code", "Write greet", "SUCCEEDED", result_summary="added greet()")],
    )


def test_the_prompt_shows_the_change_and_the_contract() -> None:
    prompt = review_prompt(parts("+def greet(): ...\n"), diff_limit=10_000)
    assert "round 2" in prompt and "`relay/greet`" in prompt and "into `main`" in prompt
    assert " greet.py | 2 ++" in prompt  # the diffstat keeps its alignment
    assert "+def greet(): ..." in prompt and "added greet()" in prompt
    assert '"verdict"' not in prompt  # the answer contract comes last, once, when assembled


def test_a_big_diff_is_cut_at_a_line_with_a_note() -> None:
    diff = "".join(f"+line {i}\n" for i in range(10_000))
    cut = truncated(diff, 1000)
    body, note = cut.split("\n[diff truncated")
    assert len(body) <= 1000 and body.endswith("\n")  # whole lines only
    assert f"of {len(diff):,} characters" in note
    assert truncated("+small\n", 1000) == "+small\n"
    assert "[diff truncated" in review_prompt(parts(diff), diff_limit=1000)


def test_follow_up_tasks_carry_the_findings_and_the_conflicts() -> None:
    guidance = fix_guidance("Mostly fine.", [FINDING, {"text": "add a test"}])
    assert guidance.splitlines() == [
        "The final review asked for changes: Mostly fine.",
        "- cli.py:3 [major] errors are swallowed",
        "- [minor] add a test",
    ]
    rebase = rebase_task(1, "main", "relay/greet", ["README.md"], None)
    assert rebase.kind == "rebase" and rebase.role == "implementer"
    assert "README.md" in rebase.input and rebase.sim == {
        "duration": 0.5,
        "lines": 2,
        "resolve_conflicts": "ours",
    }
    assert review_task(3, "p", None).sim == {
        "duration": 0.5,
        "lines": 2,
        "review": {},
        "review_round": 3,
    }

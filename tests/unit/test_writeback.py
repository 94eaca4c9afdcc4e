"""The notes relay writes back on a pull request: their keys, text and line comments."""

from __future__ import annotations

from relay_engine.core.writeback import (
    MAX_BODY_CHARS,
    Posted,
    assessment_note,
    failure_note,
    marked_body,
    marker,
    needs_write,
    plan_note,
    review_note,
)

FINDINGS = [
    {"file": "greet.py", "line": 3, "severity": "major", "text": "handle empty names"},
    {"file": "README.md", "line": None, "severity": "minor", "text": "mention greet"},
    {"file": "", "line": None, "severity": "nit", "text": "naming"},
]


def test_a_review_lists_every_finding_and_pins_those_with_a_line() -> None:
    note = review_note("greet", 1, "changes", "two problems", FINDINGS)
    assert note.key == "review:1" and note.kind == "review"
    assert "### relay: review 1 asks for changes" in note.body
    assert "- **major** `greet.py:3`: handle empty names" in note.body
    assert "- **minor** `README.md`: mention greet" in note.body
    assert "- **nit**: naming" in note.body
    (pinned,) = note.line_comments
    assert (pinned.path, pinned.line, pinned.body) == (
        "greet.py",
        3,
        "**major**: handle empty names",
    )


def test_the_same_subject_keeps_its_key_and_a_new_text_changes_the_digest() -> None:
    first = failure_note("j", "j/build", "Build it", 3, "exit 1", None)
    again = failure_note("j", "j/build", "Build it", 6, "exit 2", "troubleshooter gave up: flaky")
    assert first.key == again.key == "failure:j/build"
    assert first.digest() != again.digest()
    assert first.digest() == failure_note("j", "j/build", "Build it", 3, "exit 1", None).digest()
    assert "Troubleshooter: troubleshooter gave up: flaky" in again.body
    assert "failed after 6 attempts" in again.body and "relay retry j/build" in again.body


def test_plans_and_assessments_say_what_they_decided() -> None:
    plan = plan_note("j", 2, "wave-assessment", "in_progress", "half done", [("a", "do | a")])
    assert plan.key == "plan:2"
    assert "round 2 (wave-assessment)" in plan.body and "Objective: **in progress**." in plan.body
    assert "| `a` | do \\| a |" in plan.body  # a pipe in a title does not break the table
    assessed = assessment_note("j", "j/assess-wave-1", 1, "replan", "off track", ["b is wrong"])
    assert assessed.key == "assessment:j/assess-wave-1"
    assert "wave 1: replan" in assessed.body and "- b is wrong" in assessed.body


def test_a_body_carries_its_marker_and_is_cut_to_what_a_forge_takes() -> None:
    long = plan_note("j", 1, "initial", None, "x" * (MAX_BODY_CHARS + 10), [])
    body = marked_body(long)
    assert body.endswith(marker("plan:1")) and len(body) < MAX_BODY_CHARS + 200
    assert "cut short" in body


def test_a_note_is_written_when_published_and_not_already_held() -> None:
    note = plan_note("j", 1, "initial", None, "", [])
    digest = note.digest()
    assert needs_write(digest, "plan", Posted(None, None), {"plan"})
    assert not needs_write(digest, "plan", Posted("7", digest), {"plan"})
    assert needs_write(digest, "plan", Posted("7", "older"), {"plan"})
    assert not needs_write(digest, "plan", Posted(None, None), {"review"})

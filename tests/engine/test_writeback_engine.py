"""Write-back on pull requests: plans, assessments, reviews with their findings and final
failures, posted once on the ``github`` forge (the stand-in ``gh`` records every argv and
plays GitHub's REST API), edited in place, never duplicated by a retry; and the same text
in the ``local`` forge's record, shown by ``relay status JOB``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from gitrepos import GH_STANDIN_REPO, Repos, git, github_settings
from helpers import Workspace, job_toml, run_until_idle, sim
from sqlmodel import select
from test_planning_engine import plan_of
from test_pull_requests import REVIEW_FINDING, greet_job, reviewer, state, submit

from relay_engine.contracts.config import GitConfig
from relay_engine.core.writeback import (
    LineComment,
    Note,
    assessment_note,
    failure_note,
    marker,
    plan_note,
    review_note,
)
from relay_engine.git.forges import ForgeError, PullRef
from relay_engine.git.forges.github import GitHubForge
from relay_engine.ops.notes import claim_pending, record_note, record_write_failed, record_written
from relay_engine.store.schema import PullNote

ALL = ["review", "plan", "assessment", "failure"]


def on_github(state_dir: Path) -> dict[str, Any]:
    return json.loads((state_dir / "state.json").read_text())


def api_calls(state_dir: Path) -> list[list[str]]:
    lines = (state_dir / "log.jsonl").read_text().splitlines()
    return [call for call in map(json.loads, lines) if call[:1] == ["api"]]


def opened_pull(repos: Repos) -> tuple[GitHubForge, PullRef]:
    """A pull request of relay/x opened on the stand-in, and the forge that opened it."""
    git(repos.repo, "checkout", "-q", "-b", "relay/x")
    (repos.repo / "x.py").write_text("x = 1\n")
    git(repos.repo, "add", "x.py")
    git(repos.repo, "commit", "-q", "-m", "x")
    git(repos.repo, "checkout", "-q", "main")
    config = GitConfig(forge="github", remote="origin", repo=GH_STANDIN_REPO)
    forge = GitHubForge(str(repos.repo), config)
    ref = PullRef("x", "X", "body", str(repos.repo), "main", "relay/x")
    opened = forge.open(ref)
    return forge, PullRef(**{**ref.__dict__, "number": opened.number, "head_sha": opened.head_sha})


def test_each_kind_is_posted_once_and_a_second_write_edits_it_in_place(
    repos: Repos, github: Path
) -> None:
    forge, ref = opened_pull(repos)
    notes = [
        plan_note("x", 1, "initial", "in_progress", "start small", [("a", "do a")]),
        assessment_note("x", "x/assess-wave-1", 1, "continue", "on track", []),
        failure_note("x", "x/a", "do a", 3, "exit 1", "troubleshooter gave up: flaky"),
        review_note("x", 1, "changes", "one problem", [{**REVIEW_FINDING, "file": "x.py"}]),
    ]
    ids = {note.key: forge.publish(ref, note, None) for note in notes}
    posted = on_github(github)
    assert len(posted["comments"]) == 3 and len(posted["reviews"]) == 1
    (review,) = posted["reviews"]
    assert review["comments"] == [
        {"path": "x.py", "line": 1, "side": "RIGHT", "body": "**major**: handle empty names"}
    ]
    assert review["commit_id"] == ref.head_sha and str(review["id"]) == ids["review:1"]
    assert all(marker(n.key) in c["body"] for n, c in zip(notes, posted["comments"], strict=False))
    assert ["api", "-X", "POST", f"repos/{GH_STANDIN_REPO}/pulls/1/reviews"] == api_calls(github)[
        -1
    ][:4]

    updated = review_note("x", 1, "approve", "fixed now", [])
    assert forge.publish(ref, updated, ids["review:1"]) == ids["review:1"]
    failed_again = failure_note("x", "x/a", "do a", 6, "exit 2", None)
    assert forge.publish(ref, failed_again, ids["failure:x/a"]) == ids["failure:x/a"]
    posted = on_github(github)
    assert len(posted["comments"]) == 3 and len(posted["reviews"]) == 1
    assert "review 1 approves" in posted["reviews"][0]["body"]
    assert "failed after 6 attempts" in posted["comments"][2]["body"]
    edits = [c[:3] for c in api_calls(github) if c[2] in ("PUT", "PATCH")]
    assert edits == [["api", "-X", "PUT"], ["api", "-X", "PATCH"]]


def test_a_write_whose_answer_was_lost_is_found_again_not_posted_twice(
    repos: Repos, github: Path
) -> None:
    forge, ref = opened_pull(repos)
    note = plan_note("x", 1, "initial", None, "first", [])
    (github / "lose_responses").write_text("1")
    with pytest.raises(ForgeError, match="HTTP 502"):
        forge.publish(ref, note, None)  # GitHub made the comment; relay never heard its id
    comment_id = forge.publish(ref, note, None)  # the retry finds it by its marker
    (comment,) = on_github(github)["comments"]
    assert str(comment["id"]) == comment_id
    review = review_note("x", 2, "approve", "fine", [])
    (github / "lose_responses").write_text("1")
    with pytest.raises(ForgeError):
        forge.publish(ref, review, None)
    assert forge.publish(ref, review, None) == str(on_github(github)["reviews"][0]["id"])
    assert len(on_github(github)["reviews"]) == 1


def test_a_line_github_cannot_place_still_posts_the_review_without_line_comments(
    repos: Repos, github: Path
) -> None:
    forge, ref = opened_pull(repos)
    note = review_note("x", 1, "changes", "", [REVIEW_FINDING])
    nowhere = LineComment("", 1, "nowhere")  # GitHub answers 422 for it
    note = Note(note.job_id, note.key, note.kind, note.body, (nowhere,))
    forge.publish(ref, note, None)
    (review,) = on_github(github)["reviews"]
    assert review["comments"] == [] and "handle empty names" in review["body"]


def assessed_review_job(repos: Repos) -> str:
    """Planned in two waves and assessed between them; the review asks for one change."""
    first = {"id": "code", "title": "write greet", "sim": sim(write_files={"greet.py": "g\n"})}
    second = {"id": "tests", "title": "test greet", "dependencies": ["code"], "sim": sim()}
    fix = {
        "id": "fix",
        "title": "empty names",
        "sim": sim(write_files={"greet.py": "g or 'you'\n"}),
    }
    script = {
        "duration": 0.05,
        "lines": 1,
        "results_by_round": {
            "1": plan_of(first, second),
            "2": plan_of(status="satisfied"),
            "3": plan_of(fix),  # the review's findings become the next round's work
            "4": plan_of(status="satisfied"),
        },
        "assessor": {"duration": 0.05, "results_by_attempt": {"1": ASSESSED}},
        "reviewer": reviewer(changes_on_rounds=[1], findings=[REVIEW_FINDING]),
    }
    return job_toml(
        "greet",
        [],
        repo=str(repos.repo),
        title="Add greet",
        mode="autonomous",
        objective="a greet function",
        wave_gate="assess",
        auto_merge=True,
        sim=script,
    )


ASSESSED = {"decision": "continue", "summary": "wave 1 holds up", "findings": ["naming ok"]}


def notes(ws: Workspace) -> dict[str, PullNote]:
    with ws.store().read() as session:
        return {row.key: row for row in session.exec(select(PullNote))}


def test_an_engine_writes_plans_assessment_and_reviews_back_on_github_once_each(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    ws = sqlite_workspace
    ws.configure(git=github_settings(publish=ALL))
    submit(ws, assessed_review_job(repos))

    assert run_until_idle(ws.engine(), timeout=120) is True

    assert state(ws.store()) == "MERGED"
    posted = on_github(github)
    bodies = [c["body"] for c in posted["comments"]]
    assert sorted(b.splitlines()[0] for b in bodies) == [
        "### relay: assessment of wave 1: continue with the plan",
        "### relay: plan, round 1 (initial)",
        "### relay: plan, round 2 (continuation)",
        "### relay: plan, round 3 (continuation)",
        "### relay: plan, round 4 (continuation)",
    ]
    assert [r["body"].splitlines()[0] for r in posted["reviews"]] == [
        "### relay: review 1 asks for changes",
        "### relay: review 2 approves",
    ]
    assert posted["reviews"][0]["comments"][0]["path"] == "greet.py"
    rows = notes(ws)
    assert set(rows) == {
        "plan:1",
        "plan:2",
        "plan:3",
        "plan:4",
        "assessment:greet/assess-wave-1",
        "review:1",
        "review:2",
    }
    assert all(
        r.comment_id and r.posted_digest == r.digest and r.forge == "github" for r in rows.values()
    )
    creates = [c for c in api_calls(github) if c[2] == "POST"]
    assert len(creates) == 7  # one each, whatever the number of checks


def test_the_local_forge_keeps_the_same_notes_and_relay_status_shows_them(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    ws.configure(git={"remote": "origin", "check_seconds": 0.2, "publish": ALL})
    submit(ws, assessed_review_job(repos))

    assert run_until_idle(ws.engine(), timeout=120) is True

    rows = notes(ws)
    assert rows["review:1"].comment_id == "local:review:1" and rows["review:1"].forge == "local"
    shown = ws.cli("status", "greet")
    assert shown.returncode == 0, shown.stderr
    assert "review 1 asks for changes" in shown.stdout
    assert "greet.py:1" in shown.stdout and "plan, round 1 (initial)" in shown.stdout
    assert "- **major** `greet.py:1`: handle empty names" in rows["review:1"].body
    assert {row.forge for row in rows.values()} == {"local"}  # every note, on the record


def test_a_task_that_fails_for_good_leaves_its_failure_note(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    failing = {"id": "t", "title": "doomed", "max_attempts": 1, "sim": sim(exit_code=3)}
    ws.submit(job_toml("doom", [failing], troubleshoot=False))
    run_until_idle(ws.engine())
    row = notes(ws)["failure:doom/t"]
    assert "### relay: `doom/t` failed for good" in row.body
    assert "No troubleshooter looked into it." in row.body
    shown = ws.cli("status", "doom")
    assert "doom/t` failed for good" in shown.stdout
    assert row.comment_id is None  # no pull request to write it on


def test_a_failure_note_says_so_when_a_retry_succeeds(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    flaky = {"id": "t", "title": "flaky", "max_attempts": 1, "sim": sim(fail_attempts=1)}
    ws.submit(job_toml("doom", [flaky], troubleshoot=False))
    run_until_idle(ws.engine())
    assert "failed for good" in notes(ws)["failure:doom/t"].body
    retried = ws.cli("retry", "doom/t")
    assert retried.returncode == 0, retried.stderr
    running = notes(ws)["failure:doom/t"].body
    assert running.startswith("### relay: `doom/t` is being retried") and "attempt 2" in running
    assert run_until_idle(ws.engine()) is True
    row = notes(ws)["failure:doom/t"]
    assert row.body.startswith("### relay: `doom/t` succeeded after all")
    assert "it succeeded on attempt 2" in row.body
    assert "doom/t` succeeded after all" in ws.cli("status", "doom").stdout


def test_an_engine_retries_a_write_whose_answer_was_lost_without_posting_twice(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    ws = sqlite_workspace
    ws.configure(git=github_settings(publish=["review"]))
    script = {"reviewer": reviewer(changes_on_rounds=[1], findings=[REVIEW_FINDING]),
              "fixer": sim(write_files={"greet.py": "def greet(n): return n or 'you'\n"})}  # fmt: skip
    github.mkdir(parents=True, exist_ok=True)
    (github / "lose_responses").write_text("2")  # both reviews' first posts lose their answer
    submit(ws, greet_job(repos, auto_merge=True, sim=script))

    assert run_until_idle(ws.engine(), timeout=120) is True

    posted = on_github(github)
    assert [r["body"].splitlines()[0] for r in posted["reviews"]] == [
        "### relay: review 1 asks for changes",
        "### relay: review 2 approves",
    ]
    assert "comments" not in posted  # plans and the rest were not asked for
    rows = notes(ws)
    assert all(row.error is None and row.posted_digest == row.digest for row in rows.values())


def test_two_engines_never_claim_the_same_note(workspace: Workspace) -> None:
    stores = [workspace.store(), workspace.store()]
    with stores[0].write() as session:
        for number in range(1, 6):
            record_note(session, review_note("j", number, "approve", "ok", []), time.time())
    now = time.time()
    first = claim_pending(stores[0], "j", ["review"], "engine-a", now)
    second = claim_pending(stores[1], "j", ["review"], "engine-b", now)
    assert len(first) == 5 and second == []
    for item in first[:2]:
        record_written(stores[0], item, "c1", "github", now)
    record_write_failed(stores[0], first[2], "gh api POST failed", now)
    retried = claim_pending(stores[1], "j", ["review"], "engine-b", now)
    assert [p.note.key for p in retried] == [first[2].note.key]  # the other two still held
    later = claim_pending(stores[1], "j", ["review"], "engine-b", now + 3600)  # claims lapsed
    assert sorted(p.note.key for p in later) == sorted(p.note.key for p in first[2:])

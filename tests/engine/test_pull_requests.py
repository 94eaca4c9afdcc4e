"""A job's pull request end to end: real git repositories, a bare remote, real sim agents.

Each test drives the engine as a user would (job files, relay.toml, the CLI) and checks
what a user would see: the remote's base branch, the job's state, the tasks relay created.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from gitrepos import Repos, git
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    jobs,
    run_until_idle,
    running_engine,
    sim,
    task_state,
    tasks,
    wait_for,
)
from sqlmodel import select

from relay_engine.contracts.job_file import load_job_file
from relay_engine.loop import pullstep
from relay_engine.loop.pullstep import PullRequests
from relay_engine.ops.commands import Merge
from relay_engine.ops.jobs import submit_job
from relay_engine.ops.pulls import lifecycle_facts
from relay_engine.store.db import Store
from relay_engine.store.schema import Job, Plan, PullRequest, Review, Task

FAST_GIT = {"check_seconds": 0.2}
REVIEW_FINDING = {"file": "greet.py", "line": 1, "severity": "major", "text": "handle empty names"}


def submit(ws: Workspace, text: str) -> None:
    """Store a job file in-process (``relay submit`` has its own tests; it costs a start-up)."""
    path = ws.write_job(text)
    store = ws.store()
    submit_job(store, load_job_file(path), now=time.time())


def configure(ws: Workspace, remote: bool = True, **git_options: Any) -> None:
    options = {**FAST_GIT, **({"remote": "origin"} if remote else {}), **git_options}
    ws.configure(git=options)


def greet_job(repos: Repos, job_id: str = "greet", **job: Any) -> str:
    tasks_ = [
        {"id": "code", "sim": sim(write_files={"greet.py": "def greet(n): return n\n"})},
        {
            "id": "tests",
            "depends_on": ["code"],
            "sim": sim(write_files={"test_greet.py": "assert True\n"}),
        },
    ]
    return job_toml(job_id, tasks_, repo=str(repos.repo), title="Add greet", **job)


def reviewer(duration: float = 0.05, **review: Any) -> dict[str, Any]:
    return {"duration": duration, "lines": 1, "review": review}


def state(store: Store, job_id: str = "greet") -> str:
    return jobs(store)[job_id].state


def pull(store: Store, job_id: str = "greet") -> PullRequest:
    with store.read() as session:
        row = session.get(PullRequest, job_id)
    assert row is not None
    return row


def note(store: Store, job_id: str = "greet") -> str:
    with store.read() as session:
        row = session.get(PullRequest, job_id)
    return (row.note or "") if row else ""


def reviews(store: Store, job_id: str = "greet") -> list[Review]:
    with store.read() as session:
        query = select(Review).where(Review.job_id == job_id).order_by(Review.number)
        return list(session.exec(query))


def wait_state(store: Store, wanted: str, job_id: str = "greet", timeout: float = 60) -> None:
    wait_for(lambda: state(store, job_id) == wanted, timeout, what=f"{job_id} {wanted}")


def run_until_ready(ws: Workspace, repos: Repos) -> Store:
    """The greet job, approved and not merged (no auto-merge); the engine stopped."""
    submit(ws, greet_job(repos))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_state(store, "READY")
    return store


def one_check(ws: Workspace, store: Store, job_id: str = "greet") -> None:
    """One reconcile of the job, as a single forge check of a running engine would do."""
    engine = ws.engine()
    PullRequests(engine.runtime, background=False).reconcile(job_id, time.time())


def test_an_approved_job_is_merged_into_the_remote_base(workspace: Workspace, repos: Repos) -> None:
    configure(workspace)
    before = git(repos.repo, "rev-parse", "main")
    submit(workspace, greet_job(repos, auto_merge=True))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    assert state(store) == "MERGED"
    assert {"greet.py", "test_greet.py", "README.md"} <= repos.remote_files("main")
    assert pull(store).merge_commit == repos.remote_head("main")
    review = tasks(store)["greet/review-1"]
    assert review.kind == "review" and review.role == "reviewer"
    assert "greet.py" in review.input and "2 files changed" in review.input  # diff + diffstat
    kinds = [e.kind for e in events(store) if e.kind.startswith(("job.", "pr.", "review."))]
    assert kinds == [
        "job.submitted", "job.reviewing", "pr.opened", "review.queued", "review.approve", "job.ready",
        "pr.merged", "job.finished",
    ]  # fmt: skip
    # The user's own checkout was never touched: still at its commit, nothing changed.
    assert git(repos.repo, "rev-parse", "main") == before
    assert git(repos.repo, "status", "--porcelain") == ""


def test_changes_become_a_fix_task_then_a_second_review_then_the_merge(
    workspace: Workspace, repos: Repos
) -> None:
    configure(workspace)
    script = {
        "reviewer": reviewer(changes_on_rounds=[1], findings=[REVIEW_FINDING]),
        "fixer": sim(write_files={"greet.py": "def greet(n): return n or 'you'\n"}),
    }
    submit(workspace, greet_job(repos, auto_merge=True, sim=script))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True

    assert state(store) == "MERGED"
    done = tasks(store)
    assert [done[k].state for k in ("greet/review-1", "greet/fix-1", "greet/review-2")] == [
        "SUCCEEDED"
    ] * 3
    assert "greet.py:1 [major] handle empty names" in done["greet/fix-1"].input
    first, second = reviews(store)
    assert (first.verdict, second.verdict) == ("changes", "approve")
    assert first.findings == [REVIEW_FINDING] and first.head_sha != second.head_sha
    assert "or 'you'" in repos.remote_show("main", "greet.py")


@pytest.mark.slow
def test_after_max_review_rounds_the_job_waits_for_the_operator(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)
    script = {"reviewer": reviewer(changes_on_rounds=[1, 2], findings=[REVIEW_FINDING])}
    submit(ws, greet_job(repos, auto_merge=True, max_review_rounds=2, sim=script))
    store = ws.store()

    assert run_until_idle(ws.engine()) is False  # waiting is not success

    assert state(store) == "REVIEWING"
    assert [r.verdict for r in reviews(store)] == ["changes", "changes"]
    assert "max_review_rounds" in (pull(store).note or "")
    shown = ws.cli("status", "greet").stdout
    assert "PR local OPEN: relay/greet @" in shown and "review 2: changes" in shown
    assert "greet.py:1 [major] handle empty names" in shown and "waiting: " in shown
    refused = ws.cli("merge", "greet")
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = ws.cli("merge", "greet", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "is MERGED" in forced.stdout
    assert "greet.py" in repos.remote_files("main")


def test_a_fix_landing_while_the_forge_is_read_is_reviewed_at_its_own_head(
    sqlite_workspace: Workspace, repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded engine read the forge, a fix landed, and the stale head got reviewed."""
    ws = sqlite_workspace
    configure(ws)
    store = run_until_ready(ws, repos)
    with store.write() as session:  # as if review 1 had asked for changes and fix-1 runs
        job = session.get(Job, "greet")
        assert job is not None
        job.state = "ACTIVE"
        session.add(job)
        for review in session.exec(select(Review)):
            review.verdict, review.followed_up = "changes", True
            session.add(review)
    tree = git(repos.repo, "rev-parse", "relay/greet^{tree}")
    fixed = git(repos.repo, "commit-tree", tree, "-p", "relay/greet", "-m", "fix-1")

    def land_the_fix() -> None:
        git(repos.repo, "update-ref", "refs/heads/relay/greet", fixed)
        with store.write() as session:
            job = session.get(Job, "greet")
            assert job is not None
            job.state, job.head_sha = "REVIEWING", fixed
            session.add(job)

    real_forge_for = pullstep.forge_for

    def forge_landing_a_fix_mid_read(*args: Any) -> Any:
        forge = real_forge_for(*args)
        observe = forge.observe

        def observe_then_land(ref: Any) -> Any:
            seen = observe(ref)
            land_the_fix()
            return seen

        monkeypatch.setattr(forge, "observe", observe_then_land)
        return forge

    monkeypatch.setattr(pullstep, "forge_for", forge_landing_a_fix_mid_read)
    one_check(ws, store)
    assert len(reviews(store)) == 1  # nothing queued at the head read before the fix
    monkeypatch.setattr(pullstep, "forge_for", real_forge_for)
    one_check(ws, store)
    assert [r.head_sha for r in reviews(store)][1:] == [fixed]


def test_a_push_to_the_job_branch_after_approval_makes_the_review_stale(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)
    submit(ws, greet_job(repos))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_state(store, "READY")
        approved = pull(store).head_sha
        pushed = repos.commit_and_push("relay/greet", {"NOTES.md": "by hand\n"}, "notes")
        wait_for(lambda: len(reviews(store)) == 2 and state(store) == "READY", what="review 2")

    first, second = reviews(store)
    assert first.head_sha == approved and first.stale
    assert second.head_sha == pushed and second.verdict == "approve"
    assert [e.kind for e in events(store, "pr.head_moved", "review.stale")] == [
        "pr.head_moved",
        "review.stale",
    ]


def test_a_merge_done_by_a_person_moves_the_job_to_merged_within_one_check(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws, check_seconds=3600)  # only the explicit check below may see the merge
    store = run_until_ready(ws, repos)
    clone = repos.person()
    git(clone, "merge", "-q", "--no-ff", "-m", "merged by hand", "origin/relay/greet")
    git(clone, "push", "-q", "origin", "main")

    one_check(ws, store)

    assert state(store) == "MERGED"
    assert pull(store).state == "MERGED"
    (merged,) = events(store, "pr.merged")
    assert "main contains" in merged.message


def close_during_review(ws: Workspace, repos: Repos, close: Callable[[], None]) -> Store:
    """Close the pull request (``close``) while a slow review runs; wait for the job to end."""
    submit(ws, greet_job(repos, sim={"reviewer": reviewer(duration=60)}))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: task_state(store, "greet/review-1") == "RUNNING", what="review runs")
        close()
        wait_state(store, "CLOSED")
        wait_for(lambda: all(e.ended_at for e in executions(store)), what="reviewer stopped")
    assert task_state(store, "greet/review-1") == "CANCELLED"
    assert pull(store).state == "CLOSED"
    return store


@pytest.mark.slow
def test_a_deleted_job_branch_closes_the_job_and_cancels_its_work(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    configure(sqlite_workspace)

    def delete_branch() -> None:
        git(repos.person(), "push", "-q", "origin", "--delete", "relay/greet")

    store = close_during_review(sqlite_workspace, repos, delete_branch)

    assert "deleted on origin" in events(store, "pr.closed")[0].message


def test_relay_close_closes_the_pull_request_and_cancels_the_review(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)

    def relay_close() -> None:
        closed = ws.cli("close", "greet")
        assert closed.returncode == 0, closed.stderr

    close_during_review(ws, repos, relay_close)

    assert repos.remote_head("relay/greet") is not None  # closing keeps the branch


@pytest.mark.slow
def test_a_conflict_with_a_moved_base_becomes_a_rebase_task_then_the_merge(
    workspace: Workspace, repos: Repos
) -> None:
    configure(workspace)
    job = job_toml(
        "readme",
        [{"id": "edit", "sim": sim(write_files={"README.md": "from relay\n"})}],
        repo=str(repos.repo),
    )
    submit(workspace, job)
    store = workspace.store()
    engine = workspace.engine()
    with running_engine(engine):
        wait_state(store, "READY", "readme")
        repos.commit_and_push("main", {"README.md": "from a person\n"}, "edit readme")
        engine.submit(Merge(job="readme"))
        wait_state(store, "MERGED", "readme")

    rebase = tasks(store)["readme/rebase-1"]
    assert rebase.kind == "rebase" and rebase.state == "SUCCEEDED"
    assert "README.md" in rebase.input
    assert [r.verdict for r in reviews(store, "readme")] == ["approve", "approve"]
    assert repos.remote_show("main", "README.md") == "from relay"  # the agent kept its side
    log = git(repos.remote, "log", "--format=%s", "main")
    assert "edit readme" in log  # the person's commit is part of the merged base


@pytest.mark.slow
def test_without_a_remote_a_checked_out_base_is_left_to_the_user(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws, remote=False)
    before = git(repos.repo, "rev-parse", "main")
    submit(ws, greet_job(repos, auto_merge=True))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: "git merge relay/greet" in note(store), what="the hint")
        assert str(repos.repo) in (pull(store).note or "")
        assert git(repos.repo, "rev-parse", "main") == before  # not moved behind the user
        assert state(store) == "READY"
        git(repos.repo, "merge", "-q", "--no-edit", "relay/greet")
        wait_state(store, "MERGED")

    status = ws.status()["jobs"][0]
    assert status["pr"]["state"] == "MERGED" and status["review"]["verdict"] == "approve"


def test_without_a_remote_relay_merges_a_base_nobody_has_checked_out(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws, remote=False)
    git(repos.repo, "checkout", "-q", "-b", "elsewhere")
    (repos.repo / "scratch.txt").write_text("the user's own work in progress\n")
    submit(ws, greet_job(repos, auto_merge=True))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    assert state(store) == "MERGED"
    assert "greet.py" in git(repos.repo, "ls-tree", "--name-only", "main").split()
    assert git(repos.repo, "branch", "--show-current") == "elsewhere"
    assert git(repos.repo, "status", "--porcelain") == "?? scratch.txt"


def test_an_unusable_review_answer_is_retried_with_the_reason(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)
    script = {"reviewer": {**reviewer(), "results_by_attempt": {"1": "looks fine to me"}}}
    submit(ws, greet_job(repos, auto_merge=True, sim=script))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    runs = sorted(
        (e for e in executions(store) if e.task_key == "greet/review-1"), key=lambda e: e.attempt
    )
    assert [r.outcome for r in runs] == ["failed", "succeeded"]
    assert "review answer rejected" in (runs[0].error or "")
    retry_prompt = (Path(runs[1].artifact_dir or "") / "prompt.md").read_text()
    assert "review answer rejected" in retry_prompt
    assert "verdict: required field missing" in retry_prompt
    assert state(store) == "MERGED"


def test_a_review_that_keeps_failing_fails_the_job(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)
    submit(ws, greet_job(repos, sim={"reviewer": {**reviewer(), "fail_attempts": 9}}))
    store = ws.store()

    assert run_until_idle(ws.engine()) is False

    assert state(store) == "FAILED"
    assert "final review 1 failed" in (jobs(store)["greet"].error or "")
    assert pull(store).state == "OPEN"  # a person may still merge or close it


def test_a_job_whose_branch_adds_nothing_succeeds_without_a_pull_request(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)
    submit(ws, job_toml("noop", [{"id": "look", "sim": sim()}], repo=str(repos.repo)))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    assert state(store, "noop") == "SUCCEEDED"
    with store.read() as session:
        assert session.get(PullRequest, "noop") is None
    assert repos.remote_head("relay/noop") is None


def test_an_autonomous_job_turns_review_findings_into_planner_guidance(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    configure(ws)

    def plan(task_id: str, content: str) -> dict[str, Any]:
        task = {"id": task_id, "sim": sim(write_files={"greet.py": content})}
        return {"objective_status": "in_progress", "next_tasks": [task]}

    done = {"objective_status": "satisfied", "assessment": "done"}
    script = {
        "duration": 0.05,
        "lines": 1,
        "results_by_round": {
            "1": plan("code", "v1\n"),
            "2": done,
            "3": plan("fix", "v2\n"),
            "4": done,
        },
        "reviewer": reviewer(changes_on_rounds=[1], findings=[REVIEW_FINDING]),
    }
    job = {"id": "auto", "objective": "greet", "mode": "autonomous", "repo": str(repos.repo)}
    submit(ws, tomli_w.dumps({"job": {**job, "auto_merge": True, "sim": script}}))
    store = ws.store()

    assert run_until_idle(ws.engine(), timeout=90) is True

    assert state(store, "auto") == "MERGED"
    with store.read() as session:
        rounds = list(session.exec(select(Plan).where(Plan.job_id == "auto").order_by(Plan.round)))
    assert rounds[2].trigger == "continuation"
    assert "handle empty names" in (rounds[2].guidance or "")
    assert repos.remote_show("main", "greet.py") == "v2"


def test_a_finished_reviews_verdict_is_stored_from_the_row_its_facts_came_from(
    workspace: Workspace,
) -> None:
    """Facts and the stored verdict come from one read of the review task: on PostgreSQL a
    second read in the same transaction may see a later commit (a fix once started from a
    verdict that was not stored yet, without its findings)."""
    store = workspace.store()
    answer = {"verdict": "changes", "summary": "no", "findings": [REVIEW_FINDING]}
    with store.write() as session:
        session.add(Job(id="j", state="REVIEWING", job_branch="relay/j", repo_path="/r"))
        session.add(Task(key="j/review-1", job_id="j", task_id="review-1", kind="review",
                         state="SUCCEEDED", result=answer))  # fmt: skip
        session.add(Review(job_id="j", number=1, task_key="j/review-1", head_sha="h"))
    with store.write() as session:
        job = session.get(Job, "j")
        assert job is not None
        facts = lifecycle_facts(session, job, None, False, None, record_at=1.0)
    assert facts.review is not None and facts.review.verdict == "changes"
    (stored,) = reviews(store, "j")
    assert (stored.verdict, stored.summary, stored.findings) == ("changes", "no", [REVIEW_FINDING])

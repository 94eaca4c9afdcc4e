"""Worktrees per task against real git repositories made in temp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepos import git
from helpers import init_repo

from relay_engine.git.worktrees import (
    WorkspaceError,
    job_branch,
    merge_task,
    open_repo,
    prepare_task_worktree,
    prune_task,
)


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def test_task_changes_are_committed_and_merged_into_the_job_branch(
    repo_dir: Path, tmp_path: Path
) -> None:
    repo = open_repo(repo_dir)
    assert repo is not None
    root = tmp_path / "worktrees"
    tree = prepare_task_worktree(repo, root, "job", "a", "main")
    (tree / "a.txt").write_text("from task a\n")
    result = merge_task(repo, root, "job", "a", "add a")
    assert result.merged and "a.txt" in result.diffstat
    assert "a.txt" in git(repo_dir, "ls-tree", "--name-only", job_branch("job"))
    assert "a.txt" not in git(repo_dir, "ls-tree", "--name-only", "main")
    prune_task(repo, root, "job", "a")
    assert not tree.exists()


def test_a_later_task_sees_the_merged_work_of_earlier_ones(repo_dir: Path, tmp_path: Path) -> None:
    repo = open_repo(repo_dir)
    assert repo is not None
    root = tmp_path / "worktrees"
    first = prepare_task_worktree(repo, root, "job", "a", "main")
    (first / "a.txt").write_text("a\n")
    merge_task(repo, root, "job", "a", "a")
    second = prepare_task_worktree(repo, root, "job", "b", "main")
    assert (second / "a.txt").read_text() == "a\n"


def test_a_conflict_names_the_paths_and_merges_nothing(repo_dir: Path, tmp_path: Path) -> None:
    repo = open_repo(repo_dir)
    assert repo is not None
    root = tmp_path / "worktrees"
    left = prepare_task_worktree(repo, root, "job", "left", "main")
    right = prepare_task_worktree(repo, root, "job", "right", "main")
    (left / "README.md").write_text("left\n")
    (right / "README.md").write_text("right\n")
    assert merge_task(repo, root, "job", "left", "left").merged
    result = merge_task(repo, root, "job", "right", "right")
    assert not result.merged
    assert result.conflicts == ("README.md",)
    assert "left" in git(repo_dir, "show", f"{job_branch('job')}:README.md")


def test_a_missing_base_branch_is_a_clear_error(repo_dir: Path, tmp_path: Path) -> None:
    repo = open_repo(repo_dir)
    assert repo is not None
    with pytest.raises(WorkspaceError, match="base branch 'develop' does not exist"):
        prepare_task_worktree(repo, tmp_path / "w", "job", "a", "develop")


def test_a_directory_that_is_not_a_repository_has_no_worktrees(tmp_path: Path) -> None:
    assert open_repo(tmp_path) is None
    assert open_repo(None) is None


JOB_WITH_REPO = """
[job]
id = "gitjob"
repo = "repo"

[[tasks]]
id = "a"
sim = { duration = 0.05, lines = 1, write_files = { "a.txt" = "A" } }

[[tasks]]
id = "b"
depends_on = ["a"]
sim = { duration = 0.05, lines = 1, write_files = { "b.txt" = "B" } }

[[tasks]]
id = "clash"
depends_on = ["a"]
priority = "P0"
max_attempts = 1
sim = { duration = 0.3, lines = 1, write_files = { "README.md" = "clash" } }

[[tasks]]
id = "readme"
depends_on = ["a"]
priority = "P0"
max_attempts = 1
sim = { duration = 0.3, lines = 1, write_files = { "README.md" = "readme" } }
"""


def test_the_engine_runs_each_task_in_its_own_worktree_and_merges_it(
    repo_dir: Path, tmp_path: Path
) -> None:
    from sqlmodel import select

    from relay_engine.contracts.job_file import parse_job_text
    from relay_engine.loop.engine import Engine
    from relay_engine.ops.jobs import submit_job
    from relay_engine.store.schema import Task

    (tmp_path / "relay.toml").write_text(
        "[engine]\ntick_seconds = 0.05\nmax_concurrent_agents = 2\n"
        '[[agents]]\nid = "sim"\nprovider = "sim"\nroles = ["implementer"]\n'
    )
    engine = Engine(tmp_path)
    spec = parse_job_text(JOB_WITH_REPO, tmp_path / "job.toml")
    spec = type(spec)(spec.job.model_copy(update={"repo": str(repo_dir)}), spec.tasks, spec.source)
    submit_job(engine.store, spec, now=0.0)
    engine.run(until_idle=True)
    with engine.store.read() as session:
        tasks = {t.task_id: t for t in session.exec(select(Task))}
    assert tasks["b"].state == "SUCCEEDED" and "b.txt" in (tasks["b"].diffstat or "")
    files = git(repo_dir, "ls-tree", "--name-only", "relay/gitjob").split()
    assert {"a.txt", "b.txt", "README.md"} <= set(files)
    loser = [t for t in (tasks["clash"], tasks["readme"]) if t.state == "FAILED"]
    assert len(loser) == 1 and "merge conflict" in (loser[0].error or "")
    assert "README.md" in (loser[0].error or "")
    assert git(repo_dir, "status", "--porcelain") == ""  # the operator's checkout is untouched

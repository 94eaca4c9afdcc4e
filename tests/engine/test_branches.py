"""Git on whole branches, the local forge, and the worktrees of review and rebase tasks,
all on real repositories in temp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepos import Repos, git

from relay_engine.contracts.config import GitConfig
from relay_engine.core.states import PullState
from relay_engine.git import branches
from relay_engine.git.forges import ForgeError, MergeKind, PullRef
from relay_engine.git.forges.local import LocalForge
from relay_engine.git.worktrees import (
    WorkspaceError,
    Worktrees,
    ensure_job_branch,
    merge_task,
    open_repo,
    prepare_task_worktree,
    rebase_ref,
)


def branch_with(repos: Repos, branch: str, files: dict[str, str], start: str = "main") -> str:
    """A commit on ``branch`` made in a linked worktree, leaving the user's checkout alone."""
    tree = repos.root / f"wt-{branch.replace('/', '-')}"
    git(repos.repo, "worktree", "add", "-q", "-b", branch, str(tree), start)
    for name, content in files.items():
        (tree / name).write_text(content)
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", f"{branch} work")
    git(repos.repo, "worktree", "remove", str(tree))
    return git(repos.repo, "rev-parse", branch)


def ref(head_sha: str | None = None, job: str = "j") -> PullRef:
    return PullRef(job, "Job", "body", "", "main", f"relay/{job}", head_sha=head_sha)


def test_a_merge_commit_is_built_without_touching_any_working_tree(repos: Repos) -> None:
    repo = open_repo(repos.repo)
    assert repo is not None
    base = git(repos.repo, "rev-parse", "main")
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    (repos.repo / "README.md").write_text("the user's unsaved edit\n")

    made = branches.merge_commit(repo, base, head, "relay: merge")

    assert isinstance(made, str)
    assert git(repos.repo, "rev-parse", f"{made}^1", f"{made}^2").split() == [base, head]
    assert "a.txt" in git(repos.repo, "ls-tree", "--name-only", made).split()
    assert git(repos.repo, "rev-parse", "main") == base  # no ref moved
    assert git(repos.repo, "status", "--porcelain") == "M README.md"  # the edit is intact
    assert branches.contains(repo, made, head) and not branches.contains(repo, base, head)


def test_a_conflicting_merge_names_the_paths(repos: Repos) -> None:
    repo = open_repo(repos.repo)
    assert repo is not None
    head = branch_with(repos, "relay/j", {"README.md": "theirs\n", "b.txt": "B\n"})
    other = branch_with(repos, "other", {"README.md": "ours\n"})
    made = branches.merge_commit(repo, other, head, "m")
    assert isinstance(made, branches.MergePreview) and made.conflicts == ("README.md",)


def test_where_a_branch_is_checked_out(repos: Repos) -> None:
    repo = open_repo(repos.repo)
    assert repo is not None
    branch_with(repos, "relay/j", {"a.txt": "A\n"})
    assert branches.checked_out_at(repo, "main") == repos.repo
    assert branches.checked_out_at(repo, "relay/j") is None
    linked = repos.root / "linked"
    git(repos.repo, "worktree", "add", "-q", str(linked), "relay/j")
    assert branches.checked_out_at(repo, "relay/j") == linked


def test_the_local_forge_leaves_a_checked_out_base_to_the_user(repos: Repos) -> None:
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    forge = LocalForge(str(repos.repo), GitConfig())
    before = git(repos.repo, "rev-parse", "main")

    attempt = forge.merge(ref(head), head)

    assert attempt.kind is MergeKind.WAITING
    assert attempt.detail == f"ready to merge: run `git merge relay/j` in {repos.repo}"
    assert git(repos.repo, "rev-parse", "main") == before
    git(repos.repo, "merge", "-q", "--no-edit", "relay/j")
    assert forge.observe(ref(head)).state is PullState.MERGED


def test_the_local_forge_moves_a_base_nobody_has_checked_out(repos: Repos) -> None:
    git(repos.repo, "checkout", "-q", "-b", "mine")
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    forge = LocalForge(str(repos.repo), GitConfig())

    attempt = forge.merge(ref(head), head)

    assert attempt.kind is MergeKind.MERGED
    assert git(repos.repo, "rev-parse", "main") == attempt.commit
    assert git(repos.repo, "branch", "--show-current") == "mine"
    assert not (repos.repo / "a.txt").exists()  # the user's checkout did not change


def test_observing_the_local_forge(repos: Repos) -> None:
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    forge = LocalForge(str(repos.repo), GitConfig())
    seen = forge.observe(ref(head))
    assert (seen.state, seen.head_sha, seen.mergeable) == (PullState.OPEN, head, "MERGEABLE")
    git(repos.repo, "commit", "-q", "--allow-empty", "-m", "base moves")
    (repos.repo / "a.txt").write_text("clash\n")
    git(repos.repo, "add", "-A")
    git(repos.repo, "commit", "-q", "-m", "clash")
    assert forge.observe(ref(head)).mergeable == "CONFLICTING"
    git(repos.repo, "branch", "-D", "relay/j")
    gone = forge.observe(ref(head))
    assert gone.state is PullState.CLOSED and "branch relay/j deleted" in gone.why


def test_with_a_remote_a_persons_push_to_the_job_branch_is_taken(repos: Repos) -> None:
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    forge = LocalForge(str(repos.repo), GitConfig(remote="origin"))
    assert forge.open(ref()).head_sha == head
    assert repos.remote_head("relay/j") == head
    pushed = repos.commit_and_push("relay/j", {"b.txt": "B\n"}, "by hand")

    seen = forge.observe(ref(head))

    assert seen.head_sha == pushed
    assert git(repos.repo, "rev-parse", "relay/j") == pushed


def test_with_a_remote_a_diverged_job_branch_is_an_error_not_a_force_push(repos: Repos) -> None:
    head = branch_with(repos, "relay/j", {"a.txt": "A\n"})
    forge = LocalForge(str(repos.repo), GitConfig(remote="origin"))
    forge.open(ref())
    repos.commit_and_push("relay/j", {"b.txt": "B\n"}, "theirs")
    branch_with(repos, "tmp", {"c.txt": "C\n"}, start="relay/j")
    git(repos.repo, "branch", "-f", "relay/j", "tmp")

    with pytest.raises(ForgeError, match="relay/j has diverged from origin/relay/j"):
        forge.observe(ref(head))


def test_opening_a_branch_the_base_already_holds_opens_nothing(repos: Repos) -> None:
    git(repos.repo, "branch", "relay/j", "main")
    forge = LocalForge(str(repos.repo), GitConfig(remote="origin"))
    assert forge.open(ref()).head_sha is None
    assert repos.remote_head("relay/j") is None


def test_a_rebase_worktree_starts_the_merge_and_refuses_unresolved_conflicts(
    repos: Repos, tmp_path: Path
) -> None:
    repo = open_repo(repos.repo)
    assert repo is not None
    root = tmp_path / "worktrees"
    ensure_job_branch(repo, "j", "main")
    tree = prepare_task_worktree(repo, root, "j", "edit", "main")
    (tree / "README.md").write_text("job side\n")
    assert merge_task(repo, root, "j", "edit", "edit").merged
    base = branch_with(repos, "moved", {"README.md": "base side\n"})
    branches.set_ref(repo, rebase_ref("j"), base)
    worktrees = Worktrees(tmp_path)
    worktrees.root = root

    tree = worktrees.cwd_for(str(repos.repo), "j", "rebase-1", "main", kind="rebase")
    assert "<<<<<<< " in (tree / "README.md").read_text()
    with pytest.raises(WorkspaceError, match=r"conflicts left unresolved in: README\.md"):
        worktrees.finish(str(repos.repo), "j", "rebase-1", "r", succeeded=True, kind="rebase")

    tree = worktrees.cwd_for(str(repos.repo), "j", "rebase-2", "main", kind="rebase")
    git(tree, "checkout", "--ours", "README.md")
    merged = worktrees.finish(str(repos.repo), "j", "rebase-2", "r", succeeded=True, kind="rebase")
    assert merged is not None and merged.merged
    assert branches.contains(repo, "relay/j", base)
    assert git(repos.repo, "show", "relay/j:README.md") == "job side"


def test_a_reviewers_edits_are_never_merged(repos: Repos, tmp_path: Path) -> None:
    worktrees = Worktrees(tmp_path)
    repo = open_repo(repos.repo)
    assert repo is not None
    ensure_job_branch(repo, "j", "main")
    before = git(repos.repo, "rev-parse", "relay/j")
    tree = worktrees.cwd_for(str(repos.repo), "j", "review-1", "main", kind="review")
    (tree / "README.md").write_text("a reviewer should not write\n")

    assert (
        worktrees.finish(str(repos.repo), "j", "review-1", "r", succeeded=True, kind="review")
        is None
    )
    assert git(repos.repo, "rev-parse", "relay/j") == before

"""Git on whole branches: heads, containment, merges without a working tree, remotes.

A job's pull request is merged by building the merge commit from object ids alone
(``git merge-tree --write-tree``, git 2.38 or later, then ``commit-tree``) and moving the
base ref with a compare-and-swap ``update-ref`` or a non-forced push. No working tree is
checked out or changed, so a user's checkout of the base branch is never touched behind
their back; when the base is checked out somewhere, relay does not move it at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from git import Repo

from relay_engine.git.worktrees import RELAY_IDENTITY, WorkspaceError, git_lock, run_git


@dataclass(frozen=True)
class MergePreview:
    """What merging ``head`` into ``base`` would give: a tree, or the conflicting paths."""

    tree: str
    conflicts: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.conflicts


def _run(repo: Repo, *args: str) -> tuple[int, str, str]:
    """``git args`` with its exit status; only a failure to run git at all raises."""
    status, out, err = repo.git.execute(
        ["git", *RELAY_IDENTITY, *args], with_extended_output=True, with_exceptions=False
    )
    return int(status), str(out), str(err)


def ref_sha(repo: Repo, ref: str) -> str | None:
    """The commit ``ref`` names, or None when it does not exist."""
    status, out, _ = _run(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
    return out.strip() if status == 0 and out.strip() else None


def branch_head(repo: Repo, branch: str) -> str | None:
    return ref_sha(repo, f"refs/heads/{branch}")


def contains(repo: Repo, container: str, commit: str) -> bool:
    """Whether ``commit`` is reachable from ``container`` (e.g. the base holds the head)."""
    status, _, err = _run(repo, "merge-base", "--is-ancestor", commit, container)
    if status not in (0, 1):
        raise WorkspaceError(f"{repo.working_dir}: cannot compare {commit} with {container}: {err}")
    return status == 0


def preview_merge(repo: Repo, base: str, head: str) -> MergePreview:
    status, out, err = _run(
        repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head
    )
    lines = [line for line in out.splitlines() if line.strip()]
    if status not in (0, 1) or not lines:
        raise WorkspaceError(f"{repo.working_dir}: git merge-tree {base} {head} failed: {err}")
    return MergePreview(tree=lines[0], conflicts=tuple(dict.fromkeys(lines[1:])))


def merge_commit(repo: Repo, base_sha: str, head_sha: str, message: str) -> MergePreview | str:
    """The merge commit of ``head_sha`` into ``base_sha`` (no ref moves), or the conflicts."""
    preview = preview_merge(repo, base_sha, head_sha)
    if not preview.clean:
        return preview
    return run_git(
        repo, "commit-tree", preview.tree, "-p", base_sha, "-p", head_sha, "-m", message
    ).strip()


def checked_out_at(repo: Repo, branch: str) -> Path | None:
    """The working tree that has ``branch`` checked out, if any."""
    listing = run_git(repo, "worktree", "list", "--porcelain")
    path: str | None = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line == f"branch refs/heads/{branch}" and path is not None:
            return Path(path)
    return None


def move_ref(repo: Repo, ref: str, new: str, old: str | None) -> bool:
    """Point ``ref`` at ``new`` only if it still is ``old`` (None: only if it is missing)."""
    status, _, _ = _run(repo, "update-ref", ref, new, old or "0" * 40)
    return status == 0


def remote_heads(repo: Repo, remote: str, branches: list[str]) -> dict[str, str]:
    """branch -> sha for those of ``branches`` the remote has (one round trip)."""
    refs = [f"refs/heads/{b}" for b in branches]
    listing = run_git(repo, "ls-remote", remote, *refs)
    heads: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/heads/"):
            heads[ref.removeprefix("refs/heads/")] = sha
    return heads


def tracking_ref(remote: str, branch: str) -> str:
    """Where relay keeps its copy of a remote branch: its own namespace, not ``origin/*``."""
    return f"refs/relay/remotes/{remote}/{branch}"


def fetch(repo: Repo, remote: str, branches: list[str]) -> None:
    """Copy the remote's ``branches`` into :func:`tracking_ref` (forced: remotes may rewind)."""
    if branches:
        specs = [f"+refs/heads/{b}:{tracking_ref(remote, b)}" for b in branches]
        run_git(repo, "fetch", "--quiet", "--no-tags", remote, *specs)


def push(repo: Repo, remote: str, commit: str, branch: str) -> str | None:
    """Push ``commit`` to the remote's ``branch``, never forced; the refusal text, or None."""
    status, _, err = _run(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}")
    return None if status == 0 else (err.strip() or f"git push {remote} failed")


def advance_branch(repo: Repo, branch: str, worktree: Path | None, new: str, old: str) -> bool:
    """Fast-forward ``branch`` to ``new``; through its worktree when it has one (kept in sync)."""
    with git_lock(repo):
        if worktree is not None and (worktree / ".git").exists():
            status, _, _ = _run(Repo(worktree), "merge", "--ff-only", "-q", new)
            return status == 0
        return move_ref(repo, f"refs/heads/{branch}", new, old)


def set_ref(repo: Repo, ref: str, new: str) -> None:
    run_git(repo, "update-ref", ref, new)

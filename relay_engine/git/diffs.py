"""What a task or job changed, read from git with GitPython.

The console shows these (from a worker, never its UI thread); a troubleshooter reads the
diff a failed task left behind.

A task works on ``relay-tasks/<job>/<task>``, cut from the job branch when it started. Its
diff is that branch against the commit it was cut from: the branch's reflog remembers it
(``worktree add -B`` logs "Created from" / "Reset to"), which stays right after the task was
merged into the job branch (where a merge-base would already be the task's own head).
"""

from __future__ import annotations

from dataclasses import dataclass

from git import GitCommandError, Repo

from relay_engine.git.worktrees import job_branch, open_repo, task_branch

DIFF_CHARS = 400_000
"""A diff longer than this is cut (and says so): highlighting megabytes would stall."""


@dataclass(frozen=True)
class Diff:
    """A diff to show, or ``missing`` saying why there is none."""

    branch: str = ""
    base: str = ""
    text: str = ""
    stat: str = ""
    missing: str = ""
    truncated: bool = False


def _cut_point(repo: Repo, branch: str) -> str | None:
    """The commit ``branch`` was last (re)created from, per its reflog."""
    try:
        log: str = repo.git.reflog("show", "--format=%H %gs", f"refs/heads/{branch}", "--")
    except GitCommandError:
        return None
    for line in log.splitlines():  # newest first
        sha, _, subject = line.partition(" ")
        if subject.startswith(("branch: Created from", "branch: Reset to")):
            return sha
    return None


def revision_diff(repo: Repo, *revisions: str) -> tuple[str, str, bool]:
    """(text, stat, truncated) of ``git diff revisions``; the final review reads it too."""
    text = repo.git.diff(*revisions, "--no-color", "--no-ext-diff")
    stat = repo.git.diff(*revisions, "--stat", "--no-color")
    truncated = len(text) > DIFF_CHARS
    return (text[:DIFF_CHARS] if truncated else text), stat, truncated


def task_diff(repo_path: str | None, job_id: str, task_id: str) -> Diff:
    repo = open_repo(repo_path)
    if repo is None:
        return Diff(missing="This job's repo is not a git repository: tasks run without branches.")
    branch = task_branch(job_id, task_id)
    if not any(head.name == branch for head in repo.heads):
        return Diff(branch=branch, missing=f"No branch {branch} yet: the task has not run.")
    base = _cut_point(repo, branch)
    if base is None:
        try:
            base = repo.git.merge_base(job_branch(job_id), branch)
        except GitCommandError:
            return Diff(branch=branch, missing=f"Cannot tell where {branch} was cut from.")
    text, stat, truncated = revision_diff(repo, base, branch)
    return Diff(branch=branch, base=base[:10], text=text, stat=stat, truncated=truncated)


def job_diff(repo_path: str | None, job_id: str, base_branch: str) -> Diff:
    """The job branch against its base branch (what its pull request would show)."""
    repo = open_repo(repo_path)
    if repo is None:
        return Diff(missing="This job's repo is not a git repository.")
    branch = job_branch(job_id)
    names = {head.name for head in repo.heads}
    if branch not in names or base_branch not in names:
        return Diff(branch=branch, missing=f"No branch {branch} yet: no task has run.")
    text, stat, truncated = revision_diff(repo, f"{base_branch}...{branch}")
    return Diff(branch=branch, base=base_branch, text=text, stat=stat, truncated=truncated)

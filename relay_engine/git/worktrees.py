"""Git worktrees: each task works on its own branch, merged into the job branch when done.

A job works on ``relay/<job>`` cut from its base branch; each task runs in
``.relay/worktrees/<job>/<task>`` on ``relay-tasks/<job>/<task>``, cut from the job branch
as it stands when the task starts (so it sees its dependencies' merged work). Merges
happen in a worktree of the job branch, never in the operator's own checkout, and are
serialised per repository.
"""

from __future__ import annotations

import shutil
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from git import GitCommandError, InvalidGitRepositoryError, NoSuchPathError, Repo

RELAY_IDENTITY = ("-c", "user.name=relay", "-c", "user.email=relay@localhost")
PLANNING_TREE = "_plan"  # .relay/worktrees/<job>/_plan: the job branch, for its planner
UNMERGED_KINDS = frozenset({"review", "assess", "troubleshoot"})  # they judge, not change
BASE_MERGING_KINDS = frozenset({"rebase", "merge_prep"})
"""Tasks whose worktree starts with the moved base being merged in, conflicts left in place."""
_repo_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


class WorkspaceError(RuntimeError):
    """A git operation failed; the message names the repository and the step."""


@dataclass(frozen=True)
class MergeResult:
    merged: bool
    commit: str | None
    diffstat: str
    conflicts: tuple[str, ...] = ()
    previous: str | None = None  # the job branch's head before this merge


def job_branch(job_id: str) -> str:
    return f"relay/{job_id}"


def task_branch(job_id: str, task_id: str) -> str:
    # Not relay/<job>/<task>: git cannot hold a ref and a ref "below" it at once.
    return f"relay-tasks/{job_id}/{task_id}"


def rebase_ref(job_id: str) -> str:
    """The base commit a job's ``rebase`` task must absorb, set when the conflict is found."""
    return f"refs/relay/rebase/{job_id}"


def open_repo(path: str | Path | None) -> Repo | None:
    """The git repository at ``path``, or None when it is not one."""
    if not path:
        return None
    try:
        return Repo(path)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return None


def shared_directory(repo_path: str | None) -> str | None:
    """The directory a job's tasks all work in when its repo is not a git repository (no
    worktrees to keep them apart): they take turns in it. None for a git repository, and
    for jobs without a repository (they run in scratch space and touch nothing shared)."""
    if not repo_path or not (path := Path(repo_path)).is_dir():
        return None
    # Dispatch asks on every pass: a few stats, where opening the repository would read it.
    bare = (path / "HEAD").is_file() and (path / "objects").is_dir()
    if (path / ".git").exists() or bare:
        return None
    return str(path.resolve())


def git_lock(repo: Repo) -> threading.Lock:
    return _repo_locks[str(Path(repo.git_dir).resolve())]


def run_git(repo: Repo, *args: str) -> str:
    try:
        return repo.git.execute(["git", *RELAY_IDENTITY, *args])
    except GitCommandError as error:
        raise WorkspaceError(
            f"{repo.working_dir}: git {' '.join(args)} failed: {error.stderr.strip()}"
        ) from error


def _has_branch(repo: Repo, name: str) -> bool:
    return any(head.name == name for head in repo.heads)


def ensure_job_branch(repo: Repo, job_id: str, base_branch: str) -> str:
    branch = job_branch(job_id)
    if not _has_branch(repo, branch):
        if not _has_branch(repo, base_branch):
            raise WorkspaceError(f"{repo.working_dir}: base branch {base_branch!r} does not exist")
        run_git(repo, "branch", branch, base_branch)
    return branch


def _job_worktree(repo: Repo, root: Path, job_id: str) -> Path:
    path = root / job_id / "_job"
    if not (path / ".git").exists():
        _remove_worktree(repo, path)
        run_git(repo, "worktree", "add", str(path), job_branch(job_id))
    return path


def prepare_task_worktree(
    repo: Repo,
    root: Path,
    job_id: str,
    task_id: str,
    base_branch: str,
    kind: str = "work",
    *,
    keep_work: bool = False,
) -> Path:
    """A fresh worktree for the task on its own branch, cut from the job branch now.

    A ``rebase`` or ``merge_prep`` task's worktree also starts merging the moved base in, leaving the
    conflicts in place for the agent to resolve; relay commits the merge when it is done.
    With ``keep_work`` (a task an operator took over and handed back to run on) the task's
    branch is kept as it is, with what was done on it.
    """
    with git_lock(repo):
        ensure_job_branch(repo, job_id, base_branch)
        path = root / job_id / task_id
        branch = task_branch(job_id, task_id)
        if keep_work and _has_branch(repo, branch):
            _add_on_branch(repo, path, branch)
            return path
        _remove_worktree(repo, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        run_git(repo, "worktree", "add", "-B", branch, str(path), job_branch(job_id))
        if kind in BASE_MERGING_KINDS:
            _start_base_merge(Repo(path), job_id, base_branch)
        return path


def _add_on_branch(repo: Repo, path: Path, branch: str) -> None:
    """The task's worktree on its existing branch: reused when it is still there."""
    if (path / ".git").exists():
        return
    _remove_worktree(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(repo, "worktree", "add", str(path), branch)


def take_over_tree(repo: Repo, root: Path, job_id: str, task_id: str, base_branch: str) -> Path:
    """The worktree an operator works in: the run's own (with what the agent left), or the
    task's branch checked out again, or, for a task that never ran, a fresh one."""
    path = root / job_id / task_id
    if (path / ".git").exists():
        return path
    return prepare_task_worktree(repo, root, job_id, task_id, base_branch, keep_work=True)


def _start_base_merge(tree: Repo, job_id: str, base_branch: str) -> None:
    target = rebase_ref(job_id)
    try:
        run_git(tree, "rev-parse", "--verify", "-q", target)
    except WorkspaceError:
        target = base_branch
    try:
        run_git(tree, "merge", "--no-ff", "--no-commit", "-q", target)
    except WorkspaceError:
        if not _conflicted_paths(tree):
            raise  # not a conflict: the merge could not even start


def _remove_worktree(repo: Repo, path: Path) -> None:
    if path.exists():
        try:
            run_git(repo, "worktree", "remove", "--force", str(path))
        except WorkspaceError:
            shutil.rmtree(path, ignore_errors=True)
    run_git(repo, "worktree", "prune")


def commit_task_changes(worktree: Path, message: str) -> str | None:
    """Commit what the agent left uncommitted; the new head, or None if nothing changed.

    A merge in progress (a rebase task's) is concluded even when it changes no file.
    """
    repo = Repo(worktree)
    run_git(repo, "add", "-A")
    merging = (Path(repo.git_dir) / "MERGE_HEAD").exists()
    if not merging and not repo.is_dirty(index=True, working_tree=False, untracked_files=False):
        return None
    run_git(repo, "commit", "-q", "-m", message)
    return repo.head.commit.hexsha


def unresolved_conflicts(worktree: Path, since: str) -> tuple[str, ...]:
    """Paths a rebase left with conflict markers, committed or not, among those that differ
    from ``since`` (everything is staged first: an agent need not ``git add`` its work)."""
    repo = Repo(worktree)
    run_git(repo, "add", "-A")
    marked = []
    for name in run_git(repo, "diff", "--cached", "--name-only", since).splitlines():
        path = worktree / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in text.splitlines()):
                marked.append(name)
    return tuple(marked)


def merge_task(repo: Repo, root: Path, job_id: str, task_id: str, title: str) -> MergeResult:
    """Merge the task branch into the job branch; a conflict names the paths and merges nothing."""
    worktree = root / job_id / task_id
    if worktree.exists():
        commit_task_changes(worktree, f"{task_id}: {title}")
    with git_lock(repo):
        job_tree = _job_worktree(repo, root, job_id)
        job_repo = Repo(job_tree)
        previous = job_repo.head.commit.hexsha
        branch = task_branch(job_id, task_id)
        diffstat = run_git(job_repo, "diff", "--stat", f"HEAD...{branch}")
        ahead = int(run_git(job_repo, "rev-list", "--count", f"HEAD..{branch}"))
        if not diffstat.strip() and not ahead:
            return MergeResult(merged=True, commit=job_repo.head.commit.hexsha, diffstat="")
        try:
            run_git(
                job_repo,
                "merge",
                "--no-ff",
                "-q",
                "-m",
                f"relay: merge {task_id} ({title})",
                branch,
            )
        except WorkspaceError:
            conflicts = _conflicted_paths(job_repo)
            run_git(job_repo, "merge", "--abort")
            return MergeResult(merged=False, commit=None, diffstat=diffstat, conflicts=conflicts)
        return MergeResult(
            merged=True, commit=job_repo.head.commit.hexsha, diffstat=diffstat, previous=previous
        )


def undo_merge(repo: Repo, root: Path, job_id: str, merge: MergeResult) -> bool:
    """Take a merge back out of the job branch, only if nothing was merged on top of it."""
    if not merge.previous or not merge.commit or merge.previous == merge.commit:
        return False
    with git_lock(repo):
        job_repo = Repo(_job_worktree(repo, root, job_id))
        if job_repo.head.commit.hexsha != merge.commit:
            return False
        run_git(job_repo, "reset", "-q", "--hard", merge.previous)
        return True


def _conflicted_paths(repo: Repo) -> tuple[str, ...]:
    output = run_git(repo, "diff", "--name-only", "--diff-filter=U")
    return tuple(line for line in output.splitlines() if line.strip())


def prune_task(repo: Repo, root: Path, job_id: str, task_id: str) -> None:
    """Remove a finished task's worktree (its branch stays for inspection)."""
    with git_lock(repo):
        _remove_worktree(repo, root / job_id / task_id)


def release_job_branch(repo: Repo, root: Path, job_id: str) -> None:
    """Remove relay's checkout of the job branch, so people may check it out or delete it.

    Merging a later task's work (a fix, a rebase) checks it out again.
    """
    with git_lock(repo):
        _remove_worktree(repo, root / job_id / "_job")
        _remove_worktree(repo, root / job_id / PLANNING_TREE)


class Worktrees:
    """The engine's entry point: where a task runs, and what happens to its work after."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.root = workspace / ".relay" / "worktrees"

    def cwd_for(
        self,
        repo_path: str | None,
        job_id: str,
        task_id: str,
        base_branch: str,
        kind: str = "work",
        *,
        keep_work: bool = False,
    ) -> Path:
        """A fresh worktree when the job's repo is a git repository; else the job's plain
        directory, or (a job without a repository) a folder of the task's own."""
        repo = open_repo(repo_path)
        if repo is None:
            return self.directory_of(repo_path, job_id, task_id)
        return prepare_task_worktree(
            repo, self.root, job_id, task_id, base_branch, kind, keep_work=keep_work
        )

    def take_over(self, repo_path: str | None, job_id: str, task_id: str, base_branch: str) -> Path:
        """Where an operator takes a task over (see :func:`take_over_tree`)."""
        repo = open_repo(repo_path)
        if repo is None:
            return self.directory_of(repo_path, job_id, task_id)
        with git_lock(repo):
            existing = self.root / job_id / task_id
            if (existing / ".git").exists():
                return existing
        return take_over_tree(repo, self.root, job_id, task_id, base_branch)

    def directory_of(self, repo_path: str | None, job_id: str, task_id: str | None = None) -> Path:
        """Where a job that is not in git works: its plain directory (its tasks take turns
        in it), or for a job without a repository a directory of its own,
        ``.relay/jobs/<job>/work``, with a folder per task in it (scratch space: tasks run
        side by side and none writes into another's; the planner reads them all). Never
        the workspace, where relay keeps its database: an agent there could wreck it."""
        if repo_path:
            if not Path(repo_path).is_dir():
                raise WorkspaceError(f"{repo_path}: the job's repository does not exist")
            return Path(repo_path)
        path = self.workspace / ".relay" / "jobs" / job_id / "work"
        path = path / task_id if task_id else path
        path.mkdir(parents=True, exist_ok=True)
        return path

    def planning_tree(self, repo_path: str | None, job_id: str, base_branch: str) -> Path:
        """Where a job's planner reads the code it plans for: the job branch at its head,
        checked out detached (nothing it does there is kept; the next round starts afresh,
        and the tree goes with the job branch), or the job's directory."""
        repo = open_repo(repo_path)
        if repo is None:
            return self.directory_of(repo_path, job_id)
        path = self.root / job_id / PLANNING_TREE
        with git_lock(repo):
            ensure_job_branch(repo, job_id, base_branch)
            _remove_worktree(repo, path)
            path.parent.mkdir(parents=True, exist_ok=True)
            run_git(repo, "worktree", "add", "--detach", str(path), job_branch(job_id))
        return path

    def has_tree(self, job_id: str, task_key: str | None) -> bool:
        """Whether this task has a worktree to settle (cheap: one stat, no git)."""
        if task_key is None:
            return False
        return (self.root / job_id / task_key.partition("/")[2]).exists()

    def finish(
        self,
        repo_path: str | None,
        job_id: str,
        task_id: str,
        title: str,
        *,
        succeeded: bool,
        kind: str = "work",
    ) -> MergeResult | None:
        """Merge a succeeded task's work; keep a failed task's work on its branch; prune.

        A reviewer's, assessor's or troubleshooter's edits are never merged (they judge the
        work, they do not change it), and a rebase whose conflicts are still unresolved fails instead of merging.
        """
        repo = open_repo(repo_path)
        tree = self.root / job_id / task_id
        if repo is None or not tree.exists():
            return None
        try:
            if kind in BASE_MERGING_KINDS and succeeded:
                left = unresolved_conflicts(tree, job_branch(job_id))
                if left:
                    raise WorkspaceError(f"conflicts left unresolved in: {', '.join(left)}")
            if succeeded and kind not in UNMERGED_KINDS:
                return merge_task(repo, self.root, job_id, task_id, title)
            commit_task_changes(tree, f"{task_id}: {title} (not merged)")
            return None
        finally:
            prune_task(repo, self.root, job_id, task_id)

    def undo_merge(self, repo_path: str | None, job_id: str, merge: MergeResult) -> bool:
        """A stale execution's merge comes back out (see :func:`undo_merge`)."""
        repo = open_repo(repo_path)
        return repo is not None and undo_merge(repo, self.root, job_id, merge)

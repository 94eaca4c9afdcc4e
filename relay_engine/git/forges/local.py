"""The ``local`` forge: relay's own pull request of ``relay/<job>`` into the base branch.

Without a remote, merging moves the repository's base branch only when no working tree
has it checked out; otherwise the pull request stays open with the command the user runs,
and relay notices once the base contains the head. With ``[git] remote``, the job branch
is pushed there as it moves (and a person's pushes to it are picked up), and a merge is a
non-forced push of the merge commit to the remote's base branch.
"""

from __future__ import annotations

from pathlib import Path

from git import Repo

from relay_engine.contracts.config import GitConfig
from relay_engine.core.lifecycle import CONFLICTING, MERGEABLE, Observation
from relay_engine.core.states import PullState
from relay_engine.core.writeback import Note
from relay_engine.git import branches
from relay_engine.git.diffs import revision_diff
from relay_engine.git.forges import ForgeError, MergeAttempt, MergeKind, Opened, PullRef
from relay_engine.git.worktrees import git_lock, open_repo, rebase_ref


class LocalForge:
    name = "local"

    def __init__(self, repo_path: str, config: GitConfig, worktree_root: Path | None = None):
        repo = open_repo(repo_path)
        if repo is None:
            raise ForgeError(f"{repo_path}: not a git repository")
        self.repo: Repo = repo
        self.remote = config.remote
        self.pushes = config.push and config.remote is not None
        self.worktree_root = worktree_root

    # -- the two branches --------------------------------------------------------------
    def remote_state(self, ref: PullRef) -> dict[str, str]:
        """The remote's base and job branch heads, fetched; empty without a remote."""
        if self.remote is None:
            return {}
        wanted = [ref.base_branch, ref.head_branch] if self.pushes else [ref.base_branch]
        heads = branches.remote_heads(self.repo, self.remote, wanted)
        stale = [
            name
            for name, sha in heads.items()
            if branches.ref_sha(self.repo, branches.tracking_ref(self.remote, name)) != sha
        ]
        branches.fetch(self.repo, self.remote, stale)
        return heads

    def base_sha(self, ref: PullRef, heads: dict[str, str]) -> str:
        if self.remote is not None:
            sha = heads.get(ref.base_branch)
            where = f"remote {self.remote!r}"
        else:
            sha = branches.branch_head(self.repo, ref.base_branch)
            where = str(self.repo.working_dir)
        if sha is None:
            raise ForgeError(f"{where} has no base branch {ref.base_branch!r}")
        return sha

    def sync_head(self, ref: PullRef, heads: dict[str, str]) -> str | None:
        """The job branch's head, reconciled with the remote's copy when relay pushes it."""
        local = branches.branch_head(self.repo, ref.head_branch)
        theirs = heads.get(ref.head_branch) if self.pushes else None
        if theirs is None or theirs == local:
            return local
        assert self.remote is not None
        if local is None or branches.contains(self.repo, theirs, local):
            self._advance(ref, theirs, local)  # someone pushed to the job branch
            return theirs
        if branches.contains(self.repo, local, theirs):
            self._push(ref.head_branch, local)  # relay's own new commits
            return local
        raise ForgeError(
            f"{ref.head_branch} has diverged from {self.remote}/{ref.head_branch}: "
            "merge one into the other by hand"
        )

    def _advance(self, ref: PullRef, new: str, old: str | None) -> None:
        tree = self.worktree_root / ref.job_id / "_job" if self.worktree_root else None
        if old is None:
            moved = branches.move_ref(self.repo, f"refs/heads/{ref.head_branch}", new, None)
        else:
            moved = branches.advance_branch(self.repo, ref.head_branch, tree, new, old)
        if not moved:
            raise ForgeError(f"{self.repo.working_dir}: could not move {ref.head_branch} to {new}")

    def _push(self, branch: str, commit: str) -> None:
        assert self.remote is not None
        refused = branches.push(self.repo, self.remote, commit, branch)
        if refused:
            raise ForgeError(f"push of {branch} to {self.remote} refused: {refused}")

    # -- the forge interface -----------------------------------------------------------
    def open(self, ref: PullRef) -> Opened:
        heads = self.remote_state(ref)
        base = self.base_sha(ref, heads)
        head = branches.branch_head(self.repo, ref.head_branch)
        if head is None:
            raise ForgeError(f"{self.repo.working_dir}: job branch {ref.head_branch} is missing")
        if branches.contains(self.repo, base, head):
            return Opened(head_sha=None)
        if self.pushes and ref.head_branch not in heads:
            self._push(ref.head_branch, head)
        elif self.pushes:
            head = self.sync_head(ref, heads) or head
        return Opened(head_sha=head)

    def observe(self, ref: PullRef) -> Observation:
        heads = self.remote_state(ref)
        base = self.base_sha(ref, heads)
        head = self.sync_head(ref, heads)
        for sha in dict.fromkeys(s for s in (head, ref.head_sha) if s):
            if branches.contains(self.repo, base, sha):
                why = f"{ref.base_branch} contains {sha[:12]}"
                return Observation(PullState.MERGED, head or ref.head_sha, None, why=why)
        gone = head is None or (self.pushes and ref.head_branch not in heads)
        if gone:
            where = f" on {self.remote}" if self.pushes else ""
            why = f"branch {ref.head_branch} deleted{where}"
            return Observation(PullState.CLOSED, ref.head_sha, None, why=why)
        assert head is not None
        clean = branches.preview_merge(self.repo, base, head).clean
        return Observation(PullState.OPEN, head, MERGEABLE if clean else CONFLICTING)

    def merge(self, ref: PullRef, head_sha: str) -> MergeAttempt:
        message = f"relay: merge {ref.head_branch} ({ref.title})"
        if self.remote is not None:
            base = self.base_sha(ref, self.remote_state(ref))
            made = branches.merge_commit(self.repo, base, head_sha, message)
            if isinstance(made, branches.MergePreview):
                return MergeAttempt(MergeKind.CONFLICT, conflicts=made.conflicts)
            refused = branches.push(self.repo, self.remote, made, ref.base_branch)
            if refused:
                return MergeAttempt(MergeKind.FAILED, detail=f"push to {self.remote}: {refused}")
            return MergeAttempt(MergeKind.MERGED, commit=made)
        with git_lock(self.repo):
            return self._merge_here(ref, head_sha, message)

    def _merge_here(self, ref: PullRef, head_sha: str, message: str) -> MergeAttempt:
        checkout = branches.checked_out_at(self.repo, ref.base_branch)
        if checkout is not None:
            hint = f"ready to merge: run `git merge {ref.head_branch}` in {checkout}"
            return MergeAttempt(MergeKind.WAITING, detail=hint)
        base = self.base_sha(ref, {})
        made = branches.merge_commit(self.repo, base, head_sha, message)
        if isinstance(made, branches.MergePreview):
            return MergeAttempt(MergeKind.CONFLICT, conflicts=made.conflicts)
        if not branches.move_ref(self.repo, f"refs/heads/{ref.base_branch}", made, base):
            return MergeAttempt(MergeKind.FAILED, detail=f"{ref.base_branch} moved while merging")
        return MergeAttempt(MergeKind.MERGED, commit=made)

    def close(self, ref: PullRef) -> None:
        """Relay's own record is all there is: closing changes no branch."""

    def review_material(self, ref: PullRef, head_sha: str) -> tuple[str, str]:
        base = self.base_sha(ref, self.remote_state(ref))
        text, stat, _ = revision_diff(self.repo, f"{base}...{head_sha}")
        return stat, text

    def prepare_rebase(self, ref: PullRef) -> tuple[str, ...]:
        base = self.base_sha(ref, self.remote_state(ref))
        branches.set_ref(self.repo, rebase_ref(ref.job_id), base)
        if ref.head_sha is None:
            return ()
        return branches.preview_merge(self.repo, base, ref.head_sha).conflicts

    def publish(self, ref: PullRef, note: Note, comment_id: str | None) -> str:
        """relay's own pull request keeps its notes in relay's database: the row is the
        record (``relay status JOB`` shows it), so there is nothing to send anywhere."""
        return comment_id or f"local:{note.key}"

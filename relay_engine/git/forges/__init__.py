"""Forges: where a job's pull request lives. One small interface, two implementations.

``local`` keeps the pull request as relay's own record of ``relay/<job>`` -> base (pushing
both to ``[git] remote`` when one is set); ``github`` drives GitHub through the ``gh``
CLI after pushing the job branch. The lifecycle (:mod:`relay_engine.core.lifecycle`) never
knows which one it talks to.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from relay_engine.contracts.config import GitConfig
from relay_engine.core.lifecycle import Observation
from relay_engine.core.writeback import Note


class ForgeError(RuntimeError):
    """A forge or git call failed; the message names the repository, the step and why."""


@dataclass(frozen=True)
class PullRef:
    """What a forge needs to find (or create) a job's pull request."""

    job_id: str
    title: str
    body: str
    repo_path: str
    base_branch: str
    head_branch: str
    number: int | None = None
    head_sha: str | None = None  # the head relay last saw


@dataclass(frozen=True)
class Opened:
    """A published pull request; ``head_sha`` None means the base already holds the branch."""

    head_sha: str | None
    number: int | None = None
    url: str | None = None


class MergeKind(StrEnum):
    MERGED = "merged"
    CONFLICT = "conflict"
    WAITING = "waiting"  # relay may not merge it itself: ``detail`` says what the user runs
    FAILED = "failed"


@dataclass(frozen=True)
class MergeAttempt:
    kind: MergeKind
    commit: str | None = None
    detail: str = ""
    conflicts: tuple[str, ...] = ()


class Forge(Protocol):
    name: str

    def open(self, ref: PullRef) -> Opened: ...

    def observe(self, ref: PullRef) -> Observation: ...

    def merge(self, ref: PullRef, head_sha: str) -> MergeAttempt: ...

    def close(self, ref: PullRef) -> None: ...

    def review_material(self, ref: PullRef, head_sha: str) -> tuple[str, str]:
        """(diffstat, diff) of the head against the base."""
        ...

    def prepare_rebase(self, ref: PullRef) -> tuple[str, ...]:
        """Point the job's rebase ref at the base; the paths that conflict."""
        ...

    def publish(self, ref: PullRef, note: Note, comment_id: str | None) -> str:
        """Write a note on the pull request: a new comment (or review), or an edit of
        ``comment_id``'s; the id the forge keeps it under."""
        ...


def forge_for(config: GitConfig, repo_path: str, worktree_root: Path | None = None) -> Forge:
    """The configured forge for a job's repository; ForgeError when it is not a git repo."""
    from relay_engine.git.forges.github import GitHubForge
    from relay_engine.git.forges.local import LocalForge

    if config.forge == "github":
        return GitHubForge(repo_path, config, worktree_root)
    return LocalForge(repo_path, config, worktree_root)

"""Take over and hand back, around the state change: the worktree and the resume line an
operator gets, and the merge of what they did when they hand a task back done.

The state changes themselves are operator commands (:class:`~relay_engine.ops.commands.
TakeOver`, :class:`~relay_engine.ops.commands.HandBack`); this module does the git and file
work either side of them, in the process the operator uses (the CLI or the console).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relay_engine.agents.launch import account_vars
from relay_engine.agents.takeover import TakeOverLine, interactive_argv, write_launcher
from relay_engine.contracts.config import RelayConfig
from relay_engine.git.worktrees import MergeResult, WorkspaceError, Worktrees
from relay_engine.ops import assignments
from relay_engine.ops.refusals import Refused
from relay_engine.store.db import Store
from relay_engine.store.schema import Job, Task


@dataclass(frozen=True)
class _Held:
    task: Task
    job: Job


def _read(store: Store, key: str) -> _Held:
    with store.read() as session:
        task = session.get(Task, key)
        job = session.get(Job, task.job_id) if task is not None else None
    if task is None or job is None:
        raise Refused(f"no task {key}")
    return _Held(task, job)


def resume_line(store: Store, workspace: Path, config: RelayConfig, key: str) -> TakeOverLine:
    """The task's worktree (with what its agent left there) and the line that opens the
    agent's own CLI in it, resumed from the task's provider session."""
    held = _read(store, key)
    task, job = held.task, held.job
    agent = config.agent(task.agent or task.pinned_agent or "") or next(
        (a for a in config.agents if task.role in a.roles), None
    )
    if agent is None:
        raise Refused(f"no agent in relay.toml can open {key}: it ran on {task.agent}")
    with store.read() as session:
        session_id = assignments.resumable_session(session, task, agent.id)
    try:
        tree = Worktrees(workspace).take_over(job.repo_path, job.id, task.task_id, job.base_branch)
    except WorkspaceError as error:
        raise Refused(f"cannot open the worktree of {key}: {error}") from None
    directory = workspace / ".relay" / "takeover" / job.id
    env = {**agent.env, **account_vars(workspace, agent)}  # the account's login, not yours
    return write_launcher(directory, task.task_id, tree, interactive_argv(agent, session_id), env)


def merge_handed_back(store: Store, workspace: Path, key: str) -> MergeResult | None:
    """Commit what the operator's worktree holds and merge it into the job's branch; a
    conflict is refused with its paths, and nothing changes."""
    held = _read(store, key)
    task, job = held.task, held.job
    try:
        merged = Worktrees(workspace).finish(
            job.repo_path, job.id, task.task_id, f"{task.title} (by hand)", succeeded=True
        )
    except WorkspaceError as error:
        raise Refused(f"cannot merge {key}: {error}") from None
    if merged is not None and not merged.merged:
        paths = ", ".join(merged.conflicts) or "unknown paths"
        raise Refused(f"{key} conflicts with its job's branch in: {paths}; resolve and retry")
    script = workspace / ".relay" / "takeover" / job.id / f"{task.task_id}.sh"
    script.unlink(missing_ok=True)
    return merged

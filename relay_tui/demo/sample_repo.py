"""The sample's git repository and agent output: fixed content, fixed dates, fixed hashes.

The job view shows the job branch's diffstat and the detail screen a task's diff, so the
sample state behind the snapshot tests needs a real repository. Every commit has the same
author and dates each time, so every hash (and every pixel) is the same each run.
"""

from __future__ import annotations

import json
from pathlib import Path

from git import Repo

from relay_engine.git.worktrees import job_branch, task_branch

IDENTITY = {
    "GIT_AUTHOR_NAME": "relay sample",
    "GIT_AUTHOR_EMAIL": "sample@relay.invalid",
    "GIT_COMMITTER_NAME": "relay sample",
    "GIT_COMMITTER_EMAIL": "sample@relay.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T08:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T08:00:00+00:00",
}
README = "# search service\n\nServes documents.\n"
SCHEMA_SQL = (
    "-- full-text index over documents\n"
    "CREATE TABLE doc_index (\n"
    "    doc_id INTEGER PRIMARY KEY,\n"
    "    title TEXT NOT NULL,\n"
    "    body TEXT NOT NULL\n"
    ");\n"
    "CREATE INDEX doc_index_title ON doc_index (title);\n"
)


def _commit(repo: Repo, files: dict[str, str], message: str) -> None:
    root = Path(repo.working_dir)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    repo.git.add("-A")
    repo.git.commit("-q", "-m", message)


def write_sample_repo(path: Path, job_id: str, task_id: str) -> Path:
    """``main``, the job branch cut from it, one task branch with a commit, merged back."""
    repo = Repo.init(path, initial_branch="main")
    with repo.git.custom_environment(**IDENTITY):
        _commit(repo, {"README.md": README}, "initial")
        repo.git.branch(job_branch(job_id), "main")
        repo.git.checkout("-q", "-b", task_branch(job_id, task_id), job_branch(job_id))
        readme = README + "\n## Search\n\nFull-text search over every document.\n"
        _commit(repo, {"README.md": readme, "db/schema.sql": SCHEMA_SQL}, f"{task_id}: index")
        repo.git.checkout("-q", job_branch(job_id))
        repo.git.merge(
            "--no-ff", "-q", "-m", f"relay: merge {task_id}", task_branch(job_id, task_id)
        )
        repo.git.checkout("-q", "main")
    return path


def codex_lines() -> str:
    """What Codex streams while writing docs: the detail screen parses it into items."""
    events = [
        {"type": "thread.started", "thread_id": "th_docs_1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"type": "reasoning", "text": "**Plan** the docs"}},
        {
            "type": "item.completed",
            "item": {"type": "command_execution", "command": "ls docs/", "exit_code": 0},
        },
        {
            "type": "item.completed",
            "item": {"type": "agent_message", "text": "Five sections: overview, indexing, "
            "query syntax, ranking, limits."},
        },
        {
            "type": "item.completed",
            "item": {"type": "file_change", "changes": [{"kind": "add", "path": "docs/search.md"}]},
        },
        {
            "type": "item.completed",
            "item": {"type": "command_execution", "command": "npm run lint:docs", "exit_code": 1},
        },
        {"type": "item.completed", "item": {"type": "agent_message", "text": "writing docs/"
         "search.md: section 3 of 5 (query syntax)"}},
    ]  # fmt: skip
    return "\n".join(json.dumps(event) for event in events) + "\n"

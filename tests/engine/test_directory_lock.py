"""Tasks of a job whose repo is a plain directory (no git, so no worktrees) take turns in
it; a job without a repository next to it still runs its tasks side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    occupancy_by_events,
    run_until_idle,
    sim,
)


@pytest.mark.slow
def test_tasks_sharing_a_directory_never_overlap(workspace: Workspace, tmp_path: Path) -> None:
    shared = tmp_path / "plain-dir"
    shared.mkdir()
    workspace.configure(capacity=4)
    plain = [{"id": f"p{i}", "sim": sim(0.4)} for i in range(3)]
    workspace.submit(job_toml("plain", plain, repo=str(shared)), "plain.toml")
    free = [{"id": f"f{i}", "sim": sim(0.4)} for i in range(3)]
    workspace.submit(job_toml("free", free), "free.toml")
    assert run_until_idle(workspace.engine(), timeout=60)
    store = workspace.store()
    assert [r.outcome for r in executions(store)] == ["succeeded"] * 6
    peaks = occupancy_by_events(events(store), lambda key: key.partition("/")[0])
    assert peaks["plain"] == 1  # one at a time in the shared directory
    assert peaks["free"] == 3  # nothing shared: side by side

    merge = workspace.cli("merge", "plain")
    assert merge.returncode == 1
    said = " ".join(merge.stderr.split())  # the console wraps long lines
    assert "not a git repository" in said and "never gets a pull request" in said

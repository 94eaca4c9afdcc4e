"""Tasks of a job whose repo is a plain directory (no git, so no worktrees) take turns in
it; a job in a git repository next to it still runs its tasks side by side."""

from __future__ import annotations

from pathlib import Path

from helpers import Workspace, executions, job_toml, peak_overlap, run_until_idle, sim


def test_tasks_sharing_a_directory_never_overlap(workspace: Workspace, tmp_path: Path) -> None:
    shared = tmp_path / "plain-dir"
    shared.mkdir()
    workspace.configure(capacity=4)
    plain = [{"id": f"p{i}", "sim": sim(0.4)} for i in range(3)]
    workspace.submit(job_toml("plain", plain, repo=str(shared)), "plain.toml")
    free = [{"id": f"f{i}", "sim": sim(0.4)} for i in range(3)]
    workspace.submit(job_toml("free", free), "free.toml")
    assert run_until_idle(workspace.engine(), timeout=60)
    runs = [r for r in executions(workspace.store()) if r.outcome == "succeeded"]
    assert len(runs) == 6
    peaks = peak_overlap(runs, by="job_id")
    assert peaks["plain"] == 1  # one at a time in the shared directory
    assert peaks["free"] == 3  # nothing shared: side by side

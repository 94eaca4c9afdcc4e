"""Attempts that fail before their agent runs still leave an execution and its artifacts.

A real git repository whose worktree cannot be made, a task no agent can take, a command
that cannot be started: each attempt gets an execution row with the error and a folder
holding error.txt (and prompt.md once the prompt was assembled), which `relay status`
names. Real engines, real git, real processes.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import Workspace, executions, init_repo, job_toml, run_until_idle, tasks

SIM = {"id": "sim", "provider": "sim", "roles": ["implementer"]}


def _artifacts(run: object) -> Path:
    folder = Path(getattr(run, "artifact_dir", None) or "")
    assert folder.is_dir(), f"no artifact folder for execution {getattr(run, 'id', '?')}"
    return folder


def test_a_worktree_failure_leaves_an_execution_with_artifacts(
    workspace: Workspace, tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    ws = workspace.configure(agents=[SIM])
    task = {"id": "t", "input": "Write the parser.", "max_attempts": 2}
    ws.submit(job_toml("wt", [task], repo=str(repo), troubleshoot=False))
    # A file where the task's worktree must go: git refuses to add a worktree there.
    blocker = ws.path / ".relay" / "worktrees" / "wt" / "t"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a worktree\n")
    store = ws.store()

    assert run_until_idle(ws.engine(), timeout=60) is False  # the task failed

    failed = tasks(store)["wt/t"]
    assert (failed.state, failed.attempt) == ("FAILED", 2)
    runs = sorted(executions(store), key=lambda e: e.attempt)
    assert [r.attempt for r in runs] == [1, 2]  # one execution per attempt
    for run in runs:
        assert run.outcome == "failed" and run.exit_code is None and run.pid is None
        assert run.started_at is not None and run.ended_at is not None
        assert "already exists" in (run.error or "")  # git's own words
        folder = _artifacts(run)
        error = (folder / "error.txt").read_text()
        assert f"task: wt/t (attempt {run.attempt}/2)" in error
        assert "agent: sim" in error
        assert "failed at: worktree, before the agent ran" in error
        assert "already exists" in error
        assert "Write the parser." in (folder / "prompt.md").read_text()  # assembled first
    assert failed.error is not None and "already exists" in failed.error

    shown = ws.cli("status", "wt")
    assert shown.returncode == 0, shown.stderr
    assert f"t attempt 2 failed: artifacts in {runs[1].artifact_dir}" in shown.stdout
    report = json.loads(ws.cli("status", "wt/t", "--json").stdout)
    (row,) = report["tasks"]
    assert row["last_execution"]["artifact_dir"] == runs[1].artifact_dir
    assert [r["id"] for r in row["executions"]] == [r.id for r in runs]
    listed = ws.cli("status", "wt/t").stdout
    for run in runs:
        assert f"artifacts: {run.artifact_dir}" in listed


def test_a_task_no_agent_can_take_has_an_execution_and_error_txt(workspace: Workspace) -> None:
    ws = workspace.configure(agents=[SIM])
    ws.submit(job_toml("sel", [{"id": "t", "role": "reviewer"}], troubleshoot=False))
    store = ws.store()

    assert run_until_idle(ws.engine(), timeout=60) is False

    failed = tasks(store)["sel/t"]
    assert failed.state == "FAILED"
    (run,) = executions(store)
    assert run.outcome == "failed" and run.agent is None
    assert run.error == f"cannot run: {failed.error}"
    error = (_artifacts(run) / "error.txt").read_text()
    assert "failed at: agent selection, before the agent ran" in error
    assert "agent: none" in error
    assert (failed.error or "") in error
    assert not (_artifacts(run) / "prompt.md").exists()  # no prompt was ever assembled


def test_a_command_that_cannot_start_leaves_its_prompt_and_error(
    workspace: Workspace, tmp_path: Path
) -> None:
    folder = tmp_path / "plain"  # no git: the task runs in this folder, where ./agent.sh is not
    folder.mkdir()
    broken = {"id": "cmd", "provider": "command", "command": ["./agent.sh", "{prompt}"]}
    ws = workspace.configure(agents=[broken])
    task = {"id": "t", "input": "Say hi.", "max_attempts": 1}
    ws.submit(job_toml("launch", [task], repo=str(folder), troubleshoot=False))
    store = ws.store()

    assert run_until_idle(ws.engine(), timeout=60) is False

    (run,) = executions(store)
    assert run.outcome == "failed" and "cannot start './agent.sh'" in (run.error or "")
    error = (_artifacts(run) / "error.txt").read_text()
    assert "failed at: launch, before the agent ran" in error
    assert "not an executable file" in error
    assert "Say hi." in (_artifacts(run) / "prompt.md").read_text()
    assert tasks(store)["launch/t"].state == "FAILED"

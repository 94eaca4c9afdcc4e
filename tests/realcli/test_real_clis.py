"""relay against the real agent CLIs, installed from npm at the versions package.json pins.

Run offline and logged out (each agent gets an empty HOME; codex and opencode are pointed
at a refused loopback proxy, so the test means the same on a machine with network): claude,
gemini, qwen and copilot must end `auth` and codex and opencode `unreachable` without using
a task attempt, every task must then succeed on the `command` agent, and no CLI process may
be left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clis import leftover_clis
from helpers import Workspace, executions, job_toml, jobs, run_until_idle, tasks

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # npm ci, then three CLIs
CLIS = ("claude", "codex", "gemini", "qwen", "opencode", "copilot")
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "qwen": "@qwen-code/qwen-code",
    "opencode": "opencode-ai",
    "copilot": "@github/copilot",
}
REFUSED_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port: connection refused
CODEX_UNREACHABLE_WITHIN_S = 90.0
OPENCODE_UNREACHABLE_WITHIN_S = 40.0  # it would retry for ~66 s; relay reads its log lines


def real_agent(cli: str, bin_dir: Path, home: Path) -> dict[str, Any]:
    env = {"HOME": str(home)}
    if cli in ("codex", "opencode"):
        env |= {
            "HTTPS_PROXY": REFUSED_PROXY,
            "HTTP_PROXY": REFUSED_PROXY,
            "ALL_PROXY": REFUSED_PROXY,
        }
    return {"id": f"{cli}-main", "provider": cli, "command": [str(bin_dir / cli)], "env": env}


def git_repo(path: Path) -> Path:
    path.mkdir()
    (path / "README.md").write_text("real-CLI tier\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["-c", "user.name=relay", "-c", "user.email=relay@example.invalid", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def test_real_clis_offline_and_logged_out(
    cli_bin: Path, tmp_path: Path, realcli_latest: bool
) -> None:
    versions = {
        cli: subprocess.run(
            [str(cli_bin / cli), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
        for cli in CLIS
    }
    pinned = json.loads((HERE / "package.json").read_text())["dependencies"]
    for cli, package in PACKAGES.items():
        assert realcli_latest or pinned[package] in versions[cli], (cli, versions[cli])

    home = tmp_path / "home"
    home.mkdir()
    worker = {
        "id": "worker",
        "provider": "command",
        "command": [sys.executable, "-c", "print('done by the command agent')"],
    }
    workspace = Workspace(tmp_path / "ws")
    workspace.path.mkdir()
    workspace.configure(agents=[*(real_agent(c, cli_bin, home) for c in CLIS), worker])
    repo = git_repo(tmp_path / "repo")
    job = job_toml(
        "real",
        [{"id": cli, "agent": f"{cli}-main", "max_attempts": 1, "timeout": 1800} for cli in CLIS],
        repo=str(repo),
    )
    workspace.submit(job)
    started = time.time()
    try:
        assert run_until_idle(workspace.engine(), timeout=240)
        check_outcome(workspace, started, home)
    finally:
        workspace.close()


def check_outcome(workspace: Workspace, started: float, home: Path) -> None:
    store = workspace.store()
    by_task = tasks(store)
    for cli in CLIS:
        task = by_task[f"real/{cli}"]
        assert (task.state, task.agent, task.attempt) == ("SUCCEEDED", "worker", 1), cli
    assert jobs(store)["real"].state == "SUCCEEDED"
    runs = {e.agent: e for e in executions(store) if e.agent != "worker"}
    assert {agent: run.outcome for agent, run in runs.items()} == {
        f"{cli}-main": "unavailable" for cli in CLIS
    }
    for cli, within in (("codex", CODEX_UNREACHABLE_WITHIN_S),
                        ("opencode", OPENCODE_UNREACHABLE_WITHIN_S)):  # fmt: skip
        run = runs[f"{cli}-main"]
        assert run.ended_at is not None and run.started_at is not None
        assert run.ended_at - run.started_at < within, cli
    agents = {a["id"]: a for a in workspace.status()["agents"]}
    assert agents["claude-main"]["status"] == "auth"
    assert agents["claude-main"]["reason"] == "Not logged in · Please run /login"
    assert agents["gemini-main"]["status"] == "auth"
    assert agents["gemini-main"]["reason"].startswith("Please set an Auth method")
    assert agents["codex-main"]["status"] == "unreachable"
    assert "waiting for network" in agents["codex-main"]["reason"]
    assert agents["qwen-main"]["status"] == "auth"
    assert agents["qwen-main"]["reason"].startswith("No auth type is selected.")
    assert agents["copilot-main"]["status"] == "auth"
    assert agents["copilot-main"]["reason"] == "Error: No authentication information found."
    assert agents["opencode-main"]["status"] == "unreachable"
    assert "connect" in agents["opencode-main"]["reason"].lower()
    assert agents["worker"]["status"] == "ready"
    assert leftover_clis(started, home) == []

"""The ``github`` forge end to end.

Real ``gh`` cannot reach GitHub here (no network, no account), so these tests put a
stand-in ``gh`` on PATH (tests/fixtures/gh/gh): a real process that accepts gh 2.23.0's
flags and prints its recorded output, and plays GitHub's part against a real bare
repository that relay really pushes to. The real Debian ``gh``, when installed, is used
to check that every command line relay ran is one gh 2.23 accepts, and that its
not-logged-in failure reaches the operator.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from gitrepos import GH_STANDIN_REPO, Repos, git, github_settings
from helpers import (
    Workspace,
    events,
    run_until_idle,
    running_engine,
    wait_for,
)
from test_pull_requests import (
    close_during_review,
    greet_job,
    pull,
    run_until_ready,
    state,
    submit,
    wait_state,
)

from relay_engine.contracts.config import GitConfig
from relay_engine.git.forges import ForgeError, PullRef
from relay_engine.git.forges.github import VIEW_FIELDS, GitHubForge


def configure(ws: Workspace) -> None:
    ws.configure(git=github_settings())


def gh_calls(state: Path) -> list[list[str]]:
    lines = (state / "log.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def pulls_on_github(state: Path) -> list[dict[str, Any]]:
    return json.loads((state / "state.json").read_text())["pulls"]


def test_a_job_is_reviewed_and_merged_through_a_github_pull_request(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    ws = sqlite_workspace
    configure(ws)
    submit(ws, greet_job(repos, auto_merge=True))
    store = ws.store()

    assert run_until_idle(ws.engine()) is True

    assert state(store) == "MERGED"
    (on_github,) = pulls_on_github(github)
    assert on_github["state"] == "MERGED" and on_github["headRefName"] == "relay/greet"
    assert pull(store).url == "https://github.com/octo/demo/pull/1"
    assert pull(store).number == 1
    assert "greet.py" in repos.remote_files("main")  # merged on the server (the bare repo)
    calls = gh_calls(github)
    create = next(c for c in calls if c[:2] == ["pr", "create"])
    assert create[create.index("--head") + 1] == "relay/greet"
    assert create[create.index("--base") + 1] == "main"
    assert create[-2:] == ["--repo", GH_STANDIN_REPO]
    assert ["pr", "view", "1", "--json", VIEW_FIELDS, "--repo", GH_STANDIN_REPO] in calls
    merge = next(c for c in calls if c[:2] == ["pr", "merge"])
    assert merge[:4] == ["pr", "merge", "1", "--merge"]
    assert merge[merge.index("--match-head-commit") + 1] == pull(store).head_sha
    status = ws.status()["jobs"][0]
    assert status["pr"]["forge"] == "github" and status["pr"]["state"] == "MERGED"


def test_a_pull_request_closed_on_github_closes_the_job_and_cancels_its_work(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    configure(sqlite_workspace)

    def close_on_github() -> None:  # a person closes it with their own gh
        subprocess.run(["gh", "pr", "close", "1", "--repo", GH_STANDIN_REPO], check=True)

    store = close_during_review(sqlite_workspace, repos, close_on_github)

    assert "GitHub says pull request #1 is closed" in events(store, "pr.closed")[0].message


def test_relay_close_closes_the_github_pull_request(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    ws = sqlite_workspace
    configure(ws)
    store = run_until_ready(ws, repos)
    closed = ws.cli("close", "greet")

    assert closed.returncode == 0, closed.stderr
    assert state(store) == "CLOSED"
    assert pulls_on_github(github)[0]["state"] == "CLOSED"
    assert ["pr", "close", "1", "--repo", GH_STANDIN_REPO] in gh_calls(github)


REAL_GH = shutil.which("gh", path="/usr/bin:/usr/local/bin")


@pytest.mark.skipif(REAL_GH is None, reason="Debian's gh is not installed")
def test_every_gh_command_line_relay_ran_is_accepted_by_the_real_gh(
    sqlite_workspace: Workspace, repos: Repos, github: Path, tmp_path: Path
) -> None:
    """Replay relay's gh argv through the real gh 2.23: it gets past flag and field checks.

    With a dummy token, real gh validates flags and ``--json`` fields locally and only
    then tries api.github.com, which it cannot reach here (or which refuses the token).
    """
    ws = sqlite_workspace
    configure(ws)
    submit(ws, greet_job(repos, auto_merge=True))
    assert run_until_idle(ws.engine()) is True
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GH_TOKEN": "dummy", "NO_COLOR": "1"}
    for argv in gh_calls(github):
        result = subprocess.run(
            [str(REAL_GH), *argv], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert result.returncode != 0
        assert "unknown flag" not in result.stderr and "Unknown JSON field" not in result.stderr
        assert any(
            text in result.stderr for text in ("error connecting", "HTTP 401", "Bad credentials")
        ), (argv, result.stderr)


@pytest.mark.skipif(REAL_GH is None, reason="Debian's gh is not installed")
def test_the_real_gh_not_logged_in_is_an_error_that_names_the_fix(
    repos: Repos, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    git(repos.repo, "checkout", "-q", "-b", "relay/x")
    git(repos.repo, "commit", "-q", "--allow-empty", "-m", "work")
    git(repos.repo, "checkout", "-q", "main")
    config = GitConfig(forge="github", remote="origin", repo=GH_STANDIN_REPO, gh=str(REAL_GH))
    forge = GitHubForge(str(repos.repo), config)
    ref = PullRef("x", "X", "body", str(repos.repo), "main", "relay/x")

    with pytest.raises(ForgeError, match=r"gh pr create failed \(exit 4\).*gh auth login"):
        forge.open(ref)
    assert repos.remote_head("relay/x") is not None  # the branch was pushed before gh ran


def test_a_missing_gh_is_reported_once_and_fixing_the_config_carries_on(
    sqlite_workspace: Workspace, repos: Repos, github: Path, tmp_path: Path
) -> None:
    ws = sqlite_workspace
    missing = str(tmp_path / "no-such-gh")
    ws.configure(git=github_settings(gh=missing))
    submit(ws, greet_job(repos, auto_merge=True))
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: events(store, "pr.error"), what="the forge error")
        time.sleep(1.0)  # several checks come and go meanwhile
        assert state(store) == "REVIEWING"
        assert "apt-get install gh" in (pull(store).error or "")
        ws.configure(git=github_settings())  # relay.toml is re-read while the engine runs
        wait_state(store, "MERGED")

    assert len(events(store, "pr.error")) == 1
    assert pull(store).error is None


def test_a_pull_request_stays_on_the_forge_it_was_opened_on(
    sqlite_workspace: Workspace, repos: Repos, github: Path
) -> None:
    ws = sqlite_workspace
    ws.configure(git={"remote": "origin", "check_seconds": 0.2})
    store = run_until_ready(ws, repos)
    configure(ws)  # relay.toml now says github: only new pull requests go there

    merged = ws.cli("merge", "greet")

    assert merged.returncode == 0, merged.stderr
    assert state(store) == "MERGED" and pull(store).forge == "local"
    assert "greet.py" in repos.remote_files("main")
    assert not (github / "log.jsonl").exists()  # gh was never asked

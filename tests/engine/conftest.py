"""Fixtures the engine tests share: a working repository with its remote, and the stand-in
``gh`` (tests/fixtures/gh) in front of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gitrepos import GH_STANDIN, GH_STANDIN_REPO, Repos, make_repos


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    return make_repos(tmp_path / "git")


@pytest.fixture
def github(tmp_path: Path, repos: Repos, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in ``gh`` first on PATH, serving ``repos``' remote as GH_STANDIN_REPO; its
    state directory (pull requests in state.json, every call in log.jsonl)."""
    state = tmp_path / "github"
    monkeypatch.setenv("PATH", f"{GH_STANDIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GH_STANDIN_DIR", str(state))
    monkeypatch.setenv("GH_STANDIN_REMOTE", str(repos.remote))
    monkeypatch.setenv("GH_STANDIN_REPO", GH_STANDIN_REPO)
    return state

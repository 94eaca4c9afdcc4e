"""Real git repositories for the pull request tests: the user's repo, a bare remote, people.

``Repos.repo`` is the user's checkout (``main`` checked out, ``origin`` = the bare remote);
``Repos.person()`` is someone else's clone of the remote, who pushes, merges and deletes
branches behind relay's back.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

IDENTITY = ["-c", "user.name=person", "-c", "user.email=person@example.com"]
GH_STANDIN = Path(__file__).parent / "fixtures" / "gh"
"""The folder of the stand-in ``gh``: GitHub's pull requests kept in a JSON file."""
GH_STANDIN_REPO = "octo/demo"


def github_settings(**more: object) -> dict[str, object]:
    """relay.toml's [git] for a forge that is the stand-in ``gh`` (checked every 0.2 s)."""
    return {"forge": "github", "remote": "origin", "repo": GH_STANDIN_REPO, "check_seconds": 0.2,
            **more}  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@dataclass
class Repos:
    root: Path
    repo: Path
    remote: Path

    def person(self, name: str = "person") -> Path:
        """A fresh clone of the remote, as a colleague would have it."""
        path = self.root / name
        if not path.exists():
            git(self.root, "clone", "-q", str(self.remote), str(path))
        else:
            git(path, "fetch", "-q", "origin")
        return path

    def remote_head(self, branch: str) -> str | None:
        result = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.remote,
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout.strip() or None

    def remote_files(self, branch: str = "main") -> set[str]:
        return set(git(self.remote, "ls-tree", "--name-only", branch).split())

    def remote_show(self, branch: str, path: str) -> str:
        return git(self.remote, "show", f"{branch}:{path}")

    def commit_and_push(self, branch: str, files: dict[str, str], message: str) -> str:
        """A person's commit on ``branch`` of the remote; its sha."""
        clone = self.person()
        git(clone, "checkout", "-q", "-B", branch, f"origin/{branch}")
        for name, content in files.items():
            (clone / name).write_text(content)
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", message)
        git(clone, "push", "-q", "origin", f"{branch}:{branch}")
        return git(clone, "rev-parse", "HEAD")


def make_repos(root: Path) -> Repos:
    """A user's repository with one commit on ``main``, pushed to a bare ``origin``."""
    root.mkdir(parents=True, exist_ok=True)
    remote = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = root / "repo"
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    return Repos(root, repo, remote)

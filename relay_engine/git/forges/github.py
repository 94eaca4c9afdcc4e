"""The ``github`` forge: the job branch is pushed to ``[git] remote`` and the pull request
lives on GitHub, driven through the ``gh`` CLI.

Every flag used here was checked against ``--help`` of gh 2.23.0 (Debian's ``gh``
2.23.0+dfsg1): ``gh pr create --base --head --title --body``, ``gh pr view N --json
state,headRefOid,mergeable,reviewDecision,url,number``, ``gh pr merge N --merge
--match-head-commit SHA``, ``gh pr close N``, and the inherited ``--repo OWNER/REPO``.
Output is read as gh writes it when stdout is not a terminal: ``pr create`` prints the
URL, ``pr view --json`` one compact JSON object, ``pr merge`` nothing on success.

Notes (plans, assessments, reviews, failures) go through ``gh api -X METHOD ENDPOINT
--input FILE`` to GitHub's REST API: an issue comment (``POST issues/N/comments``, edited
with ``PATCH issues/comments/ID``), a review as a pull request review with its line
comments (``POST pulls/N/reviews``, its body edited with ``PUT pulls/N/reviews/ID``).
``gh api`` takes no ``--repo``: the endpoint names ``OWNER/REPO`` itself, or gh's
``{owner}/{repo}`` placeholders filled from the checkout's remote.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from relay_engine.contracts.config import GitConfig
from relay_engine.core.lifecycle import Observation
from relay_engine.core.states import PullState
from relay_engine.core.writeback import Note, marked_body, marker
from relay_engine.git.forges import ForgeError, MergeAttempt, MergeKind, Opened, PullRef
from relay_engine.git.forges.local import LocalForge

VIEW_FIELDS = "state,headRefOid,mergeable,reviewDecision,url,number"
GH_TIMEOUT_S = 60.0
GH_AUTH_REQUIRED = 4
_PULL_URL = re.compile(r"https?://\S+/pull/(\d+)")


class GitHubForge:
    name = "github"

    def __init__(self, repo_path: str, config: GitConfig, worktree_root: Path | None = None):
        self.git = LocalForge(repo_path, config, worktree_root)
        self.gh = config.gh
        self.repo_name = config.repo
        self.cwd = str(self.git.repo.working_dir)

    def _gh(self, *args: str, repo_flag: bool = True) -> subprocess.CompletedProcess[str]:
        repo = ["--repo", self.repo_name] if self.repo_name and repo_flag else []
        argv = [self.gh, *args, *repo]
        env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"}
        env["NO_COLOR"] = "1"
        try:
            return subprocess.run(
                argv,
                cwd=self.cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=GH_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise ForgeError(
                f"{self.gh!r} not found: install the GitHub CLI (apt-get install gh) "
                "or set [git] gh to its path"
            ) from None
        except subprocess.TimeoutExpired:
            raise ForgeError(
                f"gh {' '.join(args[:2])} did not answer in {GH_TIMEOUT_S:.0f}s"
            ) from None

    def _failed(self, what: str, result: subprocess.CompletedProcess[str]) -> ForgeError:
        text = " ".join((result.stderr or result.stdout).strip().splitlines())[:500]
        # gh words its auth failure differently with and without a terminal; exit 4 is stable.
        if result.returncode == GH_AUTH_REQUIRED:
            text += " (fix: run `gh auth login` or set GH_TOKEN for the engine)"
        return ForgeError(f"gh {what} failed (exit {result.returncode}): {text}")

    def open(self, ref: PullRef) -> Opened:
        pushed = self.git.open(ref)
        if pushed.head_sha is None:
            return pushed
        result = self._gh(
            "pr", "create", "--base", ref.base_branch, "--head", ref.head_branch,
            "--title", ref.title, "--body", ref.body,
        )  # fmt: skip
        text = result.stdout if result.returncode == 0 else result.stderr
        match = _PULL_URL.search(text)
        # An open pull request for the branch already exists: gh names it; adopt it.
        if match is None or (result.returncode != 0 and "already exists" not in text):
            raise self._failed("pr create", result)
        return Opened(pushed.head_sha, number=int(match.group(1)), url=match.group(0))

    def observe(self, ref: PullRef) -> Observation:
        if ref.number is None:
            raise ForgeError(f"job {ref.job_id}: no pull request number recorded")
        heads = self.git.remote_state(ref)
        head = self.git.sync_head(ref, heads)
        result = self._gh("pr", "view", str(ref.number), "--json", VIEW_FIELDS)
        if result.returncode != 0:
            raise self._failed("pr view", result)
        try:
            data = json.loads(result.stdout)
            state = PullState(str(data["state"]))
        except (ValueError, KeyError, TypeError) as error:
            raise ForgeError(f"gh pr view: unexpected output {result.stdout[:200]!r}") from error
        gh_head = str(data.get("headRefOid") or "") or None
        # GitHub may not have seen a push yet: its mergeability is about an older head.
        mergeable = data.get("mergeable") if gh_head == head or head is None else "UNKNOWN"
        why = f"GitHub says pull request #{ref.number} is {state.lower()}"
        return Observation(
            state,
            head or gh_head,
            str(mergeable) if mergeable else None,
            why=why,
            review_decision=str(data.get("reviewDecision") or "") or None,
        )

    def merge(self, ref: PullRef, head_sha: str) -> MergeAttempt:
        result = self._gh(
            "pr", "merge", str(ref.number), "--merge", "--match-head-commit", head_sha
        )  # fmt: skip
        if result.returncode == 0:
            return MergeAttempt(MergeKind.MERGED)
        text = " ".join((result.stderr or result.stdout).split())
        if "not mergeable" in text and "cannot be cleanly created" in text:
            return MergeAttempt(MergeKind.CONFLICT)
        return MergeAttempt(MergeKind.FAILED, detail=f"gh pr merge: {text[:400]}")

    def close(self, ref: PullRef) -> None:
        result = self._gh("pr", "close", str(ref.number))
        if result.returncode != 0:
            raise self._failed("pr close", result)

    def review_material(self, ref: PullRef, head_sha: str) -> tuple[str, str]:
        return self.git.review_material(ref, head_sha)

    def prepare_rebase(self, ref: PullRef) -> tuple[str, ...]:
        return self.git.prepare_rebase(ref)

    # -- notes --------------------------------------------------------------------------
    def publish(self, ref: PullRef, note: Note, comment_id: str | None) -> str:
        if ref.number is None:
            raise ForgeError(f"job {ref.job_id}: no pull request number recorded")
        listing = (
            f"pulls/{ref.number}/reviews"
            if note.kind == "review"
            else (f"issues/{ref.number}/comments")
        )
        # An earlier write may have reached GitHub without its id reaching relay.
        comment_id = comment_id or self._find_marked(listing, note.key)
        body = marked_body(note)
        if comment_id is not None:
            edit = "PUT" if note.kind == "review" else "PATCH"
            where = (
                f"{listing}/{comment_id}"
                if note.kind == "review"
                else (f"issues/comments/{comment_id}")
            )
            self._api(edit, where, {"body": body})
            return comment_id
        if note.kind != "review":
            return str(self._api("POST", listing, {"body": body})["id"])
        return self._post_review(ref, note, listing, body)

    def _post_review(self, ref: PullRef, note: Note, listing: str, body: str) -> str:
        """A review with a line comment per finding that names a line; a line GitHub cannot
        place in the diff fails the whole review, so then it goes without them (the body
        lists every finding anyway)."""
        review: dict[str, Any] = {"body": body, "event": "COMMENT"}
        if ref.head_sha:
            review["commit_id"] = ref.head_sha
        comments = [
            {"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body}
            for c in note.line_comments
        ]
        if comments:
            try:
                return str(self._api("POST", listing, {**review, "comments": comments})["id"])
            except ForgeError as error:
                if "422" not in str(error):
                    raise
        return str(self._api("POST", listing, review)["id"])

    def _find_marked(self, listing: str, key: str) -> str | None:
        found = self._api("GET", f"{listing}?per_page=100")
        wanted = marker(key)
        for item in found if isinstance(found, list) else []:
            if isinstance(item, dict) and wanted in str(item.get("body") or ""):
                return str(item["id"])
        return None

    def _api(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        endpoint = f"repos/{self.repo_name or '{owner}/{repo}'}/{path}"
        with tempfile.TemporaryDirectory(prefix="relay-gh-") as scratch:
            args = ["api", "-X", method, endpoint]
            if payload is not None:
                data = Path(scratch) / "payload.json"
                data.write_text(json.dumps(payload), encoding="utf-8")
                args += ["--input", str(data)]
            result = self._gh(*args, repo_flag=False)
        if result.returncode != 0:
            raise self._failed(f"api {method} {path.split('?', maxsplit=1)[0]}", result)
        try:
            return json.loads(result.stdout) if result.stdout.strip() else None
        except ValueError as error:
            raise ForgeError(f"gh api: unexpected output {result.stdout[:200]!r}") from error

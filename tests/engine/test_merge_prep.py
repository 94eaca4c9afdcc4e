"""Merge preparation end to end: real git repositories (a bare remote, a person's clone), real
sim agents, the repository's checks run as real processes after the merge_prep agent.

With ``[git] merge_checks`` set, a job's head is prepared before it merges: a merge_prep task
works in a worktree of the job branch with the moved base merged in, and relay runs the checks
there; a preparation that keeps failing blocks the job, naming the check and the commands
that release it.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from gitrepos import Repos
from helpers import (
    KNOWN_ROLES,
    Workspace,
    events,
    job_toml,
    jobs,
    requires_sandbox,
    running_engine,
    sim,
    tasks,
    wait_for,
)
from sqlmodel import select

from relay_engine.contracts.job_file import load_job_file
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store
from relay_engine.store.schema import Execution

NEEDS_BASE = (
    "python3 -c \"import pathlib, sys; sys.exit(0 if pathlib.Path('base.txt').exists() else 4)\""
)
MISSING = "python3 no-such-check.py"


CLAUDE_SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", "claude"]


def start(
    ws: Workspace,
    repos: Repos,
    checks: list[str],
    sandbox: str = "none",
    provider: str = "sim",
    **work: Any,
) -> Store:
    agent = {"id": "a", "provider": provider, "roles": list(KNOWN_ROLES), "sandbox": sandbox}
    if provider == "claude":  # a CLI relay converses with over stdin and stdout
        agent["command"] = CLAUDE_SIM
    git = {"check_seconds": 0.2, "remote": "origin", "merge_checks": checks}
    ws.configure(git=git, agents=[agent])
    job = job_toml(
        "greet",
        [{"id": "code", "sim": sim(write_files={"greet.py": "def greet(n): return n\n"}, **work)}],
        repo=str(repos.repo),
        title="Add greet",
        review=False,
        auto_merge=True,
    )
    store = ws.store()
    submit_job(store, load_job_file(ws.write_job(job)), now=time.time())
    return store


def state(store: Store) -> str:
    return jobs(store)["greet"].state


def checks_record(store: Store, key: str) -> dict[str, Any]:
    with store.read() as session:
        runs = list(session.exec(select(Execution).where(Execution.task_key == key)))
    last = max(runs, key=lambda e: e.started_at or 0.0)
    return json.loads((Path(last.artifact_dir or "") / "agent" / "merge-checks.json").read_text())


def test_the_moved_base_is_merged_in_and_the_checks_pass_before_the_merge(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    store = start(ws, repos, [NEEDS_BASE, f"{sys.executable} -c pass"], duration=1.0)
    with running_engine(ws.engine()):
        wait_for(lambda: tasks(store)["greet/code"].state == "RUNNING", what="the work to start")
        repos.commit_and_push("main", {"base.txt": "a person's work\n"}, "the base moves")
        wait_for(lambda: state(store) in ("MERGED", "BLOCKED", "FAILED"), timeout=60)
    assert state(store) == "MERGED", jobs(store)["greet"].blocked_by

    prep = tasks(store)["greet/merge-prep-1"]
    assert prep.kind == "merge_prep" and prep.state == "SUCCEEDED" and prep.attempt == 1
    record = checks_record(store, "greet/merge-prep-1")
    assert [c["exit_code"] for c in record["checks"]] == [0, 0]  # base.txt was there
    assert {"greet.py", "base.txt"} <= repos.remote_files("main")
    kinds = [e.kind for e in events(store) if e.kind.startswith(("job.", "pr."))]
    assert kinds.index("pr.preparing") < kinds.index("pr.merged")


def test_a_failing_check_blocks_the_job_until_the_operator_releases_it(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    ws = sqlite_workspace
    store = start(ws, repos, [MISSING])
    before = repos.remote_head("main")
    with running_engine(ws.engine()):
        wait_for(lambda: state(store) == "BLOCKED", timeout=60, what="the job to block")
        blocked = jobs(store)["greet"].blocked_by or ""
        assert f"merge check `{MISSING}` failed (exit 2)" in blocked
        assert "no-such-check.py" in blocked  # python's own words, from the check's output
        assert "relay retry greet/merge-prep-1" in blocked
        assert "relay merge greet --force" in blocked
        assert repos.remote_head("main") == before  # nothing merged
        prep = tasks(store)["greet/merge-prep-1"]
        assert prep.state == "FAILED" and prep.attempt == prep.max_attempts
        assert "merge check" in (prep.error or "")

        status = ws.cli("status", "--json")
        assert "relay retry greet/merge-prep-1" in status.stdout

        # The operator fixes the check (relay.toml is reloaded) and retries the preparation.
        ws.configure(git={"check_seconds": 0.2, "remote": "origin", "merge_checks": ["true"]})
        wait_for(lambda: events(store, "config.reloaded"), what="the reload")
        retried = ws.cli("retry", "greet/merge-prep-1")
        assert retried.returncode == 0, retried.stderr
        wait_for(lambda: state(store) in ("MERGED", "BLOCKED"), timeout=60, what="the merge")
    assert state(store) == "MERGED"
    assert "greet.py" in repos.remote_files("main")
    assert tasks(store)["greet/merge-prep-1"].state == "SUCCEEDED"


@requires_sandbox
def test_the_checks_run_in_the_agents_sandbox(sqlite_workspace: Workspace, repos: Repos) -> None:
    """What the agent could not reach, its checks cannot either: relay.toml is hidden, the
    workspace read-only, the worktree writable."""
    ws = sqlite_workspace
    config = ws.path / "relay.toml"
    probe = (
        "import pathlib, sys\n"
        f"try: hidden = pathlib.Path({str(config)!r}).read_text() == ''\n"
        "except OSError: hidden = True\n"
        "pathlib.Path('written-by-check.txt').write_text('ok')\n"
        "print('relay.toml hidden:', hidden); sys.exit(0 if hidden else 5)"
    )
    store = start(ws, repos, [f"python3 -c {shlex.quote(probe)}"], sandbox="bwrap")
    with running_engine(ws.engine()):
        wait_for(lambda: state(store) in ("MERGED", "BLOCKED"), timeout=60, what="the job")
    assert state(store) == "MERGED", jobs(store)["greet"].blocked_by
    assert checks_record(store, "greet/merge-prep-1")["checks"][0]["exit_code"] == 0
    assert (
        "relay.toml hidden: True" in checks_record(store, "greet/merge-prep-1")["checks"][0]["tail"]
    )
    assert "written-by-check.txt" in repos.remote_files("main")  # the worktree was writable


def test_a_conversing_cli_keeps_its_stdin_and_stdout_behind_the_checks(
    sqlite_workspace: Workspace, repos: Repos
) -> None:
    """claude's stream-json (prompt on stdin, events on stdout) passes through the checks'
    runner untouched: relay still reads the agent's result, and the checks' output goes to
    their log, not into the stream relay parses."""
    ws = sqlite_workspace
    store = start(ws, repos, ["python3 -c \"print('check says hi')\""], provider="claude")
    with running_engine(ws.engine()):
        wait_for(lambda: state(store) in ("MERGED", "BLOCKED"), timeout=60, what="the job")
    assert state(store) == "MERGED", jobs(store)["greet"].blocked_by
    prep = tasks(store)["greet/merge-prep-1"]
    assert prep.state == "SUCCEEDED" and prep.result_summary
    record = checks_record(store, "greet/merge-prep-1")
    assert record["checks"][0]["exit_code"] == 0 and "check says hi" in record["checks"][0]["tail"]
    with store.read() as session:
        (run,) = session.exec(select(Execution).where(Execution.task_key == prep.key))
    assert "check says hi" not in (Path(run.artifact_dir or "") / "stdout.txt").read_text()

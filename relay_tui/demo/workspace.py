"""``relay-tui --demo``: a throw-away workspace where every pane comes alive at once.

Three sim agents speak the real output formats of Claude Code, Codex and Gemini CLI
(their ``command`` replaces the executable, the provider's parser stays). Claude hits a
usage limit within seconds and resets about a minute later: the task that hit it moves to
Codex, and a review only Claude can do parks until the reset. A failing test task gets a
troubleshooter, whose "retry" lets it pass. A second job is planned in two rounds by a
scripted planner and runs into its small budget. A third works in a real git repository
with a bare ``origin``: ACTIVE → REVIEWING (the reviewer asks for changes once, a fixer
makes them) → READY → MERGED into origin's main; a fourth waits for it (``after``). From
then on :mod:`relay_tui.demo.feeder` keeps new work coming until the console quits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from string import Template

import tomli_w

from relay_engine.contracts.job_file import load_job_file
from relay_engine.ops.jobs import submit_job
from relay_engine.store.db import Store

LIMIT_RESETS_AFTER_S = 70
BILLING_BUDGET_USD = 0.006
"""Small enough that billing's planner and tasks spend it, to show a budget stopping work."""


def relay_toml() -> str:
    sim = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format"]
    agents = (
        ("claude-a", "claude", ["implementer", "reviewer"]),
        ("codex-b", "codex", ["implementer", "tester", "reviewer"]),
        ("gemini-c", "gemini", ["planner", "assessor", "implementer", "troubleshooter"]),
    )
    blocks = [
        f'[[agents]]\nid = "{agent}"\nprovider = "{provider}"\nroles = {json.dumps(roles)}\n'
        f"command = {json.dumps([*sim, provider])}\n"
        for agent, provider, roles in agents
    ]
    header = "[engine]\nmax_concurrent_agents = 4\ntick_seconds = 0.25\n\n"
    git = '[git]\nremote = "origin"\ncheck_seconds = 2\n\n'
    # An ask nobody answers is denied after a while, so a demo left alone keeps going.
    permissions = '[permissions]\nask_timeout = "90s"\n\n'
    return header + git + permissions + "\n".join(blocks)


SEARCH_JOB = Template(
    """\
[job]
id = "search"
title = "Ship full-text search"
objective = "Index the documents and serve search results through the API and the UI."
priority = "P1"
# Its planner, should the operator replan it (p): run again what the replan superseded.
sim = { duration = 2.0, lines = 4, results_by_round = { "1" = { objective_status = "in_progress", assessment = "The hand-written plan holds; running the superseded tasks again.", unblocks = ["api", "ranking-tests", "e2e", "ui", "review"] }, "2" = { objective_status = "satisfied", assessment = "Search ships: index, API, UI and tests are in." } } }

[[tasks]]
id = "schema"
title = "Design the index schema"
input = "Propose the index schema: fields, analyzers, and the migration."
workstream = "core"
sim = { duration = 6.0, lines = 12 }

[[tasks]]
id = "crawler"
title = "Crawl the document store"
input = "Write the crawler that feeds documents into the index."
agent = "claude-a"
sim = { duration = 7.0, lines = 14, rate_limit = { message = "$limit", until_epoch = $reset_at, format = "claude" } }

[[tasks]]
id = "docs"
title = "Outline the user docs"
input = "Outline the search documentation."
workstream = "docs"
sim = { duration = 5.0, lines = 10 }

[[tasks]]
id = "api"
title = "Search API endpoint"
input = "Add GET /search with paging, backed by the index."
depends_on = ["schema", "crawler"]
workstream = "core"
sim = { duration = 8.0, lines = 16 }

[[tasks]]
id = "ranking-tests"
title = "Ranking regression tests"
role = "tester"
input = "Add regression tests for ranking."
depends_on = ["schema"]
max_attempts = 2
sim = { duration = 2.0, lines = 4, fail_attempts = 2, troubleshooter = { duration = 2.0, lines = 4, result = { verdict = "retry", guidance = "The ranking fixtures need the 'lang' field: load them with the default locale.", reason = "fixtures miss a field" } } }

[[tasks]]
id = "e2e"
title = "End-to-end search tests"
role = "tester"
depends_on = ["ranking-tests", "api"]
sim = { duration = 3.0, lines = 6 }

[[tasks]]
id = "ui"
title = "Search box in the UI"
input = "Add the search box and result list."
depends_on = ["docs"]
workstream = "docs"
sim = { duration = 8.0, lines = 16 }

[[tasks]]
id = "review"
title = "Review the search change"
role = "reviewer"
depends_on = ["docs"]
sim = { duration = 4.0, lines = 8 }
"""
)


def search_job(reset_at: int) -> str:
    """The manual job; Claude's limit message names its reset as an epoch, as Claude does."""
    limit = f"Claude AI usage limit reached|{reset_at}"
    return SEARCH_JOB.substitute(limit=limit, reset_at=reset_at)


def billing_job() -> str:
    round_one = {
        "objective_status": "in_progress",
        "assessment": "Start with the invoice model; taxes next.",
        "next_tasks": [
            {"id": "invoices", "title": "Invoice model", "sim": {"duration": 5.0, "lines": 10}},
            {
                "id": "tax",
                "title": "Tax rules",
                "dependencies": ["invoices"],
                "sim": {"duration": 5.0, "lines": 10},
            },
        ],
    }
    round_two = {
        "objective_status": "in_progress",
        "assessment": "Invoices and taxes are in; add reports.",
        "next_tasks": [
            {"id": "reports", "title": "Monthly reports", "sim": {"duration": 6.0, "lines": 12}}
        ],
    }
    done = {"objective_status": "satisfied", "assessment": "Billing v2 is complete."}
    script = {
        "duration": 3.0,
        "lines": 6,
        "results_by_round": {"1": round_one, "2": round_two, "3": done},
    }
    job = {
        "id": "billing",
        "title": "Billing v2",
        "objective": "Invoices with tax rules and monthly reports.",
        "mode": "autonomous",
        "budget_usd": BILLING_BUDGET_USD,
        "sim": script,
    }
    return tomli_w.dumps({"job": job})


FINDING = {
    "file": "greet.py",
    "line": 1,
    "severity": "major",
    "text": "greet('') returns an empty greeting: fall back to 'there'",
}


def greet_job(repo: Path) -> str:
    """A job in a real repository: reviewed (changes once, then approved) and auto-merged."""
    code = {
        "duration": 4.0,
        "lines": 8,
        "write_files": {"greet.py": "def greet(n): return f'hi {n}'\n"},
    }
    tests = {"duration": 3.0, "lines": 6, "write_files": {"test_greet.py": "assert True\n"}}
    job = {
        "id": "greet",
        "title": "Greeting helper",
        "objective": "A greet() helper with a test, merged into main.",
        "repo": str(repo),
        "auto_merge": True,
        "sim": {
            "reviewer": {
                "duration": 3.0,
                "lines": 6,
                "review": {"changes_on_rounds": [1], "findings": [FINDING]},
            },
            "fixer": {
                "duration": 3.0,
                "lines": 6,
                "write_files": {"greet.py": "def greet(n): return f'hi {n or \"there\"}'\n"},
            },
        },
    }
    tasks = [
        {"id": "code", "title": "greet()", "input": "Add greet(name).", "sim": code},
        {"id": "tests", "title": "Test greet()", "role": "tester", "input": "Test it.",
         "depends_on": ["code"], "sim": tests},
    ]  # fmt: skip
    return tomli_w.dumps({"job": job, "tasks": tasks})


def export_job() -> str:
    """Waits for greet to merge (``after``): DRAFT, then it runs."""
    job = {"id": "export", "title": "Export greetings", "after": ["greet"]}
    task = {
        "id": "csv",
        "title": "CSV export",
        "input": "Export as CSV.",
        "sim": {"duration": 3.0, "lines": 6},
    }
    return tomli_w.dumps({"job": job, "tasks": [task]})


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path) -> Path:
    """A repository with one commit on main, pushed to a bare ``origin.git`` beside it."""
    origin, repo = root / "origin.git", root / "repo"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "README.md").write_text("greetings\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(
        repo,
        "-c",
        "user.name=relay demo",
        "-c",
        "user.email=demo@relay.invalid",
        "commit",
        "-q",
        "-m",
        "init",
    )
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    return repo


def make_demo_workspace(root: Path | None = None) -> Path:
    """Write relay.toml and the demo jobs into a fresh directory and store the jobs."""
    workspace = Path(root or tempfile.mkdtemp(prefix="relay-demo-"))
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "relay.toml").write_text(relay_toml(), encoding="utf-8")
    reset_at = int(time.time()) + LIMIT_RESETS_AFTER_S
    repo = make_repo(workspace)
    jobs = (
        ("search.toml", search_job(reset_at)),
        ("billing.toml", billing_job()),
        ("greet.toml", greet_job(repo)),
        ("export.toml", export_job()),
    )
    store = Store.for_workspace(workspace)
    try:
        for name, text in jobs:
            path = workspace / name
            path.write_text(text, encoding="utf-8")
            submit_job(store, load_job_file(path), now=time.time())
    finally:
        store.dispose()
    return workspace

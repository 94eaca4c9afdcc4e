"""The fixed sample's later-stage jobs: pull requests and reviews, a spent budget, a job
waiting on another, a troubleshooter, agents that cannot work, and a day of spend.

Rows only (no I/O); :func:`relay_tui.demo.sample.write_sample` stores them. Times are offsets
from :data:`relay_tui.demo.sample.NOW`, so snapshots stay the same pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay_engine.store.schema import (
    AgentRecord,
    AgentStatus,
    Event,
    Execution,
    Job,
    PullRequest,
    Review,
    Task,
)

NOW = 1_767_258_000.0  # the same instant as relay_tui.demo.sample.NOW
LOGIN_HEAD = "4f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39"
GREET_HEAD = "9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c"
FINDINGS = [
    {
        "file": "auth/session.py",
        "line": 42,
        "severity": "major",
        "text": "the session token is logged at debug level",
    },
    {
        "file": "auth/login.py",
        "line": 17,
        "severity": "minor",
        "text": "no test for a wrong password",
    },
]


def _task(job: str, task_id: str, index: int, **fields: Any) -> Task:
    fields.setdefault("title", task_id)
    fields.setdefault("input", f"{task_id}: keep it small and tested.")
    return Task(
        key=f"{job}/{task_id}",
        job_id=job,
        task_id=task_id,
        created_at=NOW - 2400 + index,
        updated_at=NOW - 30,
        **fields,
    )


def _done(agent: str, provider: str, **fields: Any) -> dict[str, Any]:
    return {"state": "SUCCEEDED", "agent": agent, "provider": provider, "attempt": 1, **fields}


def jobs() -> list[Job]:
    repo: dict[str, Any] = {"repo_path": "/srv/repos/shop", "job_branch": None}
    return [
        Job(id="login", title="Login with sessions", state="REVIEWING", max_review_rounds=2,
            created_at=NOW - 2400, **repo, objective="Sessions for the login form."),
        Job(id="greet", title="Greeting banner", state="READY", auto_merge=False,
            created_at=NOW - 2300, **repo, objective="Greet signed-in users."),
        Job(id="docs-site", title="Docs site", budget_usd=1.0, created_at=NOW - 2200,
            objective="Publish the docs as a static site."),
        Job(id="export", title="Search export", state="DRAFT", after=["search"],
            created_at=NOW - 2100, objective="Export search results as CSV."),
    ]  # fmt: skip


def tasks() -> list[Task]:
    return [
        _task("login", "code", 0, **_done("sim-claude", "claude"), title="Session store"),
        _task("login", "review-1", 1, kind="review", role="reviewer", **_done("sim-claude", "claude")),
        _task("login", "fix-1", 2, kind="fix", **_done("sim-codex", "codex"), dependencies=[]),
        _task("login", "review-2", 3, kind="review", role="reviewer", **_done("sim-claude", "claude")),
        _task("greet", "banner", 4, **_done("sim-codex", "codex"), title="Banner component"),
        _task("greet", "review-1", 5, kind="review", role="reviewer", **_done("sim-claude", "claude")),
        _task("docs-site", "build", 6, **_done("sim-codex", "codex"), title="Static site build"),
        _task("docs-site", "deploy", 7, state="PARKED", title="Deploy to pages", dependencies=["build"],
              waiting_on_provider="budget", error="budget exhausted: $1.04 of $1.00", parked_at=NOW - 120),
        _task("export", "csv", 8, title="CSV writer", external_deps=["search/api"]),
        _task("export", "docs", 9, title="Export docs", dependencies=["csv"]),
        _task("search", "fixtures.troubleshoot", 20, kind="troubleshoot", role="troubleshooter",
              title="troubleshoot fixtures", parent_key="search/fixtures", state="RUNNING",
              agent="sim-claude", provider="claude", attempt=1, max_attempts=1, started_at=NOW - 40,
              execution_id="ex-fixtures-ts", wave=1),
    ]  # fmt: skip


def pulls() -> list[Any]:
    login = PullRequest(
        job_id="login", forge="local", remote="origin", head_branch="relay/login",
        head_sha=LOGIN_HEAD, mergeable="MERGEABLE", created_at=NOW - 1500,
        note="review asked for changes 2 times (max_review_rounds); waiting for the operator: "
        "relay merge --force, relay close, or relay replan",
    )  # fmt: skip
    greet = PullRequest(
        job_id="greet", forge="github", remote="origin", number=12,
        url="https://github.com/acme/shop/pull/12", head_branch="relay/greet",
        head_sha=GREET_HEAD, mergeable="MERGEABLE", created_at=NOW - 1400,
    )  # fmt: skip
    reviews = [
        Review(job_id="login", number=1, task_key="login/review-1", head_sha="1c2d3e4f5a6b7c8d",
               verdict="changes", summary="Sessions work; two things to fix first.",
               findings=FINDINGS, followed_up=True, created_at=NOW - 1300),
        Review(job_id="login", number=2, task_key="login/review-2", head_sha=LOGIN_HEAD,
               verdict="changes", summary="The token is still logged in one place.",
               findings=FINDINGS[:1], created_at=NOW - 600),
        Review(job_id="greet", number=1, task_key="greet/review-1", head_sha=GREET_HEAD,
               verdict="approve", summary="Small, tested, reads well.", created_at=NOW - 900),
    ]  # fmt: skip
    return [login, greet, *reviews]


def _run(eid: str, key: str, agent: str, provider: str, ago: float, **fields: Any) -> Execution:
    return Execution(
        id=eid, job_id=key.split("/", maxsplit=1)[0], task_key=key, agent=agent,
        provider=provider, attempt=1, started_at=NOW - ago, ended_at=NOW - ago + 120,
        exit_code=0, outcome="succeeded", **fields,
    )  # fmt: skip


def _cost(
    usd: float, tokens_in: int, tokens_out: int, model: str, estimated: bool
) -> dict[str, Any]:
    return {
        "cost_usd": usd, "cost_estimated": estimated, "input_tokens": tokens_in,
        "output_tokens": tokens_out, "cached_tokens": tokens_in // 3, "model": model,
    }  # fmt: skip


def executions(artifacts: Path) -> list[Execution]:
    def claude(usd: float, tokens_in: int, tokens_out: int) -> dict[str, Any]:
        return _cost(usd, tokens_in, tokens_out, "claude-sonnet-4-5", False)

    def codex(usd: float, tokens_in: int, tokens_out: int) -> dict[str, Any]:
        return _cost(usd, tokens_in, tokens_out, "gpt-5-codex", True)

    runs = [
        _run("ex-login-code", "login/code", "sim-claude", "claude", 2300, **claude(0.84, 61000, 9000)),
        _run("ex-login-r1", "login/review-1", "sim-claude", "claude", 1350, **claude(0.21, 18000, 1200)),
        _run("ex-login-fix", "login/fix-1", "sim-codex", "codex", 1000, **codex(0.12, 22000, 3000)),
        _run("ex-login-r2", "login/review-2", "sim-claude", "claude", 650, **claude(0.19, 17000, 1100)),
        _run("ex-greet", "greet/banner", "sim-codex", "codex", 2000, **codex(0.09, 15000, 2000)),
        _run("ex-greet-r1", "greet/review-1", "sim-claude", "claude", 950, **claude(0.17, 14000, 900)),
        _run("ex-docs-build", "docs-site/build", "sim-codex", "codex", 400, **codex(1.04, 120000, 15000)),
        _run("ex-tax", "billing/tax", "sim-gemini", "gemini", 20000, **_cost(0.31, 40000, 5000, "gemini-2.5-pro", True)),
        _run("ex-invoices", "billing/invoices", "sim-gemini", "gemini", 30000, **_cost(0.55, 70000, 8000, "gemini-2.5-pro", True)),
        _run("ex-schema-old", "search/schema", "sim-claude", "claude", 60000, **claude(0.66, 50000, 7000)),
    ]  # fmt: skip
    runs.append(
        Execution(id="ex-fixtures-ts", job_id="search", task_key="search/fixtures.troubleshoot",
                  agent="sim-claude", provider="claude", attempt=1, started_at=NOW - 40,
                  artifact_dir=str(artifacts / "ex-fixtures-ts"),
                  last_output="reading the loader's traceback: KeyError 'lang' in fixtures/load.py")
    )  # fmt: skip
    return runs


def agents() -> list[Any]:
    """Two more agents, neither able to work: one not logged in, one without network."""
    return [
        AgentRecord(id="gemini-b", provider="gemini", roles=["implementer"]),
        AgentRecord(id="codex-c", provider="codex", roles=["implementer", "tester"]),
        AgentStatus(agent_id="gemini-b", provider="gemini", status="auth",
                    reason="gemini exit 41: not logged in",
                    fix="run `gemini` once and sign in, or set GEMINI_API_KEY", since=NOW - 900),
        AgentStatus(agent_id="codex-c", provider="codex", status="unreachable", until=NOW + 300,
                    reason="codex: Reconnecting... waiting for network",
                    fix="no network: will probe again at 09:05", failures=2, since=NOW - 600),
    ]  # fmt: skip


EVENTS = (
    (-2100, "export", None, "job.submitted", "info", "job export submitted: waits on search"),
    (-900, "greet", None, "job.ready", "info", "job greet ready: review 1 approved"),
    (-600, "login", None, "review.changes", "warning", "job login: review 2 asked for changes"),
    (-400, "docs-site", None, "budget.exhausted", "error",
     "job docs-site: budget exhausted: $1.04 of $1.00 (relay budget JOB --add to raise it)"),
    (-40, "search", "search/fixtures.troubleshoot", "task.troubleshooting", "info",
     "search/fixtures failed: fixtures.troubleshoot looks into it before the job gives up"),
)  # fmt: skip


def events() -> list[Event]:
    return [
        Event(at=NOW + offset, job_id=job, task_key=key, kind=kind, level=level, message=message)
        for offset, job, key, kind, level, message in EVENTS
    ]


def rows(artifacts: Path) -> list[Any]:
    return [*jobs(), *tasks(), *pulls(), *executions(artifacts), *agents(), *events()]

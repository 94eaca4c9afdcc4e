"""A fixed mid-run state written straight into SQLite, for snapshot tests and screenshots.

Two jobs across two waves with every interesting task state: running, parked on a limited
provider, failed (with its troubleshooter), blocked, succeeded, and a wave gate waiting for
the operator; plus the later-stage jobs of :mod:`relay_tui.demo.sample_jobs` (pull requests,
reviews, a spent budget, a job waiting on another), of :mod:`relay_tui.demo.sample_needs`
(asks, a held task) and of :mod:`relay_tui.demo.sample_waits` (a blocked job, a dropped
task, a held wave gate, quota windows). All times
are offsets from :data:`NOW`, so a console run with ``clock=lambda: NOW`` renders the same
pixels every time (tests also pin ``TZ=UTC``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay_engine.store.db import Store
from relay_engine.store.schema import (
    AgentRecord,
    Event,
    Execution,
    Job,
    Plan,
    ProviderLimit,
    Task,
)
from relay_tui.demo import sample_jobs, sample_needs, sample_waits
from relay_tui.demo.sample_jobs import NOW
from relay_tui.demo.sample_repo import codex_lines, write_sample_repo

__all__ = ["NOW", "frozen_clock", "write_empty", "write_sample"]


def frozen_clock() -> float:
    return NOW


def _task(job: str, task_id: str, title: str, wave: int, index: int, **fields: Any) -> Task:
    fields.setdefault("input", f"{title}. Keep the change small and covered by tests.")
    return Task(
        key=f"{job}/{task_id}",
        job_id=job,
        task_id=task_id,
        title=title,
        wave=wave,
        created_at=NOW - 3600 + index,
        updated_at=NOW - 60,
        **fields,
    )


def _search_wave_one() -> list[Task]:
    return [
        _task(
            "search",
            "schema",
            "Design the index schema",
            1,
            0,
            state="SUCCEEDED",
            agent="sim-claude",
            provider="claude",
            attempt=1,
            started_at=NOW - 1500,
            finished_at=NOW - 1260,
            result_summary="schema.sql and migration 0007 added",
        ),
        _task(
            "search",
            "crawler",
            "Crawl the document store",
            1,
            1,
            state="PARKED",
            agent="sim-claude",
            provider="claude",
            attempt=1,
            waiting_on_provider="claude",
            not_before=NOW + 1380,
            parked_at=NOW - 300,
        ),
        _task(
            "search",
            "docs",
            "Outline the user docs",
            1,
            2,
            state="RUNNING",
            agent="sim-codex",
            provider="codex",
            attempt=1,
            started_at=NOW - 95,
            execution_id="ex-docs-1",
        ),
        _task(
            "search",
            "fixtures",
            "Load ranking fixtures",
            1,
            3,
            state="FAILED",
            agent="sim-codex",
            provider="codex",
            attempt=3,
            started_at=NOW - 700,
            finished_at=NOW - 640,
            error="exit 1: fixture loader crashed (KeyError: 'lang')",
        ),
    ]


def _search_wave_two() -> list[Task]:
    return [
        _task("search", "api", "Search API endpoint", 2, 4, dependencies=["schema", "crawler"]),
        _task(
            "search",
            "e2e",
            "End-to-end search tests",
            2,
            5,
            dependencies=["fixtures"],
            blocked_by="search/fixtures",
        ),
        _task(
            "search",
            "ui",
            "Search box in the UI",
            2,
            6,
            state="RUNNING",
            agent="sim-gemini",
            provider="gemini",
            attempt=2,
            started_at=NOW - 312,
            execution_id="ex-ui-2",
        ),
    ]


def _billing_tasks() -> list[Task]:
    done = {"state": "SUCCEEDED", "agent": "sim-gemini", "provider": "gemini", "attempt": 1}
    return [
        _task(
            "billing", "invoices", "Invoice model", 1, 10, **done, result_summary="Invoice + tests"
        ),
        _task("billing", "tax", "Tax rules", 1, 11, **done, result_summary="EU VAT rules"),
        _task("billing", "reports", "Monthly reports", 2, 12, dependencies=["invoices"]),
        _task("billing", "export", "CSV export", 2, 13, dependencies=["invoices", "tax"]),
    ]


def _run(artifacts: Path, eid: str, key: str, agent: str, attempt: int, **fields: Any) -> Execution:
    """An execution of ``key`` on a sim agent named for the CLI it speaks."""
    return Execution(
        id=eid,
        job_id=key.split("/", maxsplit=1)[0],
        task_key=key,
        agent=agent,
        provider=agent.removeprefix("sim-"),
        attempt=attempt,
        artifact_dir=str(artifacts / eid),
        **fields,
    )


def _executions(artifacts: Path) -> list[Execution]:
    schema = {
        "started_at": NOW - 1500,
        "ended_at": NOW - 1260,
        "exit_code": 0,
        "outcome": "succeeded",
    }
    fixtures = {"started_at": NOW - 700, "ended_at": NOW - 640, "exit_code": 1, "outcome": "failed"}
    return [
        _run(artifacts, "ex-schema-1", "search/schema", "sim-claude", 1, **schema,
             input_tokens=42_000, output_tokens=6_100, cached_tokens=30_000,
             model="claude-sonnet-4-5", cost_usd=0.42),
        _run(artifacts, "ex-docs-1", "search/docs", "sim-codex", 1, started_at=NOW - 95,
             last_output="writing docs/search.md: section 3 of 5 (query syntax)"),
        _run(artifacts, "ex-ui-2", "search/ui", "sim-gemini", 2, started_at=NOW - 312,
             last_output="npm test -- search-box: 14 passed, 1 pending",
             engine_id=sample_needs.GONE_ENGINE),
        _run(artifacts, "ex-fixtures-3", "search/fixtures", "sim-codex", 3, **fixtures,
             input_tokens=25_000, output_tokens=3_000, model="gpt-5-codex", cost_usd=0.18,
             cost_estimated=True),
    ]  # fmt: skip


EVENTS = (
    (-1800, "search", None, "job.submitted", "info", "job search submitted with 7 tasks"),
    (-1500, "search", "search/schema", "task.started", "info", "schema started on sim-claude"),
    (-1260, "search", "search/schema", "task.succeeded", "info", "schema succeeded"),
    (-640, "search", "search/fixtures", "task.failed", "error", "fixtures failed after 3 attempts"),
    (-640, "search", "search/e2e", "task.blocked", "warning", "e2e blocked by search/fixtures"),
    (-312, "search", "search/ui", "task.started", "info", "ui started on sim-gemini (try 2)"),
    (-300, None, None, "provider.limited", "warning", "claude limited until 09:23:00"),
    (-300, "search", "search/crawler", "task.parked", "warning", "crawler parked on claude"),
    (-95, "search", "search/docs", "task.started", "info", "docs started on sim-codex"),
    (-60, "billing", None, "plan.created", "info", "billing round 2 planning (manual replan)"),
    (-60, "billing", None, "plan.superseded", "info", "billing round 1 superseded by round 2"),
    (-30, "billing", None, "plan.succeeded", "info", "billing round 2: 2 tasks in wave 2"),
)

DOCS_STDOUT = "\n".join(
    [
        "reading docs/ and the API routes",
        "plan: 5 sections (overview, indexing, query syntax, ranking, limits)",
        "writing docs/search.md: section 1 of 5 (overview)",
        "writing docs/search.md: section 2 of 5 (indexing)",
        "writing docs/search.md: section 3 of 5 (query syntax)",
    ]
)


def _plan_rows() -> list[Any]:
    """Billing's round 1 planned wave 1; the operator's manual replan (round 2) superseded it
    and planned wave 2, which waits at the operator's wave gate."""
    superseded = Plan(
        id=1,
        job_id="billing",
        round=1,
        trigger="initial",
        status="SUPERSEDED",
        objective_status="in_progress",
        generated_task_ids=["invoices", "tax"],
    )
    replanned = Plan(
        id=2,
        job_id="billing",
        round=2,
        previous_plan_id=1,
        trigger="manual",
        status="SUCCEEDED",
        guidance="split reports by region",
        objective_status="in_progress",
        assessment="Invoices and taxes are in; reports and the export come next.",
        generated_task_ids=["reports", "export"],
    )
    return [superseded, replanned]


def _fleet_rows() -> list[Any]:
    """Plans, the limited provider, agents and the event feed."""
    rows: list[Any] = _plan_rows()
    rows.append(
        ProviderLimit(
            provider="claude",
            status="limited",
            reset_at=NOW + 1380,
            source_text="You've hit your limit · resets 9:23am (UTC)",
            detected_at=NOW - 300,
        )
    )
    agents = (("sim-claude", "claude"), ("sim-codex", "codex"), ("sim-gemini", "gemini"))
    rows += [
        AgentRecord(id=agent, provider=provider, roles=["implementer", "planner", "tester"])
        for agent, provider in agents
    ]
    rows += [
        Event(at=NOW + offset, job_id=job, task_key=key, kind=kind, level=level, message=message)
        for offset, job, key, kind, level, message in EVENTS
    ]
    return rows


def write_sample(path: Path) -> str:
    """Create ``path/relay.db`` (and artifacts) with the fixed state; returns the DB URL."""
    path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path / 'relay.db'}"
    artifacts = path / "artifacts"
    store = Store(url)
    with store.write() as session:
        session.add(
            Job(
                id="search",
                title="Ship full-text search",
                objective="Index the documents and serve search results.",
                repo_path=str(path / "repo"),
                created_at=NOW - 3600,
            )
        )
        session.add(
            Job(
                id="billing",
                title="Billing v2",
                mode="autonomous",
                wave_gate="operator",
                approved_wave=1,
                budget_usd=1.0,
                created_at=NOW - 3000,
            )
        )
        session.add_all(_search_wave_one() + _search_wave_two() + _billing_tasks())
        session.add_all(_executions(artifacts))
        session.add_all(_fleet_rows())
        session.add_all(sample_jobs.rows(artifacts))
        session.add_all(sample_needs.rows(artifacts))
        session.add_all(sample_waits.rows())
    store.dispose()
    for eid in ("ex-ui-2", "ex-schema-1", "ex-fixtures-3"):
        (artifacts / eid).mkdir(parents=True, exist_ok=True)
        (artifacts / eid / "stdout.txt").write_text(DOCS_STDOUT + "\n", encoding="utf-8")
    (artifacts / "ex-docs-1").mkdir(parents=True, exist_ok=True)
    (artifacts / "ex-docs-1" / "stdout.txt").write_text(codex_lines(), encoding="utf-8")
    sample_needs.write_files(artifacts)
    write_sample_repo(path / "repo", "search", "schema")
    return url


def write_empty(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path / 'relay.db'}"
    Store(url).dispose()
    return url

"""The fixed sample's cockpit rows: what waits on the operator (a command to allow, a
question to answer, a task taken over by hand), a finished job to fold away, a run whose
engine went silent, and the agents' live streams (the tool in flight, tokens so far).

Rows and file contents only; :func:`relay_tui.demo.sample.write_sample` stores them. Times
are offsets from :data:`NOW`, so snapshots stay the same pixels.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from relay_engine.store.schema import Ask, EngineRecord, Event, Execution, Job, PullRequest, Task
from relay_tui.demo.sample_jobs import NOW

GONE_ENGINE = "eng-b7"
LONG_COMMAND = (
    "pytest -q tests/test_ranking.py -k 'lang and not slow' --maxfail=1 "
    "&& python scripts/load_fixtures.py --check --locale en_US"
)
QUESTION = "Which store should the rotated keys live in: PostgreSQL or the local SQLite file?"
IDLE = {"ex-docs-1": 8, "ex-ui-2": 200, "ex-fixtures-ts": 25, "ex-rotate-1": 4, "ex-store-1": 95}
"""Seconds since each running agent last wrote (its stdout's modification time)."""


def _task(job: str, task_id: str, title: str, index: int, **fields: Any) -> Task:
    fields.setdefault("input", f"{title}.")
    return Task(
        key=f"{job}/{task_id}", job_id=job, task_id=task_id, title=title, wave=1,
        created_at=NOW - 4000 + index, updated_at=NOW - 20, **fields,
    )  # fmt: skip


def jobs() -> list[Any]:
    return [
        Job(id="onboarding", title="Onboarding emails", state="MERGED", created_at=NOW - 5000,
            repo_path="/srv/repos/shop", objective="Welcome emails for new accounts."),
        PullRequest(job_id="onboarding", forge="local", remote="origin", state="MERGED",
                    head_branch="relay/onboarding", head_sha="5e6f7a8b9c0d1e2f3a4b",
                    mergeable="MERGEABLE", merge_commit="0f1e2d3c4b5a", created_at=NOW - 4200),
        Job(id="api-keys", title="Rotate API keys", created_at=NOW - 1900,
            objective="Rotate the service's API keys without downtime."),
    ]  # fmt: skip


def tasks() -> list[Task]:
    done = {"state": "SUCCEEDED", "agent": "sim-codex", "provider": "codex", "attempt": 1}
    running = {"state": "RUNNING", "agent": "sim-claude", "provider": "claude", "attempt": 1}
    return [
        _task("onboarding", "templates", "Email templates", 0, **done, result_summary="3 templates"),
        _task("onboarding", "send", "Send on signup", 1, **done, result_summary="hooked into signup"),
        _task("onboarding", "review-1", "review-1", 2, kind="review", role="reviewer", **done),
        _task("api-keys", "rotate", "Rotate the signing key", 10, **running, started_at=NOW - 420,
              execution_id="ex-rotate-1", story_size="S"),
        _task("api-keys", "store", "Key store", 11, **running, started_at=NOW - 380,
              execution_id="ex-store-1"),
        _task("api-keys", "audit", "Audit key usage", 12, state="HELD", agent="sim-claude",
              provider="claude", attempt=1, held_by="ana@laptop", held_at=NOW - 720),
    ]  # fmt: skip


def executions(artifacts: Path) -> list[Execution]:
    def run(eid: str, key: str, ago: float, **fields: Any) -> Execution:
        return Execution(
            id=eid, job_id=key.split("/", maxsplit=1)[0], task_key=key, agent="sim-claude",
            provider="claude", attempt=1, artifact_dir=str(artifacts / eid), **fields,
        )  # fmt: skip

    return [
        run("ex-rotate-1", "api-keys/rotate", 420, started_at=NOW - 420,
            last_output="Edit: auth/keys.py"),
        run("ex-store-1", "api-keys/store", 380, started_at=NOW - 380,
            last_output="waiting: AskUserQuestion"),
        run("ex-onb-1", "onboarding/templates", 4100, started_at=NOW - 4100, ended_at=NOW - 3900,
            exit_code=0, outcome="succeeded", cost_usd=0.21, input_tokens=18000,
            output_tokens=2400, model="gpt-5-codex", cost_estimated=True),
        run("ex-onb-2", "onboarding/send", 3800, started_at=NOW - 3800, ended_at=NOW - 3600,
            exit_code=0, outcome="succeeded", cost_usd=0.007, input_tokens=900,
            output_tokens=120, model="gpt-5-codex", cost_estimated=True),
    ]  # fmt: skip


def asks() -> list[Ask]:
    question = {"questions": [{"question": QUESTION, "header": "Key store", "multiSelect": False,
                               "options": [{"label": "PostgreSQL"}, {"label": "SQLite"}]}]}  # fmt: skip
    return [
        Ask(id=7, job_id="search", task_key="search/fixtures.troubleshoot",
            execution_id="ex-fixtures-ts", agent="sim-claude", provider="claude",
            kind="permission", request_id="req-7", tool="Bash",
            tool_input={"command": LONG_COMMAND}, summary=f"Bash {LONG_COMMAND}",
            context="The loader drops 'lang'; running the ranking tests to confirm.",
            suggested_rule="Bash(pytest:*)", asked_at=NOW - 25, timeout_at=NOW + 1775),
        Ask(id=8, job_id="api-keys", task_key="api-keys/store", execution_id="ex-store-1",
            agent="sim-claude", provider="claude", kind="question", request_id="req-8",
            tool="AskUserQuestion", tool_input=question, summary=f"AskUserQuestion: {QUESTION}",
            context="Both stores work; the choice decides the migration.", asked_at=NOW - 95,
            timeout_at=NOW + 1705),
    ]  # fmt: skip


def fleet(artifacts: Path) -> list[Any]:
    """An engine that went silent 3 minutes ago while running search/ui, and the events of
    one cancel that blocked three tasks (a burst the event list shows as one line)."""
    blocked = [
        Event(at=NOW - 10, job_id="api-keys", task_key=f"api-keys/{name}", kind="task.blocked",
              level="warning", message=f"{name} blocked by api-keys/legacy")
        for name in ("export", "cleanup", "docs")
    ]  # fmt: skip
    return [
        EngineRecord(id=GONE_ENGINE, host="build-2", pid=4242, started_at=NOW - 7200,
                     heartbeat_at=NOW - 200, slots=4, agents=["sim-gemini"]),
        Event(at=NOW - 10, job_id="api-keys", task_key="api-keys/legacy", kind="task.cancelled",
              level="info", message="legacy cancelled by operator"),
        *blocked,
        Event(at=NOW - 5, job_id="api-keys", task_key="api-keys/store",
              kind="agent.needs_input", level="warning", message=f"api-keys/store asks: {QUESTION}"),
    ]  # fmt: skip


def claude_lines(steps: list[tuple[str, Any]]) -> str:
    """Claude Code's stream-json: each step a message or a tool use, each with its usage."""
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5"}
    ]
    for number, (kind, body) in enumerate(steps, 1):
        block = ({"type": "text", "text": body} if kind == "text"
                 else {"type": "tool_use", "id": f"tu{number}", "name": body[0], "input": body[1]})  # fmt: skip
        usage = {"input_tokens": 1200 * number, "cache_read_input_tokens": 9000,
                 "output_tokens": 240 * number}  # fmt: skip
        message = {"role": "assistant", "model": "claude-sonnet-4-5", "content": [block],
                   "usage": usage}  # fmt: skip
        lines.append({"type": "assistant", "message": message, "session_id": "s-1"})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def streams() -> dict[str, str]:
    return {
        "ex-fixtures-ts": claude_lines([
            ("text", "Reading the loader's traceback first."),
            ("tool", ("Read", {"file_path": "fixtures/load.py"})),
            ("tool", ("Bash", {"command": LONG_COMMAND})),
        ]),
        "ex-rotate-1": claude_lines([
            ("tool", ("Read", {"file_path": "auth/keys.py"})),
            ("text", "Keeping the old key valid for one hour."),
            ("tool", ("Edit", {"file_path": "auth/keys.py", "old_string": "a", "new_string": "b"})),
        ]),
        "ex-store-1": claude_lines([
            ("text", "Both stores work; the choice decides the migration."),
            ("tool", ("AskUserQuestion", {"questions": [{"question": QUESTION}]})),
        ]),
    }  # fmt: skip


def rows(artifacts: Path) -> list[Any]:
    return [*jobs(), *tasks(), *executions(artifacts), *asks(), *fleet(artifacts)]


def write_files(artifacts: Path) -> None:
    """The streams, and every running agent's stdout dated so its idle time is fixed."""
    for eid, text in streams().items():
        (artifacts / eid).mkdir(parents=True, exist_ok=True)
        (artifacts / eid / "stdout.txt").write_text(text, encoding="utf-8")
    for eid, idle in IDLE.items():
        stdout = artifacts / eid / "stdout.txt"
        if stdout.exists():
            os.utime(stdout, (NOW - idle, NOW - idle))

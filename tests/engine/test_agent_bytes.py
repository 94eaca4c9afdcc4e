"""Whatever an agent prints, its exit is written and the engine goes on.

An agent printing a NUL (a binary file, ``find -print0``) or a CLI whose JSON cut an emoji
in two (a lone ``\\ud83d``) made the exit write fail on PostgreSQL (and the second on
SQLite too): ``relay run`` stopped, and the task, left RUNNING, stopped the next engine
that ran it once its lease lapsed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import Workspace, events, job_toml, run_until_idle, tasks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "streams"
NUL_PRINTER = (
    "import sys; sys.stdout.write('out\\0put\\n'); sys.stderr.write('bad\\0byte\\n'); sys.exit(1)"
)


def test_an_agent_printing_nul_fails_its_task_and_the_engine_goes_on(
    workspace: Workspace,
) -> None:
    agent = {"id": "nul", "provider": "command", "command": [sys.executable, "-c", NUL_PRINTER]}
    workspace.configure(agents=[agent])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}, {"id": "u"}]))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is False  # idle with its job failed, not stopped

    done = tasks(store)
    assert {key: task.state for key, task in done.items()} == {"j/t": "FAILED", "j/u": "FAILED"}
    assert (done["j/t"].error or "").replace("\0", "") == "exit 1: badbyte"
    failed = [e.message.replace("\0", "") for e in events(store, "task.failed")]
    assert any("badbyte" in message for message in failed)


def test_a_claude_stream_with_half_an_emoji_succeeds_with_the_half_marked(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Claude's own success stream, its text and result cut inside an emoji."""
    stream = tmp_path / "cut.jsonl"
    stream.write_text("".join(json.dumps(_cut(json.loads(line))) + "\n" for line in
                              (FIXTURES / "claude_success.jsonl").read_text().splitlines()))  # fmt: skip
    printer = f"import sys; sys.stdout.write(open({str(stream)!r}).read())"
    agent = {"id": "cut", "provider": "claude", "command": [sys.executable, "-c", printer],
             "sandbox": "none"}  # fmt: skip
    workspace.configure(agents=[agent])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}]))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is True  # every job succeeded

    task = tasks(store)["j/t"]
    assert task.state == "SUCCEEDED", task.error
    assert "All done \ufffd cut" in (task.result_summary or "")


def _cut(event: dict) -> dict:  # type: ignore[type-arg]
    if event.get("type") == "result":
        event["result"] = 'All done \ud83d cut\n\n```json\n{"status": "done"}\n```'
    for part in event.get("message", {}).get("content", []):
        if isinstance(part, dict) and part.get("type") == "text":
            part["text"] = "half \ud83d an emoji"
    return event

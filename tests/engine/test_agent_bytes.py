"""Whatever an agent prints, its exit is written and the engine goes on.

An agent printing a NUL (a binary file, ``find -print0``) or a CLI whose JSON cut an emoji
in two (a lone ``\\ud83d``) made the exit write fail on PostgreSQL (and the second on
SQLite too): ``relay run`` stopped, and the task, left RUNNING, stopped the next engine
that ran it once its lease lapsed. So did a CLI reporting numbers no column holds: tokens
past 64 bits (or past 32 on PostgreSQL), a cost of ``1e400``, a result block with ``NaN``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import Workspace, events, executions, job_toml, run_until_idle, tasks

from relay_engine.store.schema import Task

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
    task = succeeded_printing(workspace, stream)
    assert "All done \ufffd cut" in (task.result_summary or "")


def succeeded_printing(workspace: Workspace, stream: Path) -> Task:
    """The task a claude agent that prints ``stream`` ran, checked to have succeeded with
    the engine going on to idle."""
    printer = f"import sys; sys.stdout.write(open({str(stream)!r}).read())"
    agent = {"id": "printer", "provider": "claude", "command": [sys.executable, "-c", printer],
             "sandbox": "none"}  # fmt: skip
    workspace.configure(agents=[agent])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}]))

    assert run_until_idle(workspace.engine()) is True  # every job succeeded

    task = tasks(workspace.store())["j/t"]
    assert task.state == "SUCCEEDED", task.error
    return task


def _cut(event: dict) -> dict:  # type: ignore[type-arg]
    if event.get("type") == "result":
        event["result"] = 'All done \ud83d cut\n\n```json\n{"status": "done"}\n```'
    for part in event.get("message", {}).get("content", []):
        if isinstance(part, dict) and part.get("type") == "text":
            part["text"] = "half \ud83d an emoji"
    return event


@pytest.mark.parametrize(
    ("tokens", "cost", "stored_tokens", "stored_cost"),
    [
        ("3000000000", "0.5", 3_000_000_000, 0.5),  # past PostgreSQL's 32-bit integer
        ("1" + "0" * 20, "1e400", None, None),  # past 64 bits; an infinite cost
        ("1e400", "NaN", None, None),
    ],
    ids=["past-32-bits", "past-64-bits", "infinite"],
)
def test_a_claude_run_reporting_absurd_numbers_succeeds_with_them_unknown(
    workspace: Workspace,
    tmp_path: Path,
    tokens: str,
    cost: str,
    stored_tokens: int | None,
    stored_cost: float | None,
) -> None:
    """Claude's own success stream, its usage, cost and result block rewritten."""
    lines = (FIXTURES / "claude_success.jsonl").read_text().splitlines()
    result = json.loads(lines[-1])
    result["usage"] = {"input_tokens": "TOKENS", "output_tokens": 7}
    result["total_cost_usd"] = "COST"
    result["result"] = 'Done.\n\n```json\n{"status": "done", "ratio": "COST"}\n```'
    text = json.dumps(result).replace('"TOKENS"', tokens).replace('"COST"', cost)
    text = text.replace('\\"ratio\\": \\"COST\\"', f'\\"ratio\\": {cost}')
    stream = tmp_path / "absurd.jsonl"
    stream.write_text("\n".join([*lines[:-1], text]) + "\n")
    task = succeeded_printing(workspace, stream)
    assert task.result == {"status": "done", "ratio": stored_cost}
    (run,) = executions(workspace.store())
    assert (run.input_tokens, run.output_tokens) == (stored_tokens, 7)
    if stored_cost is None:  # priced from the tokens that could be read, and said to be
        assert run.cost_estimated and 0 < (run.cost_usd or 0) < 0.01
    else:
        assert (run.cost_usd, run.cost_estimated) == (stored_cost, False)

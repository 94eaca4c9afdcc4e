from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent"]


def run_sim(
    tmp_path: Path,
    script: dict[str, Any] | None = None,
    args: list[str] | None = None,
    *,
    attempt: int = 1,
    plan_round: int | None = None,
    stdin: str = "",
) -> tuple[subprocess.CompletedProcess[str], Path]:
    result_file = tmp_path / f"result-{time.monotonic_ns()}.json"
    env = dict(os.environ)
    env.update(
        RELAY_SIM_SCRIPT=json.dumps({"duration": 0, "lines": 2, **(script or {})}),
        RELAY_ATTEMPT=str(attempt),
        RELAY_TASK="JOB/T1",
        RELAY_RESULT_FILE=str(result_file),
    )
    if plan_round is not None:
        env["RELAY_PLAN_ROUND"] = str(plan_round)
    proc = subprocess.run(
        [*SIM, *(args or [])],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
        check=False,
    )
    return proc, result_file


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_plain_prints_progress_and_writes_default_result(tmp_path: Path) -> None:
    proc, result = run_sim(tmp_path, {"lines": 3})
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "working on JOB/T1: step 1/3",
        "working on JOB/T1: step 2/3",
        "working on JOB/T1: step 3/3",
        "sim finished JOB/T1",
    ]
    assert json.loads(result.read_text()) == {"summary": "sim finished JOB/T1"}


def test_exit_code_and_string_result(tmp_path: Path) -> None:
    proc, result = run_sim(tmp_path, {"exit_code": 3, "result": "half done"})
    assert proc.returncode == 3
    assert json.loads(result.read_text()) == {"summary": "half done"}


def test_non_dict_result_goes_into_data(tmp_path: Path) -> None:
    proc, result = run_sim(tmp_path, {"result": [1, 2]})
    assert proc.returncode == 0
    assert json.loads(result.read_text()) == {"summary": "sim finished JOB/T1", "data": [1, 2]}


def test_fail_attempts(tmp_path: Path) -> None:
    failed, result = run_sim(tmp_path, {"fail_attempts": 2}, attempt=2)
    assert failed.returncode == 1
    assert "attempt 2" in failed.stderr
    assert not result.exists()
    ok, result = run_sim(tmp_path, {"fail_attempts": 2}, attempt=3)
    assert ok.returncode == 0
    assert result.exists()


def test_result_selection_by_round_and_attempt(tmp_path: Path) -> None:
    script = {
        "result": "base",
        "results_by_attempt": {"2": "attempt two"},
        "results_by_round": {"1": {"summary": "plan r1", "tasks": []}, "1.2": "r1 a2"},
    }
    cases = [
        ((1, None), {"summary": "base"}),
        ((2, None), {"summary": "attempt two"}),
        ((1, 1), {"summary": "plan r1", "tasks": []}),
        ((2, 1), {"summary": "r1 a2"}),
        ((2, 5), {"summary": "attempt two"}),
    ]
    for (attempt, plan_round), expected in cases:
        proc, result = run_sim(tmp_path, script, attempt=attempt, plan_round=plan_round)
        assert proc.returncode == 0
        assert json.loads(result.read_text()) == expected, (attempt, plan_round)


def test_claude_stream_json_shape(tmp_path: Path) -> None:
    proc, _ = run_sim(tmp_path, {"lines": 2, "session_id": "sess-1"}, ["--format", "claude"])
    assert proc.returncode == 0
    events = jsonl(proc.stdout)
    assert events[0]["type"] == "system"
    assert events[0]["subtype"] == "init"
    assert events[0]["model"]
    assert isinstance(events[0]["tools"], list)
    assistant = [e for e in events if e["type"] == "assistant"]
    assert [e["message"]["content"][0]["text"] for e in assistant] == [
        "working on JOB/T1: step 1/2",
        "working on JOB/T1: step 2/2",
    ]
    final = events[-1]
    assert final["type"] == "result"
    assert final["subtype"] == "success"
    assert final["is_error"] is False
    assert final["result"] == "sim finished JOB/T1"
    assert final["total_cost_usd"] > 0
    assert final["usage"]["input_tokens"] > 0
    assert final["usage"]["output_tokens"] > 0
    assert final["num_turns"] >= 1
    assert "duration_ms" in final
    assert {e["session_id"] for e in events} == {"sess-1"}


def test_claude_dict_result_is_json_text_and_error_subtype(tmp_path: Path) -> None:
    plan = {"summary": "planned", "tasks": [{"id": "a"}]}
    proc, _ = run_sim(tmp_path, {"result": plan, "exit_code": 1}, ["--format", "claude"])
    assert proc.returncode == 1
    final = jsonl(proc.stdout)[-1]
    assert final["subtype"] == "error_during_execution"
    assert final["is_error"] is True
    assert json.loads(final["result"]) == plan


def test_codex_json_shape(tmp_path: Path) -> None:
    proc, _ = run_sim(tmp_path, {"lines": 2, "session_id": "th-1"}, ["--format", "codex"])
    assert proc.returncode == 0
    events = jsonl(proc.stdout)
    assert events[0] == {"type": "thread.started", "thread_id": "th-1"}
    assert events[1] == {"type": "turn.started"}
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    assert [i["type"] for i in items] == ["agent_message", "agent_message"]
    assert items[0]["id"] == "item_0"
    assert items[0]["text"] == "working on JOB/T1: step 1/2"
    assert events[-1]["type"] == "turn.completed"
    assert set(events[-1]["usage"]) == {"input_tokens", "cached_input_tokens", "output_tokens"}


def test_gemini_json_shape(tmp_path: Path) -> None:
    proc, _ = run_sim(tmp_path, {"lines": 2, "result": "all good"}, ["--format", "gemini"])
    assert proc.returncode == 0
    assert "step 2/2" in proc.stderr
    body = json.loads(proc.stdout)
    assert body["response"] == "all good"
    tokens = body["stats"]["models"]["gemini-2.5-pro"]["tokens"]
    assert tokens["total"] == tokens["prompt"] + tokens["candidates"]


def test_format_inferred_from_real_cli_flags(tmp_path: Path) -> None:
    claude, _ = run_sim(
        tmp_path, None, ["-p", "fix it", "--output-format", "stream-json", "--verbose"]
    )
    assert jsonl(claude.stdout)[-1]["type"] == "result"
    codex, _ = run_sim(tmp_path, None, ["exec", "--json", "--sandbox", "x", "fix it"])
    assert jsonl(codex.stdout)[0]["type"] == "thread.started"
    gemini, _ = run_sim(tmp_path, None, ["-p", "fix it", "--output-format", "json", "--yolo"])
    assert "response" in json.loads(gemini.stdout)


def test_resume_reports_given_session(tmp_path: Path) -> None:
    claude, _ = run_sim(tmp_path, None, ["--resume", "abc-123", "--format", "claude"])
    assert {e["session_id"] for e in jsonl(claude.stdout)} == {"abc-123"}
    codex, _ = run_sim(tmp_path, None, ["exec", "resume", "th-9", "--json", "go on"])
    assert jsonl(codex.stdout)[0]["thread_id"] == "th-9"


def test_generated_session_ids_differ(tmp_path: Path) -> None:
    first, _ = run_sim(tmp_path, None, ["--format", "claude"])
    second, _ = run_sim(tmp_path, None, ["--format", "claude"])
    ids = {jsonl(p.stdout)[0]["session_id"] for p in (first, second)}
    assert len(ids) == 2


def test_prompt_file_and_stdin_count_as_input(tmp_path: Path) -> None:
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text("y" * 4000)
    from_file, _ = run_sim(tmp_path, None, ["--prompt-file", str(prompt_file), "--format", "codex"])
    from_stdin, _ = run_sim(tmp_path, None, ["--format", "codex"], stdin="z" * 4000)
    empty, _ = run_sim(tmp_path, None, ["--format", "codex"])
    tokens = [jsonl(p.stdout)[-1]["usage"]["input_tokens"] for p in (from_file, from_stdin, empty)]
    assert tokens[0] == tokens[1] > tokens[2]


LIMIT = "Claude AI usage limit reached|1767225600"


@pytest.mark.parametrize("fmt", ["plain", "claude", "codex", "gemini"])
def test_rate_limit_in_each_format(tmp_path: Path, fmt: str) -> None:
    proc, result = run_sim(tmp_path, {"rate_limit": {"message": LIMIT}}, ["--format", fmt])
    assert proc.returncode == 1
    assert not result.exists()
    if fmt == "plain":
        assert LIMIT in proc.stdout
        assert LIMIT in proc.stderr
    elif fmt == "claude":
        final = jsonl(proc.stdout)[-1]
        assert final["type"] == "result"
        assert final["is_error"] is True
        assert final["result"] == LIMIT
    elif fmt == "codex":
        events = jsonl(proc.stdout)
        assert {"type": "error", "message": LIMIT} in events
        assert events[-1] == {"type": "turn.failed", "error": {"message": LIMIT}}
    else:
        error = json.loads(proc.stdout)["error"]
        assert error["message"] == LIMIT
        assert error["code"] == 429


def test_rate_limit_only_on_listed_attempts_and_until_epoch(tmp_path: Path) -> None:
    limit = {"message": "slow down", "attempts": [1], "exit_code": 7}
    limited, _ = run_sim(tmp_path, {"rate_limit": limit}, attempt=1)
    assert limited.returncode == 7
    free, _ = run_sim(tmp_path, {"rate_limit": limit}, attempt=2)
    assert free.returncode == 0
    past = {"message": "slow down", "until_epoch": time.time() - 10}
    expired, _ = run_sim(tmp_path, {"rate_limit": past})
    assert expired.returncode == 0
    future = {"message": "slow down", "until_epoch": time.time() + 3600}
    active, _ = run_sim(tmp_path, {"rate_limit": future})
    assert active.returncode == 1


@pytest.mark.parametrize("fmt", ["claude", "codex", "gemini"])
def test_failure_in_structured_formats(tmp_path: Path, fmt: str) -> None:
    proc, _ = run_sim(tmp_path, {"fail_attempts": 1}, ["--format", fmt])
    assert proc.returncode == 1
    if fmt == "claude":
        assert jsonl(proc.stdout)[-1]["is_error"] is True
    elif fmt == "codex":
        assert jsonl(proc.stdout)[-1]["type"] == "turn.failed"
    else:
        assert json.loads(proc.stdout)["error"]["message"]


def test_text_spew_counts_bytes(tmp_path: Path) -> None:
    proc, _ = run_sim(tmp_path, {"lines": 0, "output_bytes": 3_000_000})
    assert proc.returncode == 0
    assert len(proc.stdout) > 3_000_000
    assert proc.stdout.splitlines()[-1] == "sim finished JOB/T1"


def test_bad_script_is_reported(tmp_path: Path) -> None:
    env = dict(os.environ, RELAY_SIM_SCRIPT="{not json")
    proc = subprocess.run(
        SIM, capture_output=True, text=True, env=env, timeout=30, check=False, input=""
    )
    assert proc.returncode == 2
    assert "RELAY_SIM_SCRIPT" in proc.stderr


def test_sim_imports_nothing_else_from_relay() -> None:
    code = (
        "import sys, relay_engine.agents.sim_agent;"
        "print(sorted(m for m in sys.modules if m.startswith('relay')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert (
        out.stdout.strip()
        == "['relay_engine', 'relay_engine.agents', 'relay_engine.agents.sim_agent']"
    )

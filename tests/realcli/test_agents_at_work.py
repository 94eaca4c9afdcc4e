"""The real CLIs doing real work under relay, against the scripted model stub.

Each test is a workspace, an engine and a job, as an operator runs them: real codex, qwen,
opencode and qwen over ACP edit a file in the task's worktree and run a command (the ones
that ask relay are answered by its rules), and a scripted 429 parks or swaps real claude and
real codex with the reset the CLI reported. No CLI process outlives its test.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clis import leftover_clis
from helpers import Workspace, executions, init_repo, job_toml, running_engine, tasks, wait_for
from modelstub import (
    KEY,
    PATCH,
    QWEN_SHOW,
    SHOW,
    ModelStub,
    call,
    rate_limited,
    say,
    unified_limit_headers,
    usage_limit,
)

from relay_engine.agents.sandbox import host_sandbox
from relay_engine.store.read_model.providers import read_quota

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SHOW_RULES = ["Bash(cat:*)", "Bash(echo:*)"]  # relay's rules answer the CLIs that ask
QWEN_RULES = [*SHOW_RULES, "Bash(tee:*)"]


def qwen_showed(repo: Path, output: str) -> bool:
    """Whether qwen's shell ran all of QWEN_SHOW: its mark is on the branch, and what qwen
    caught of its output is the start of what it printed."""
    caught = output.split("Output: ", 1)[-1].split("\nError: ", 1)[0]
    return branch_file(repo, "ran.txt") == "ran-ok\n" and caught.startswith("hello")


@pytest.fixture(autouse=True)
def no_cli_left_behind(tmp_path: Path) -> Iterator[None]:
    started = time.time()
    yield
    deadline = time.monotonic() + 10
    while (left := leftover_clis(started, tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


def worktree(ws: Workspace, job: str, task: str) -> Path:
    """Where relay runs the task (the stub's script needs absolute paths for some CLIs)."""
    return ws.path / ".relay" / "worktrees" / job / task


def branch_file(repo: Path, name: str, branch: str = "relay/j") -> str | None:
    shown = subprocess.run(["git", "show", f"{branch}:{name}"], cwd=repo, capture_output=True,
                           text=True, check=False)  # fmt: skip
    return shown.stdout if shown.returncode == 0 else None


def workspace(tmp_path: Path, agents: list[dict[str, Any]], **options: Any) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    ws.configure(agents=agents, **options)
    return ws


def run_job(ws: Workspace, repo: Path, until: str = "SUCCEEDED", timeout: float = 150) -> Any:
    ws.submit(job_toml("j", [{"id": "t", "input": "Write hello.txt, then show it"}],
                       repo=str(repo), review=False))  # fmt: skip
    store = ws.store()
    with running_engine(ws.engine()):
        wait_for(lambda: tasks(store)["j/t"].state == until, timeout=timeout, what=until)
    return store


# -- agents -------------------------------------------------------------------------------


def codex_agent(bin_dir: Path, home: Path, stub: ModelStub, **extra: Any) -> dict[str, Any]:
    """CODEX_HOME with the stub as its provider; TMPDIR outside it (codex refuses to put its
    sandbox helper under the temp dir, and every command would then fail). As root, codex's
    own bubblewrap cannot start inside relay's, so there it runs with full access and
    relay's sandbox alone confines it (what relay doctor tells an operator to do)."""
    (home / ".codex").mkdir(parents=True)
    (home / ".tmp").mkdir()
    (home / ".codex" / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "stub"\n\n[model_providers.stub]\n'
        f'name = "Model stub"\nbase_url = "{stub.url}/v1"\nenv_key = "STUB_API_KEY"\n'
        'wire_api = "responses"\nrequest_max_retries = 1\nstream_max_retries = 1\n'
    )
    env = {"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "TMPDIR": str(home / ".tmp"),
           "STUB_API_KEY": KEY}  # fmt: skip
    nested = {"access": "full"} if host_sandbox().problem is None and os.geteuid() == 0 else {}
    return {"id": "codex-main", "provider": "codex", "command": [str(bin_dir / "codex")],
            "env": env, "model": "gpt-5.5", **nested, **extra}  # fmt: skip


def qwen_env(home: Path, stub: ModelStub) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "OPENAI_BASE_URL": f"{stub.url}/v1", "OPENAI_API_KEY": KEY,
            "OPENAI_MODEL": "stub-model"}  # fmt: skip


def opencode_home(home: Path, stub: ModelStub) -> dict[str, str]:
    (home / ".config" / "opencode").mkdir(parents=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": f"{stub.url}/v1", "apiKey": KEY},
        "models": {"stub-model": {"name": "Stub", "cost": {"input": 3.0, "output": 15.0}}},
    }
    config = {"provider": {"stub": provider}, "model": "stub/stub-model", "autoupdate": False}
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config))
    return {"HOME": str(home)}


def claude_agent(bin_dir: Path, home: Path, stub: ModelStub, agent_id: str, account: str) -> dict:
    """Logged in to a plan (an OAuth token): claude then reads the plan-limit headers."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": stub.url,
           "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-stub", "CLAUDE_CODE_MAX_RETRIES": "1"}  # fmt: skip
    return {"id": agent_id, "provider": "claude", "account": account,
            "command": [str(bin_dir / "claude")], "env": env}  # fmt: skip


# -- real work ----------------------------------------------------------------------------


def test_real_codex_patches_a_file_and_runs_a_command_under_relay(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    model_stub.script([call("apply_patch", PATCH), call("exec_command", {"cmd": SHOW}),
                       say("Wrote hello.txt and showed it.")])  # fmt: skip
    ws = workspace(tmp_path, [codex_agent(cli_bin, tmp_path / "home", model_stub)])
    store = run_job(ws, repo)
    assert branch_file(repo, "hello.txt") == "hello from the stub\n"
    assert model_stub.results_for("exec_command")[-1].output.endswith(
        "Output:\nhello from the stub\nran-ok\n"
    )
    (run,) = executions(store)
    assert (run.agent, run.outcome, run.input_tokens, run.output_tokens) == (
        "codex-main", "succeeded", 360, 90,
    )  # fmt: skip
    assert run.session_id and tasks(store)["j/t"].result_summary == "Wrote hello.txt and showed it."


def test_real_qwen_writes_a_file_and_relays_rules_let_its_command_run(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """qwen with relay's channel: auto-edit writes by itself, the shell command asks relay."""
    repo = init_repo(tmp_path / "repo")
    ws = Workspace(tmp_path / "ws")
    target = str(worktree(ws, "j", "t") / "hello.txt")
    model_stub.script([call("write_file", {"file_path": target, "content": "hello\n"}),
                       call("run_shell_command", {"command": QWEN_SHOW, "description": "show it"}),
                       say("Wrote hello.txt and showed it.")])  # fmt: skip
    qwen = {"id": "qwen-main", "provider": "qwen", "command": [str(cli_bin / "qwen")],
            "args": ["--auth-type", "openai"], "env": qwen_env(tmp_path / "home", model_stub)}  # fmt: skip
    ws = workspace(tmp_path, [qwen], permissions={"allow": QWEN_RULES})
    store = run_job(ws, repo)
    assert branch_file(repo, "hello.txt") == "hello\n"
    assert qwen_showed(repo, model_stub.results_for("run_shell_command")[-1].output)
    (run,) = executions(store)
    assert (run.outcome, run.input_tokens, run.output_tokens) == ("succeeded", 360, 90)
    assert "--input-format" in run.argv and "auto-edit" in run.argv


def test_real_opencode_writes_a_file_and_runs_a_command_under_relay(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    ws = Workspace(tmp_path / "ws")
    target = str(worktree(ws, "j", "t") / "hello.txt")
    model_stub.script([call("write", {"filePath": target, "content": "hello\n"}),
                       call("bash", {"command": SHOW, "description": "show it"}),
                       say("Wrote hello.txt and showed it.")])  # fmt: skip
    opencode = {"id": "opencode-main", "provider": "opencode", "model": "stub/stub-model",
                "command": [str(cli_bin / "opencode")],
                "env": opencode_home(tmp_path / "home", model_stub)}  # fmt: skip
    store = run_job(workspace(tmp_path, [opencode]), repo)
    assert branch_file(repo, "hello.txt") == "hello\n"
    assert model_stub.results_for("bash")[-1].output == "hello\nran-ok\n"
    (run,) = executions(store)
    assert (run.outcome, run.input_tokens, run.output_tokens) == ("succeeded", 360, 90)
    assert run.cost_usd == pytest.approx(3 * (120 * 3.0 + 30 * 15.0) / 1e6)  # opencode's own
    assert run.session_id and run.session_id.startswith("ses_")


def test_real_qwen_over_acp_asks_relay_and_its_rules_answer(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """provider = "acp": relay's JSON-RPC client drives qwen --acp; the edit runs in the
    auto-edit mode relay picks for workspace-write, the command is asked and allowed."""
    repo = init_repo(tmp_path / "repo")
    ws = Workspace(tmp_path / "ws")
    target = str(worktree(ws, "j", "t") / "hello.txt")
    model_stub.script([call("write_file", {"file_path": target, "content": "hello\n"}),
                       call("run_shell_command", {"command": QWEN_SHOW}),
                       say("Wrote hello.txt and showed it.")])  # fmt: skip
    acp = {"id": "qwen-acp", "provider": "acp",
           "command": [str(cli_bin / "qwen"), "--acp", "--auth-type", "openai"],
           "env": qwen_env(tmp_path / "home", model_stub)}  # fmt: skip
    ws = workspace(tmp_path, [acp], permissions={"allow": QWEN_RULES})
    store = run_job(ws, repo)
    assert branch_file(repo, "hello.txt") == "hello\n"
    assert qwen_showed(repo, model_stub.results_for("run_shell_command")[-1].output)
    (run,) = executions(store)
    assert run.outcome == "succeeded" and run.session_id
    assert tasks(store)["j/t"].result_summary == "Wrote hello.txt and showed it."


# -- 429s ---------------------------------------------------------------------------------


def test_real_claude_on_a_spent_plan_window_swaps_to_its_other_account(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """The plan's 429 carries the reset (rate_limit_event resetsAt): claude/work is limited
    until then, and the task moves to claude/home, the same provider's other login."""
    repo = init_repo(tmp_path / "repo")
    spent = unified_limit_headers("rejected", 1.0)
    model_stub.script([rate_limited(headers=spent, times=1), say("Done on the other account.")])
    ws = workspace(tmp_path, [claude_agent(cli_bin, tmp_path / "work", model_stub, "c-work", "work"),
                              claude_agent(cli_bin, tmp_path / "home", model_stub, "c-home", "home")])  # fmt: skip
    store = run_job(ws, repo)
    task = tasks(store)["j/t"]
    assert (task.agent, task.attempt) == ("c-home", 1)
    runs = sorted(executions(store), key=lambda e: e.started_at or 0)
    assert [(e.agent, e.outcome) for e in runs] == [("c-work", "limited"), ("c-home", "succeeded")]
    limits = {(p["provider"], p["account"]): p for p in ws.status()["providers"]}
    assert limits["claude", "work"]["status"] == "limited"
    assert limits["claude", "work"]["reset_at"] == int(spent["anthropic-ratelimit-unified-reset"])
    assert (ws.path / ".relay" / "accounts" / "claude" / "work").is_dir()  # CLAUDE_CONFIG_DIR
    with store.read() as session:
        windows = {(q.key, q.window): q for q in read_quota(session, None, time.time())}
    assert windows["claude/work", "five_hour"].status == "rejected"
    assert windows["claude/work", "five_hour"].holding


def test_real_codex_on_a_usage_limit_parks_until_the_reset_it_printed(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """codex says "try again at 3:53 PM" (from the 429's reset); with no other agent the
    task parks until that minute, its attempt refunded."""
    repo = init_repo(tmp_path / "repo")
    model_stub.script([usage_limit()])
    ws = workspace(tmp_path, [codex_agent(cli_bin, tmp_path / "home", model_stub)])
    before = time.time()
    store = run_job(ws, repo, until="PARKED")
    task = tasks(store)["j/t"]
    assert (task.waiting_on_provider, task.attempt) == ("codex", 0)
    assert task.not_before is not None
    assert before + 3600 - 120 <= task.not_before <= before + 3600 + 120  # a printed minute
    (run,) = executions(store)
    assert run.outcome == "limited" and "hit your usage limit" in (run.error or "")
    limits = {p["provider"]: p for p in ws.status()["providers"]}
    assert limits["codex"]["reset_at"] == task.not_before
    with store.read() as session:  # from codex's session log: exec --json prints none
        windows = {q.window: q for q in read_quota(session, None, time.time())}
    assert (windows["five_hour"].utilization, windows["five_hour"].status) == (1.0, "rejected")
    assert (windows["seven_day"].utilization, windows["seven_day"].holding) == (0.4, False)


def test_real_claude_429_after_its_retries_swaps_the_task_to_codex(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """An API key's plain 429 (retried once with CLAUDE_CODE_MAX_RETRIES=1): claude prints no
    reset, so claude is limited for the first back-off (5 min) and codex takes the task."""
    repo = init_repo(tmp_path / "repo")
    model_stub.script([rate_limited(retry_after=1, times=2), say("Done by codex.")])
    claude = claude_agent(cli_bin, tmp_path / "claude", model_stub, "claude-main", "")
    del claude["account"], claude["env"]["CLAUDE_CODE_OAUTH_TOKEN"]
    claude["env"]["ANTHROPIC_API_KEY"] = KEY
    ws = workspace(tmp_path, [claude, codex_agent(cli_bin, tmp_path / "codex", model_stub)])
    before = time.time()
    store = run_job(ws, repo)
    assert (tasks(store)["j/t"].agent, tasks(store)["j/t"].attempt) == ("codex-main", 1)
    runs = sorted(executions(store), key=lambda e: e.started_at or 0)
    assert [(e.agent, e.outcome) for e in runs] == [("claude-main", "limited"),
                                                    ("codex-main", "succeeded")]  # fmt: skip
    assert "API Error: Request rejected (429)" in (runs[0].error or "")
    limits = {p["provider"]: p for p in ws.status()["providers"]}
    assert before + 300 - 5 <= limits["claude"]["reset_at"] <= time.time() + 300


def test_real_codex_429_after_its_retries_parks_for_the_back_off(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """codex's first "Reconnecting... 1/1 (… 429 Too Many Requests)" line is a limit: relay
    stops it there rather than sit through its retries, and parks for the first back-off."""
    repo = init_repo(tmp_path / "repo")
    model_stub.script([rate_limited(retry_after=1)])
    ws = workspace(tmp_path, [codex_agent(cli_bin, tmp_path / "home", model_stub)])
    before = time.time()
    store = run_job(ws, repo, until="PARKED")
    task = tasks(store)["j/t"]
    assert (task.waiting_on_provider, task.attempt) == ("codex", 0)
    assert task.not_before is not None and before + 295 <= task.not_before <= time.time() + 300
    (run,) = executions(store)
    assert "429 Too Many Requests" in (run.error or "")
    assert len(model_stub.main_requests()) <= 2  # stopped at its first 429, retry or not

"""The real agent CLIs run whole sessions against the scripted model stub, offline.

Each CLI gets an empty HOME and a dummy key pointed at the stub on 127.0.0.1; the script
makes the "model" write a file and run a command, and the test checks the file on disk
and the command's output in the tool result the CLI sent back to the stub. Retries are
shortened through the CLIs' own settings, and no CLI process may outlive its test.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clis import leftover_clis
from modelstub import (
    KEY,
    PATCH,
    QWEN_SHOW,
    SHOW,
    ModelStub,
    ToolCall,
    call,
    calls,
    rate_limited,
    say,
    unified_limit_headers,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(autouse=True)
def no_cli_left_behind(tmp_path: Path) -> Iterator[None]:
    started = time.time()
    yield
    deadline = time.monotonic() + 10  # a CLI's own helpers may take a moment to exit
    while (left := leftover_clis(started, tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


def git_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("real-CLI tier\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["-c", "user.name=relay", "-c", "user.email=relay@example.invalid", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def cli_env(bin_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    path = f"{bin_dir}:{os.environ.get('PATH', '')}"
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", **extra}


def run_cli(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> Run:
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{argv[0]} still running after {timeout}s:\n{out[-2000:]}\n{err[-2000:]}")
    return Run(proc.returncode, out, err)


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


def output_of(stub: ModelStub, tool: str) -> str:
    results = stub.results_for(tool)
    assert results, f"no {tool} result reached the stub: {stub.tool_results()}"
    return results[-1].output


# -- claude -------------------------------------------------------------------------------

CLAUDE = ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"]


def claude_env(bin_dir: Path, tmp_path: Path, stub: ModelStub, **extra: str) -> dict[str, str]:
    env = {"ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": KEY, **extra}
    return cli_env(bin_dir, tmp_path / "home", **env)


def test_claude_writes_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    model_stub.script(
        [
            call("Write", {"file_path": "hello.txt", "content": "hello from the stub\n"}),
            call("Bash", {"command": SHOW, "description": "show it"}),
            say("Wrote hello.txt and showed it."),
        ]
    )
    env = claude_env(cli_bin, tmp_path, model_stub)
    run = run_cli([str(cli_bin / "claude"), *CLAUDE[:1], "Write hello.txt", *CLAUDE[1:]], repo, env)
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello from the stub\n"
    assert output_of(model_stub, "Bash") == "hello from the stub\nran-ok"
    result = run.of_type("result")[-1]
    assert (result["result"], result["permission_denials"]) == (
        "Wrote hello.txt and showed it.",
        [],
    )


class Conversation:
    """claude with ``--input-format stream-json``: lines in on stdin, JSON lines out."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.seen: list[dict[str, Any]] = []

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def next_event(self, timeout: float = 60) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"claude ended early: {self.seen[-3:]}"
        event = json.loads(line)
        self.seen.append(event)
        return event

    def close(self) -> int:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


def answer(request: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    response = {"subtype": "success", "request_id": request["request_id"], "response": decision}
    return {"type": "control_response", "response": response}


def test_claude_asks_over_stdio_and_obeys_allow_and_deny(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    allowed = "python3 -c 'print(6*7)'"
    denied = "python3 -c \"open('denied.txt', 'w')\""
    model_stub.script(
        [
            calls(
                ToolCall("Bash", {"command": allowed, "description": "compute"}),
                ToolCall("Bash", {"command": denied, "description": "write"}),
            ),
            say("One ran, one was refused."),
        ]
    )
    argv = [str(cli_bin / "claude"), "-p", *CLAUDE[1:], "--input-format", "stream-json"]
    argv += ["--permission-prompt-tool", "stdio"]
    chat = Conversation(argv, repo, claude_env(cli_bin, tmp_path, model_stub))
    chat.send({"type": "user", "message": {"role": "user", "content": "Run the checks"}})
    asked: list[dict[str, Any]] = []
    try:
        while (event := chat.next_event())["type"] != "result":
            if event["type"] == "control_request":
                asked.append(event["request"])
                if event["request"]["input"]["command"] == allowed:
                    decision = {"behavior": "allow", "updatedInput": event["request"]["input"]}
                else:
                    decision = {"behavior": "deny", "message": "The operator refused: not now"}
                chat.send(answer(event, decision))
    finally:
        code = chat.close()
    assert code == 0
    assert [(a["subtype"], a["tool_name"], a["input"]["command"]) for a in asked] == [
        ("can_use_tool", "Bash", allowed),
        ("can_use_tool", "Bash", denied),
    ]
    assert all(a["decision_reason"] == "This command requires approval" for a in asked)
    results = {model_stub.issued[r.call_id].input["command"]: r for r in model_stub.tool_results()}
    assert (results[allowed].output, results[allowed].is_error) == ("42", False)
    assert (results[denied].output, results[denied].is_error) == (
        "The operator refused: not now",
        True,
    )
    assert not (repo / "denied.txt").exists()
    denials = event["permission_denials"]
    assert [d["tool_input"]["command"] for d in denials] == [denied]


def test_claude_gives_up_on_a_rate_limit_and_says_so(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    model_stub.script([rate_limited(retry_after=1)])
    env = claude_env(cli_bin, tmp_path, model_stub, CLAUDE_CODE_MAX_RETRIES="1")
    run = run_cli([str(cli_bin / "claude"), "-p", "Say hello", *CLAUDE[1:]], repo, env)
    assert run.code == 1
    retries = [e for e in run.of_type("system") if e.get("subtype") == "api_retry"]
    assert [(r["attempt"], r["max_retries"], r["error_status"]) for r in retries] == [(1, 1, 429)]
    result = run.of_type("result")[-1]
    assert (result["is_error"], result["api_error_status"]) == (True, 429)
    assert result["result"].startswith("API Error: Request rejected (429)")
    assert [r.status for r in model_stub.requests] == [429, 429]


def test_claude_on_a_subscription_reports_its_limit(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """Logged in to a plan (an OAuth token), claude reads anthropic-ratelimit-unified-*."""
    repo = git_repo(tmp_path)
    model_stub.script([rate_limited(headers=unified_limit_headers("rejected", 1.0))])
    env = {"ANTHROPIC_BASE_URL": model_stub.url, "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-stub"}
    run = run_cli(
        [str(cli_bin / "claude"), "-p", "Say hello", *CLAUDE[1:]],
        repo,
        cli_env(cli_bin, tmp_path / "home", **env),
    )
    assert run.code == 1
    [limit] = run.of_type("rate_limit_event")
    info = limit["rate_limit_info"]
    assert (info["status"], info["rateLimitType"]) == ("rejected", "five_hour")
    assert info["resetsAt"] > time.time()
    assert run.of_type("result")[-1]["result"].startswith("You've hit your limit")
    assert len(model_stub.requests) == 1  # a plan limit is not retried


# -- codex --------------------------------------------------------------------------------


def codex_env(bin_dir: Path, tmp_path: Path, stub: ModelStub) -> dict[str, str]:
    """CODEX_HOME with the stub as provider. TMPDIR must not hold CODEX_HOME: codex refuses
    to put its sandbox helper there, and every sandboxed command then fails."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".tmp").mkdir()
    (home / ".codex" / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "stub"\n\n[model_providers.stub]\n'
        f'name = "Model stub"\nbase_url = "{stub.url}/v1"\nenv_key = "STUB_API_KEY"\n'
        'wire_api = "responses"\nrequest_max_retries = 1\nstream_max_retries = 1\n'
    )
    extra = {"STUB_API_KEY": KEY, "CODEX_HOME": str(home / ".codex"), "TMPDIR": str(home / ".tmp")}
    return cli_env(bin_dir, home, **extra)


def test_codex_patches_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    model_stub.script(
        [call("apply_patch", PATCH), call("exec_command", {"cmd": SHOW}), say("Done.")]
    )
    argv = [str(cli_bin / "codex"), "exec", "--json", "--skip-git-repo-check", "--sandbox"]
    argv += ["workspace-write", "Write hello.txt, then show it"]
    run = run_cli(argv, repo, codex_env(cli_bin, tmp_path, model_stub))
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello from the stub\n"
    assert "Success. Updated the following files:\nA hello.txt" in output_of(
        model_stub, "apply_patch"
    )
    assert output_of(model_stub, "exec_command").endswith("Output:\nhello from the stub\nran-ok\n")
    items = [e["item"] for e in run.of_type("item.completed")]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert [(c["exit_code"], c["aggregated_output"]) for c in commands] == [
        (0, "hello from the stub\nran-ok\n")
    ]
    assert run.of_type("turn.completed")[-1]["usage"]["input_tokens"] == 360


# -- qwen, opencode, copilot, gemini: the chat-completions and Gemini CLIs ---------------


def test_qwen_writes_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    model_stub.script(
        [
            call("write_file", {"file_path": str(repo / "hello.txt"), "content": "hello\n"}),
            call("run_shell_command", {"command": QWEN_SHOW, "description": "show it"}),
            say("Done."),
        ]
    )
    env = {"OPENAI_BASE_URL": f"{model_stub.url}/v1", "OPENAI_API_KEY": KEY}
    env |= {"OPENAI_MODEL": "stub-model", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
    argv = [str(cli_bin / "qwen"), "-p", "Write hello.txt", "--output-format", "stream-json"]
    argv += ["--auth-type", "openai", "--approval-mode", "yolo"]
    run = run_cli(argv, repo, cli_env(cli_bin, tmp_path / "home", **env))
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello\n"
    assert (repo / "ran.txt").read_text() == "ran-ok\n"
    shell = output_of(model_stub, "run_shell_command")
    assert f"Command: {QWEN_SHOW}\n" in shell and "\nExit Code: 0\n" in shell
    assert "hello\nran-ok\n".startswith(shell.split("Output: ")[1].split("\nError: ")[0])
    result = run.of_type("result")[-1]
    assert (result["subtype"], result["result"], result["usage"]["input_tokens"]) == (
        "success",
        "Done.",
        360,
    )


def test_opencode_writes_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    home = tmp_path / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": f"{model_stub.url}/v1", "apiKey": KEY},
        "models": {"stub-model": {"name": "Stub", "cost": {"input": 3.0, "output": 15.0}}},
    }
    config = {"provider": {"stub": provider}, "model": "stub/stub-model", "autoupdate": False}
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config))
    model_stub.script(
        [
            call("write", {"filePath": str(repo / "hello.txt"), "content": "hello\n"}),
            call("bash", {"command": SHOW, "description": "show it"}),
            say("Done."),
        ]
    )
    argv = [str(cli_bin / "opencode"), "run", "--format", "json", "Write hello.txt"]
    run = run_cli(argv, repo, cli_env(cli_bin, home))
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello\n"
    assert output_of(model_stub, "bash") == "hello\nran-ok\n"
    steps = run.of_type("step_finish")
    assert [s["part"]["reason"] for s in steps] == ["tool-calls", "tool-calls", "stop"]
    assert steps[-1]["part"]["cost"] == pytest.approx((120 * 3.0 + 30 * 15.0) / 1e6)


def test_copilot_byok_patches_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    model_stub.script(
        [
            call("apply_patch", PATCH),
            call("bash", {"command": SHOW, "description": "show it"}),
            say("Done."),
        ]
    )
    env = {"COPILOT_PROVIDER_BASE_URL": f"{model_stub.url}/v1", "COPILOT_PROVIDER_API_KEY": KEY}
    env["COPILOT_MODEL"] = "gpt-5.4"
    argv = [str(cli_bin / "copilot"), "-p", "Write hello.txt", "--allow-all-tools"]
    argv += ["--output-format", "json"]
    run = run_cli(argv, repo, cli_env(cli_bin, tmp_path / "home", **env))
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello from the stub\n"
    assert output_of(model_stub, "bash").startswith("hello from the stub\nran-ok\n")
    assert run.of_type("result")[-1]["exitCode"] == 0


def test_gemini_writes_a_file_and_runs_a_command(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    model_stub.script(
        [
            call("write_file", {"file_path": str(repo / "hello.txt"), "content": "hello\n"}),
            call("run_shell_command", {"command": SHOW, "description": "show it"}),
            say("Done."),
        ]
    )
    env = {"GOOGLE_GEMINI_BASE_URL": model_stub.url, "GEMINI_API_KEY": KEY}
    argv = [str(cli_bin / "gemini"), "-p", "Write hello.txt", "--skip-trust", "-m"]
    argv += ["gemini-2.5-flash", "--output-format", "stream-json", "--approval-mode", "yolo"]
    run = run_cli(argv, repo, cli_env(cli_bin, home, **env))
    assert run.code == 0, run.err
    assert (repo / "hello.txt").read_text() == "hello\n"
    assert "hello\nran-ok" in output_of(model_stub, "run_shell_command")
    assert run.of_type("result")[-1]["status"] == "success"

"""Record what the real agent CLIs print, offline and logged out or against the model stub.

Run by hand once the real-CLI tier has installed the CLIs (its cli_bin fixture), or after
``npm ci`` in a copy of this folder given as --cli-dir:

    python tests/realcli/record_fixtures.py [--only NAME] [--cli-dir DIR]

Each scenario runs one CLI with the argv relay builds (or a deliberately broken one), with
HOME pointed at an empty temporary folder so no login on this machine leaks in, in a git
repository or a plain folder. stdout, stderr, the exit code and how long it took go to
``tests/fixtures/realcli/<scenario>/``, with machine paths and wall-clock timestamps
replaced by placeholders. Scenarios that would loop forever (codex waiting for the
network) are stopped by the recorder after ``stop_after`` seconds; meta.json says so.
Scenarios with a ``script`` run against a ModelStub (tests/realcli/modelstub.py) on
127.0.0.1; their meta.json adds what the stub saw (requests, tool results).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import install_dir
from modelstub import (
    KEY,
    PATCH,
    ModelStub,
    ToolCall,
    Turn,
    call,
    calls,
    codex_limit_headers,
    rate_limited,
    say,
    unified_limit_headers,
    usage_limit,
)

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "realcli"
PROMPT = "Reply with the single word: hi"
GONE_SESSION = "3f2a9c1e-4b7d-4e2a-9c3b-8d1e5f6a7b90"  # resumed, but never created
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d(?:[.-]\d+)?Z?")


Answer = Callable[[dict], list[dict]]


@dataclass(frozen=True)
class Scenario:
    """One recorded run. With a ``script`` the CLI talks to a ModelStub: ``@URL@``, ``@HOME@``
    and ``@CWD@`` in env values, ``files`` (written under HOME) and argv are replaced by the
    stub's base URL and the run's folders. ``stdin`` lines are sent first; ``answer`` sees
    every JSON line the CLI prints and returns the lines to send back; stdin is closed once
    ``done`` says so. ``prelude`` is a first run in the same HOME whose session id becomes
    ``@SESSION@`` in argv (for resume)."""

    name: str
    argv: tuple[str, ...]
    git: bool = True
    env: dict[str, str] = field(default_factory=dict)
    stop_after: float = 60.0
    note: str = ""
    script: tuple[Turn, ...] | None = None
    files: dict[str, str] = field(default_factory=dict)
    stdin: tuple[dict, ...] | None = None
    answer: Answer | None = None
    done: Callable[[dict], bool] | None = None
    prelude: tuple[str, ...] | None = None
    prelude_script: tuple[Turn, ...] = ()


SCENARIOS = (
    Scenario(
        "claude-not-logged-in",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
    ),
    Scenario(
        "claude-not-logged-in-plain-dir",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
        git=False,
    ),
    Scenario(
        "claude-api-key-offline",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
        env={"ANTHROPIC_API_KEY": "sk-ant-api03-relay-fixture-not-a-key"},
        stop_after=400.0,
        note="claude retries the API 10 times (about 3 minutes) and then gives up itself",
    ),
    Scenario(
        "claude-bypass-as-root",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "bypassPermissions"),
        note="recorded as root: claude refuses to skip permissions for root",
    ),
    Scenario("claude-unknown-flag", ("claude", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario(
        "codex-offline",
        ("codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
         PROMPT),
        stop_after=75.0,
        note="codex never gives up waiting for the network: stopped by the recorder",
    ),
    Scenario(
        "codex-offline-api-key",
        ("codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
         PROMPT),
        git=False,
        env={"CODEX_API_KEY": "sk-relay-fixture-not-a-key"},
        stop_after=20.0,
        note="stopped by the recorder",
    ),
    Scenario(
        "codex-not-a-git-repo",
        ("codex", "exec", "--json", "--sandbox", "workspace-write", PROMPT),
        git=False,
    ),
    Scenario("codex-unknown-flag", ("codex", "exec", "--json", "--full-auto", PROMPT)),
    Scenario(
        "gemini-not-logged-in",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust"),
    ),
    Scenario(
        "gemini-untrusted-folder",
        ("gemini", "-p", PROMPT, "--output-format", "json"),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
    ),
    Scenario(
        "gemini-api-key-offline",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust"),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
        stop_after=60.0,
        note="gemini retries with back-off for minutes: stopped by the recorder",
    ),
    Scenario("gemini-unknown-flag", ("gemini", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario(
        "gemini-bad-choice",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "everything"),
    ),
    Scenario(
        "claude-resume-gone",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits", "--resume", GONE_SESSION),
        env={"ANTHROPIC_API_KEY": "sk-ant-api03-relay-fixture-not-a-key"},
        note="a session id this HOME never saw: what a resume after the session was lost prints",
    ),
    Scenario(
        "codex-resume-gone",
        ("codex", "exec", "--json", "--sandbox", "workspace-write", "resume", GONE_SESSION,
         PROMPT),
        env={"CODEX_API_KEY": "sk-relay-fixture-not-a-key"},
        note="a thread id this HOME never saw",
    ),
    Scenario(
        "gemini-resume-gone",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust", "--resume", GONE_SESSION),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
        note="a session id this project never saw",
    ),
    Scenario("claude-auth-status", ("claude", "auth", "status")),
    Scenario("codex-login-status", ("codex", "login", "status")),
    Scenario("claude-help", ("claude", "--help")),
    Scenario("codex-help", ("codex", "--help")),
    Scenario("codex-exec-help", ("codex", "exec", "--help")),
    Scenario("codex-exec-resume-help", ("codex", "exec", "resume", "--help")),
    Scenario("gemini-help", ("gemini", "--help")),
    Scenario("claude-version", ("claude", "--version")),
    Scenario("codex-version", ("codex", "--version")),
    Scenario("gemini-version", ("gemini", "--version")),
)  # fmt: skip

STUB_KEY = KEY
CLAUDE_STUB = {"ANTHROPIC_BASE_URL": "@URL@", "ANTHROPIC_API_KEY": STUB_KEY}
CLAUDE_SUBSCRIPTION = {
    "ANTHROPIC_BASE_URL": "@URL@",
    "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-stub",
}
CLAUDE_P = (
    "claude",
    "-p",
    "Write hello.txt, then show it",
    "--output-format",
    "stream-json",
    "--verbose",
    "--permission-mode",
    "acceptEdits",
)
CLAUDE_STDIO = (
    "claude",
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--input-format",
    "stream-json",
    "--permission-prompt-tool",
    "stdio",
    "--permission-mode",
    "acceptEdits",
)
USER_LINE = {
    "type": "user",
    "message": {"role": "user", "content": "Run the checks"},
    "parent_tool_use_id": None,
    "session_id": "",
}


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": command})


def is_result(event: dict) -> bool:
    return event.get("type") == "result"


def control_answers(*decisions: dict) -> Answer:
    """Answer claude's can_use_tool requests in turn with these decisions (then deny)."""
    left = list(decisions)

    def answer(event: dict) -> list[dict]:
        request = event.get("request") or {}
        if event.get("type") != "control_request" or request.get("subtype") != "can_use_tool":
            return []
        decision = left.pop(0) if left else {"behavior": "deny", "message": "no more answers"}
        if decision.get("behavior") == "allow" and "updatedInput" not in decision:
            decision = {**decision, "updatedInput": request.get("input", {})}
        response = {"subtype": "success", "request_id": event["request_id"], "response": decision}
        return [{"type": "control_response", "response": response}]

    return answer


INITIALIZE = {
    "type": "control_request",
    "request_id": "relay-init-1",
    "request": {"subtype": "initialize", "hooks": None},
}
QUESTION = {
    "questions": [
        {
            "question": "Which database should the tests use?",
            "header": "Database",
            "multiSelect": False,
            "options": [
                {"label": "SQLite", "description": "a file"},
                {"label": "PostgreSQL", "description": "a server"},
            ],
        }
    ]
}

CLAUDE_STUB_SCENARIOS = (
    Scenario(
        "claude-stub-write-and-bash",
        CLAUDE_P,
        env=CLAUDE_STUB,
        script=(call("Write", {"file_path": "hello.txt", "content": "hello from the stub\n"}),
                calls(bash("cat hello.txt && echo ran-ok"), bash("python3 -c 'print(6*7)'")),
                say("Wrote hello.txt and showed it.")),
        note="acceptEdits: Write and a read-only Bash run; python3 is refused without asking",
    ),
    Scenario(
        "claude-stub-control-allow-deny",
        CLAUDE_STDIO,
        env=CLAUDE_STUB,
        script=(calls(bash("python3 -c 'print(6*7)'"), bash("npm test")),
                say("One ran, one was refused.")),
        stdin=(USER_LINE,),
        answer=control_answers({"behavior": "allow"},
                               {"behavior": "deny", "message": "The operator refused: not now"}),
        done=is_result,
        note="can_use_tool answered allow (python3), then deny (npm test); stdin closed after result",
    ),
    Scenario(
        "claude-stub-control-initialize",
        CLAUDE_STDIO,
        env=CLAUDE_STUB,
        script=(say("Hello."),),
        stdin=(INITIALIZE, USER_LINE),
        done=is_result,
        note="an initialize control_request first (optional: the other stdio runs skip it)",
    ),
    Scenario(
        "claude-stub-ask-user-question",
        CLAUDE_STDIO,
        env=CLAUDE_STUB,
        script=(call("AskUserQuestion", QUESTION), say("Using SQLite.")),
        stdin=(USER_LINE,),
        answer=control_answers({"behavior": "allow", "updatedInput": {
            **QUESTION, "answers": {"Which database should the tests use?": "SQLite"}}}),
        done=is_result,
        note="AskUserQuestion arrives as can_use_tool; the answer goes back in updatedInput.answers",
    ),
    Scenario(
        "claude-stub-allowed-disallowed-rules",
        (*CLAUDE_STDIO, "--allowedTools", "Bash(python3 -c:*)", "--disallowedTools",
         "Bash(npm test:*)"),
        env=CLAUDE_STUB,
        script=(calls(bash("python3 -c 'print(6*7)'"), bash("npm test"), bash("node -e 1")),
                say("Done.")),
        stdin=(USER_LINE,),
        answer=control_answers({"behavior": "deny", "message": "The operator refused node"}),
        done=is_result,
        note="rules decided by claude itself: only `node -e 1` reaches can_use_tool (denied)",
    ),
    Scenario(
        "claude-stub-resume",
        (*CLAUDE_P[:2], "What did you write?", *CLAUDE_P[3:], "--resume", "@SESSION@"),
        env=CLAUDE_STUB,
        prelude=CLAUDE_P,
        prelude_script=(call("Write", {"file_path": "hello.txt", "content": "hi\n"}),
                        say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        note="a second run with --resume SESSION: the stub sees the first run's messages again",
    ),
    Scenario(
        "claude-stub-429-two-retries",
        CLAUDE_P,
        env={**CLAUDE_STUB, "CLAUDE_CODE_MAX_RETRIES": "2"},
        script=(rate_limited(retry_after=1),),
        note="a 429 on every request; CLAUDE_CODE_MAX_RETRIES=2 shortens the retries",
    ),
    Scenario(
        "claude-stub-429-anthropic-max-retries",
        CLAUDE_P,
        env={**CLAUDE_STUB, "ANTHROPIC_MAX_RETRIES": "1"},
        script=(rate_limited(retry_after=1),),
        stop_after=400.0,
        note="does ANTHROPIC_MAX_RETRIES shorten the retries too?",
    ),
    Scenario(
        "claude-stub-accept-edits-bash",
        CLAUDE_P,
        env=CLAUDE_STUB,
        script=(calls(*(bash(c) for c in ("ls", "git status --short", "mkdir made-dir",
                                         "touch made.txt", "echo hi > redirected.txt",
                                         "rm README.md", "python3 -c 'print(6*7)'",
                                         "npm test"))),
                say("Done.")),
        note="which Bash commands acceptEdits runs without asking in -p",
    ),
    Scenario(
        "claude-stub-control-default-mode",
        (*CLAUDE_STDIO[:-1], "default"),
        env=CLAUDE_STUB,
        script=(call("Write", {"file_path": "hello.txt", "content": "hi\n"}), say("Done.")),
        stdin=(USER_LINE,),
        answer=control_answers({"behavior": "allow"}),
        done=is_result,
        note="--permission-mode default: a Write asks too (allowed here)",
    ),
    Scenario(
        "claude-stub-429-then-ok",
        CLAUDE_P,
        env=CLAUDE_STUB,
        script=(rate_limited(retry_after=1, times=1), say("Recovered.")),
        note="one 429 (retry-after 1), then an answer",
    ),
    Scenario(
        "claude-stub-429-default-retries",
        CLAUDE_P,
        env=CLAUDE_STUB,
        script=(rate_limited(retry_after=1),),
        stop_after=900.0,
        note="a 429 on every request, claude's own retry policy (retry-after: 1)",
    ),
    Scenario(
        "claude-stub-subscription-limit",
        CLAUDE_P,
        env=CLAUDE_SUBSCRIPTION,
        script=(rate_limited(retry_after=1, headers=unified_limit_headers("rejected", 1.0)),),
        note="OAuth (subscription) auth and a 429 with anthropic-ratelimit-unified-* rejected",
    ),
    Scenario(
        "claude-stub-subscription-warning",
        CLAUDE_P,
        env=CLAUDE_SUBSCRIPTION,
        script=(say("Hello.", headers=unified_limit_headers("allowed_warning", 0.92)),),
        note="OAuth auth, a 200 with unified headers past the 5h warning threshold",
    ),
    Scenario(
        "claude-stub-api-key-unified-headers",
        CLAUDE_P,
        env={**CLAUDE_STUB, "CLAUDE_CODE_MAX_RETRIES": "1"},
        script=(rate_limited(retry_after=1, headers=unified_limit_headers("rejected", 1.0)),),
        note="API-key auth ignores the unified headers: no rate_limit_event",
    ),
)  # fmt: skip


def codex_config(retries: int | None = 1) -> dict[str, str]:
    """CODEX_HOME/config.toml with the stub as provider; ``retries`` None keeps codex's own."""
    tries = (
        ""
        if retries is None
        else (f"request_max_retries = {retries}\nstream_max_retries = {retries}\n")
    )
    return {
        ".tmp/.keep": "",
        ".codex/config.toml": (
            'model = "gpt-5.5"\nmodel_provider = "stub"\n\n[model_providers.stub]\n'
            'name = "Model stub"\nbase_url = "@URL@/v1"\nenv_key = "STUB_API_KEY"\n'
            f'wire_api = "responses"\n{tries}'
        ),
    }


CODEX_ENV = {"STUB_API_KEY": STUB_KEY, "CODEX_HOME": "@HOME@/.codex", "TMPDIR": "@HOME@/.tmp"}
CODEX_EXEC = ("codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write")


def exec_command(cmd: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": cmd, "yield_time_ms": 2000})


CODEX_STUB_SCENARIOS = (
    Scenario(
        "codex-stub-patch-and-command",
        (*CODEX_EXEC, "Write hello.txt, then show it"),
        env=CODEX_ENV,
        files=codex_config(),
        script=(call("apply_patch", PATCH), call("exec_command", {"cmd": "cat hello.txt && echo ran-ok"}),
                say("Wrote hello.txt and showed it.", headers=codex_limit_headers(91.0))),
        note="apply_patch (freeform custom tool) adds a file, exec_command runs a command",
    ),
    Scenario(
        "codex-stub-outside-workspace",
        (*CODEX_EXEC, "Touch a file outside the workspace"),
        env=CODEX_ENV,
        files=codex_config(),
        script=(call("exec_command", {"cmd": "touch /relay-outside.txt && echo wrote-outside"}),
                say("Tried.")),
        note="workspace-write sandbox: a write outside the workspace; exec mode never asks",
    ),
    Scenario(
        "codex-stub-resume",
        (*CODEX_EXEC, "resume", "@SESSION@", "What did you write?"),
        env=CODEX_ENV,
        files=codex_config(),
        prelude=(*CODEX_EXEC, "Write hello.txt"),
        prelude_script=(call("apply_patch", PATCH), say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        note="codex exec resume THREAD: the stub sees the first run's items again",
    ),
    Scenario(
        "codex-stub-429-one-retry",
        (*CODEX_EXEC, "Say hello"),
        env=CODEX_ENV,
        files=codex_config(1),
        script=(rate_limited(retry_after=1),),
        stop_after=300.0,
        note="a 429 on every request; request_max_retries = stream_max_retries = 1",
    ),
    Scenario(
        "codex-stub-429-default-retries",
        (*CODEX_EXEC, "Say hello"),
        env=CODEX_ENV,
        files=codex_config(None),
        script=(rate_limited(retry_after=1),),
        stop_after=900.0,
        note="a 429 on every request, codex's own retry settings",
    ),
    Scenario(
        "codex-stub-429-then-ok",
        (*CODEX_EXEC, "Say hello"),
        env=CODEX_ENV,
        files=codex_config(1),
        script=(rate_limited(retry_after=1, times=1), say("Recovered.")),
        note="one 429 (retry-after 1), then an answer",
    ),
    Scenario(
        "codex-stub-usage-limit",
        (*CODEX_EXEC, "Say hello"),
        env=CODEX_ENV,
        files=codex_config(1),
        script=(usage_limit(),),
        stop_after=300.0,
        note="429 usage_limit_reached with x-codex-* headers at 100% (a ChatGPT plan's limit)",
    ),
)  # fmt: skip

NEW_CLI_SCENARIOS = (
    Scenario(
        "opencode-offline",
        ("opencode", "run", "--format", "json", PROMPT),
        stop_after=150.0,
        note="no provider configured, no network",
    ),
    Scenario(
        "opencode-resume-gone",
        ("opencode", "run", "--format", "json", "--session", "ses_relayfixturegone0000000", PROMPT),
        stop_after=150.0,
        note="a session id this HOME never saw",
    ),
    Scenario(
        "opencode-offline-print-logs",
        ("opencode", "run", "--format", "json", "--print-logs", "--log-level", "ERROR", PROMPT),
        stop_after=20.0,
        note="offline with relay's log flags: each failed attempt is a stderr line",
    ),
    Scenario("opencode-unknown-flag", ("opencode", "run", "--relay-bogus-flag", PROMPT)),
    Scenario("opencode-help", ("opencode", "--help")),
    Scenario("opencode-run-help", ("opencode", "run", "--help")),
    Scenario("opencode-version", ("opencode", "--version")),
    Scenario(
        "qwen-not-logged-in",
        ("qwen", "-p", PROMPT, "--output-format", "stream-json", "--approval-mode", "auto-edit"),
    ),
    Scenario(
        "qwen-resume-gone",
        ("qwen", "-p", PROMPT, "--output-format", "stream-json", "--resume", GONE_SESSION),
        note="a session id this HOME never saw",
    ),
    Scenario("qwen-unknown-flag", ("qwen", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario("qwen-help", ("qwen", "--help")),
    Scenario("qwen-version", ("qwen", "--version")),
    Scenario("copilot-not-logged-in", ("copilot", "-p", PROMPT, "--allow-all-tools")),
    Scenario(
        "copilot-not-logged-in-json",
        ("copilot", "-p", PROMPT, "--allow-all-tools", "--output-format", "json"),
    ),
    Scenario(
        "copilot-resume-gone",
        ("copilot", "-p", PROMPT, "--allow-all-tools", "--resume", GONE_SESSION),
        note="a session id this HOME never saw",
    ),
    Scenario("copilot-unknown-flag", ("copilot", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario("copilot-help", ("copilot", "--help")),
    Scenario("copilot-help-providers", ("copilot", "help", "providers")),
    Scenario("copilot-version", ("copilot", "--version")),
)  # fmt: skip

QWEN_ENV = {"OPENAI_BASE_URL": "@URL@/v1", "OPENAI_API_KEY": STUB_KEY, "OPENAI_MODEL": "stub-model"}
QWEN_P = (
    "qwen",
    "-p",
    "Write hello.txt, then show it",
    "--output-format",
    "stream-json",
    "--auth-type",
    "openai",
)
QWEN_WRITE = call(
    "write_file", {"file_path": "@CWD@/hello.txt", "content": "hello from the stub\n"}
)
QWEN_SHELL = call(
    "run_shell_command", {"command": "cat hello.txt && echo ran-ok", "description": "show it"}
)
QWEN_STDIO = (
    "qwen",
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--auth-type",
    "openai",
    "--approval-mode",
    "default",
)

QWEN_STUB_SCENARIOS = (
    Scenario(
        "qwen-stub-write-and-shell",
        (*QWEN_P, "--approval-mode", "yolo"),
        env=QWEN_ENV,
        script=(QWEN_WRITE, QWEN_SHELL, say("Wrote hello.txt and showed it.")),
        note="yolo: write_file and run_shell_command both run",
    ),
    Scenario(
        "qwen-stub-auto-edit",
        (*QWEN_P, "--approval-mode", "auto-edit"),
        env=QWEN_ENV,
        script=(QWEN_WRITE, QWEN_SHELL, say("Wrote hello.txt; the shell was refused.")),
        note="auto-edit: write_file runs, run_shell_command is declined (permission_denials)",
    ),
    Scenario(
        "qwen-stub-control-allow-deny",
        QWEN_STDIO,
        env=QWEN_ENV,
        script=(calls(ToolCall("run_shell_command", {"command": "python3 -c 'print(6*7)'"}),
                      ToolCall("run_shell_command", {"command": "touch denied.txt"})),
                say("One ran, one was refused.")),
        stdin=(INITIALIZE, USER_LINE),
        answer=control_answers({"behavior": "allow"},
                               {"behavior": "deny", "message": "The operator refused: not now"}),
        done=is_result,
        stop_after=60.0,
        note="stream-json input after an initialize control_request, approval-mode default",
    ),
    Scenario(
        "qwen-stub-resume",
        (*QWEN_P[:2], "What did you write?", *QWEN_P[3:], "--approval-mode", "yolo", "--resume",
         "@SESSION@"),
        env=QWEN_ENV,
        prelude=(*QWEN_P, "--approval-mode", "yolo"),
        prelude_script=(QWEN_WRITE, say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        note="--resume SESSION: the stub sees the first run's messages again",
    ),
    Scenario(
        "qwen-stub-429",
        (*QWEN_P, "--approval-mode", "yolo"),
        env=QWEN_ENV,
        script=(rate_limited(retry_after=1),),
        stop_after=400.0,
        note="a 429 on every request (retry-after: 1), qwen's own retry policy",
    ),
    Scenario(
        "qwen-stub-429-then-ok",
        (*QWEN_P, "--approval-mode", "yolo"),
        env=QWEN_ENV,
        script=(rate_limited(retry_after=1, times=1), say("Recovered.")),
        note="one 429 (retry-after 1), then an answer",
    ),
)  # fmt: skip


def opencode_config(permission: dict | None = None) -> dict[str, str]:
    """~/.config/opencode/opencode.json: the stub as an OpenAI-compatible provider."""
    model = {
        "name": "Stub model",
        "tool_call": True,
        "cost": {"input": 3.0, "output": 15.0},
        "limit": {"context": 200000, "output": 32000},
    }
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "stub": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Model stub",
                "options": {"baseURL": "@URL@/v1", "apiKey": STUB_KEY},
                "models": {"stub-model": model},
            }
        },
        "model": "stub/stub-model",
        "autoupdate": False,
        "share": "disabled",
        **({"permission": permission} if permission else {}),
    }
    return {".config/opencode/opencode.json": json.dumps(config, indent=2)}


OPENCODE_RUN = ("opencode", "run", "--format", "json")
OPENCODE_WRITE = call("write", {"filePath": "@CWD@/hello.txt", "content": "hello from the stub\n"})
OPENCODE_BASH = call("bash", {"command": "cat hello.txt && echo ran-ok", "description": "show it"})

OPENCODE_STUB_SCENARIOS = (
    Scenario(
        "opencode-stub-write-and-bash",
        (*OPENCODE_RUN, "Write hello.txt, then show it"),
        files=opencode_config(),
        script=(OPENCODE_WRITE, OPENCODE_BASH, say("Wrote hello.txt and showed it.")),
        note="default permissions: write and bash run without asking; cost from the config",
    ),
    Scenario(
        "opencode-stub-permission-ask",
        (*OPENCODE_RUN, "Write hello.txt, then show it"),
        files=opencode_config({"bash": "ask", "edit": "ask"}),
        script=(OPENCODE_WRITE, OPENCODE_BASH, say("Done.")),
        stop_after=90.0,
        note='permission {"bash": "ask", "edit": "ask"} in `opencode run`',
    ),
    Scenario(
        "opencode-stub-resume",
        (*OPENCODE_RUN, "--session", "@SESSION@", "What did you write?"),
        files=opencode_config(),
        prelude=(*OPENCODE_RUN, "Write hello.txt"),
        prelude_script=(OPENCODE_WRITE, say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        note="--session ID: the stub sees the first run's messages again",
    ),
    Scenario(
        "opencode-stub-429",
        (*OPENCODE_RUN, "Say hello"),
        files=opencode_config(),
        script=(rate_limited(retry_after=1),),
        stop_after=300.0,
        note="a 429 on every request (retry-after: 1)",
    ),
    Scenario(
        "opencode-stub-429-then-ok",
        (*OPENCODE_RUN, "Say hello"),
        files=opencode_config(),
        script=(rate_limited(retry_after=1, times=1), say("Recovered.")),
        note="one 429 (retry-after 1), then an answer",
    ),
)  # fmt: skip

COPILOT_ENV = {
    "COPILOT_PROVIDER_BASE_URL": "@URL@/v1",
    "COPILOT_PROVIDER_API_KEY": STUB_KEY,
    "COPILOT_MODEL": "gpt-5.4",
}
COPILOT_P = (
    "copilot",
    "-p",
    "Write hello.txt, then show it",
    "--allow-all-tools",
    "--output-format",
    "json",
)

COPILOT_STUB_SCENARIOS = (
    Scenario(
        "copilot-stub-byok-text",
        COPILOT_P,
        env=COPILOT_ENV,
        script=(say("Hello from the stub."),),
        stop_after=120.0,
        note="BYOK: COPILOT_PROVIDER_BASE_URL at the stub's chat completions, no GitHub login",
    ),
    Scenario(
        "copilot-stub-patch-and-bash",
        COPILOT_P,
        env=COPILOT_ENV,
        script=(call("apply_patch", PATCH),
                call("bash", {"command": "cat hello.txt && echo ran-ok", "description": "show it"}),
                say("Wrote hello.txt and showed it.")),
        stop_after=120.0,
        note="--allow-all-tools: apply_patch (a custom tool in chat completions) and bash run",
    ),
    Scenario(
        "copilot-stub-no-allow",
        ("copilot", "-p", "Show the file", "--output-format", "json"),
        env=COPILOT_ENV,
        script=(call("bash", {"command": "touch made.txt && echo ran-ok", "description": "touch"}),
                say("Tried.")),
        stop_after=120.0,
        note="without --allow-all-tools: what happens to a command in -p mode",
    ),
    Scenario(
        "copilot-stub-resume",
        (*COPILOT_P[:2], "What did you write?", *COPILOT_P[3:], "--resume", "@SESSION@"),
        env=COPILOT_ENV,
        prelude=COPILOT_P,
        prelude_script=(call("apply_patch", PATCH), say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        stop_after=120.0,
        note="--resume SESSION: the stub sees the first run's messages again",
    ),
    Scenario(
        "copilot-stub-429",
        COPILOT_P,
        env=COPILOT_ENV,
        script=(rate_limited(retry_after=1),),
        stop_after=400.0,
        note="a 429 on every request (retry-after: 1)",
    ),
)  # fmt: skip

GEMINI_ENV = {"GOOGLE_GEMINI_BASE_URL": "@URL@", "GEMINI_API_KEY": STUB_KEY}
GEMINI_FILES = {
    ".gemini/settings.json": json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}, indent=2
    )
}
GEMINI_P = (
    "gemini",
    "-p",
    "Write hello.txt, then show it",
    "--skip-trust",
    "-m",
    "gemini-2.5-flash",
)
GEMINI_WRITE = call(
    "write_file", {"file_path": "@CWD@/hello.txt", "content": "hello from the stub\n"}
)
GEMINI_SHELL = call(
    "run_shell_command", {"command": "cat hello.txt && echo ran-ok", "description": "show it"}
)

GEMINI_STUB_SCENARIOS = (
    Scenario(
        "gemini-stub-write-and-shell",
        (*GEMINI_P, "--output-format", "stream-json", "--approval-mode", "yolo"),
        env=GEMINI_ENV, files=GEMINI_FILES,
        script=(GEMINI_WRITE, GEMINI_SHELL, say("Wrote hello.txt and showed it.")),
        note="GOOGLE_GEMINI_BASE_URL + an API key selected in settings; -m skips the router",
    ),
    Scenario(
        "gemini-stub-auto-edit-json",
        (*GEMINI_P, "--output-format", "json", "--approval-mode", "auto_edit"),
        env=GEMINI_ENV, files=GEMINI_FILES,
        script=(GEMINI_WRITE, GEMINI_SHELL, say("Wrote hello.txt; no shell.")),
        note="auto_edit (relay's argv today): run_shell_command is not offered at all",
    ),
    Scenario(
        "gemini-stub-resume",
        (*GEMINI_P[:2], "What did you write?", *GEMINI_P[3:], "--output-format", "stream-json",
         "--approval-mode", "yolo", "--resume", "@SESSION@"),
        env=GEMINI_ENV, files=GEMINI_FILES,
        prelude=(*GEMINI_P, "--output-format", "stream-json", "--approval-mode", "yolo"),
        prelude_script=(GEMINI_WRITE, say("Wrote it.")),
        script=(say("I wrote hello.txt."),),
        note="--resume SESSION: the stub sees the first run's contents again",
    ),
    Scenario(
        "gemini-stub-429",
        (*GEMINI_P, "--output-format", "stream-json", "--approval-mode", "yolo"),
        env=GEMINI_ENV, files=GEMINI_FILES,
        script=(rate_limited(retry_after=1),),
        stop_after=400.0,
        note="a 429 RESOURCE_EXHAUSTED on every request (retry-after: 1)",
    ),
    Scenario(
        "gemini-stub-router-side-requests",
        ("gemini", "-p", "Say hello", "--skip-trust", "--output-format", "stream-json"),
        env=GEMINI_ENV, files=GEMINI_FILES,
        script=(say("Hello."),),
        stop_after=200.0,
        note="no -m: the model router asks for JSON first; the stub's plain text costs retries",
    ),
)  # fmt: skip

ACP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False},
            "terminal": False,
        },
        "clientInfo": {"name": "relay-recorder", "version": "0"},
    },
}


def acp_client(prompt: str | None = None, *decisions: str) -> tuple[Answer, Callable]:
    """An ACP client over stdio JSON-RPC: initialize, then session/new, then (with a prompt)
    session/prompt, answering session/request_permission with each decision in turn
    ("allow" picks the allow_once option, anything else reject_once)."""
    left = list(decisions)

    def answer(event: dict) -> list[dict]:
        result = event.get("result")
        if event.get("id") == 1 and isinstance(result, dict):
            params = {"cwd": "@CWD@", "mcpServers": []}
            return [{"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params}]
        if event.get("id") == 2 and isinstance(result, dict) and prompt:
            params = {
                "sessionId": result.get("sessionId"),
                "prompt": [{"type": "text", "text": prompt}],
            }
            return [{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": params}]
        if event.get("method") == "session/request_permission":
            wanted = "allow_once" if (left.pop(0) if left else "deny") == "allow" else "reject_once"
            options = event.get("params", {}).get("options", [])
            chosen = next(
                (o for o in options if o.get("kind") == wanted), options[0] if options else {}
            )
            outcome = {"outcome": "selected", "optionId": chosen.get("optionId")}
            return [{"jsonrpc": "2.0", "id": event["id"], "result": {"outcome": outcome}}]
        return []

    def done(event: dict) -> bool:
        last = 3 if prompt else 2
        return event.get("id") == last or (event.get("id") in (1, 2) and "error" in event)

    return answer, done


def acp_scenario(name: str, argv: tuple[str, ...], note: str, **kwargs: object) -> Scenario:
    prompt = kwargs.pop("prompt", None)
    decisions = kwargs.pop("decisions", ())
    answer, done = acp_client(prompt, *decisions)  # type: ignore[arg-type]
    return Scenario(
        name,
        argv,
        stdin=(ACP_INITIALIZE,),
        answer=answer,
        done=done,
        stop_after=kwargs.pop("stop_after", 60.0),
        note=note,
        **kwargs,
    )  # type: ignore[arg-type]


ACP_SCENARIOS = (
    acp_scenario("gemini-acp-logged-out", ("gemini", "--acp"),
                 "initialize and session/new, logged out"),
    acp_scenario("qwen-acp-logged-out", ("qwen", "--acp"), "initialize and session/new, logged out"),
    acp_scenario("opencode-acp-offline", ("opencode", "acp"),
                 "initialize and session/new, no provider, offline", stop_after=150.0),
    acp_scenario("copilot-acp-logged-out", ("copilot", "--acp"),
                 "initialize and session/new, logged out"),
    acp_scenario("gemini-acp-stub-permission", ("gemini", "--acp", "-m", "gemini-2.5-flash"),
                 "a prompt against the stub: the first command allowed, the second rejected",
                 env=GEMINI_ENV, files=GEMINI_FILES, prompt="Run the checks",
                 decisions=("allow", "deny"),
                 script=(call("run_shell_command", {"command": "python3 -c 'print(6*7)'"}),
                         call("run_shell_command", {"command": "touch denied.txt"}),
                         say("One ran, one was refused."))),
    acp_scenario("qwen-acp-stub-permission", ("qwen", "--acp", "--auth-type", "openai"),
                 "a prompt against the stub: the first command allowed, the second rejected",
                 env=QWEN_ENV, prompt="Run the checks", decisions=("allow", "deny"),
                 script=(calls(ToolCall("run_shell_command", {"command": "python3 -c 'print(6*7)'"}),
                               ToolCall("run_shell_command", {"command": "touch denied.txt"})),
                         say("One ran, one was refused."))),
    acp_scenario("opencode-acp-stub-permission", ("opencode", "acp"),
                 'a prompt against the stub with permission {"bash": "ask"}: allowed, then rejected',
                 files=opencode_config({"bash": "ask"}), prompt="Run the checks",
                 decisions=("allow", "deny"),
                 script=(call("bash", {"command": "python3 -c 'print(6*7)'", "description": "a"}),
                         call("bash", {"command": "touch denied.txt", "description": "b"}),
                         say("One ran, one was refused."))),
    acp_scenario("copilot-acp-stub-permission", ("copilot", "--acp"),
                 "a prompt against the stub (BYOK): the first command allowed, the second rejected",
                 env=COPILOT_ENV, prompt="Run the checks", decisions=("allow", "deny"),
                 script=(call("bash", {"command": "python3 -c 'print(6*7)'", "description": "a"}),
                         call("bash", {"command": "touch denied.txt", "description": "b"}),
                         say("One ran, one was refused."))),
)  # fmt: skip

SCENARIOS = (
    SCENARIOS + CLAUDE_STUB_SCENARIOS + CODEX_STUB_SCENARIOS + NEW_CLI_SCENARIOS
    + QWEN_STUB_SCENARIOS + OPENCODE_STUB_SCENARIOS + COPILOT_STUB_SCENARIOS
    + GEMINI_STUB_SCENARIOS + ACP_SCENARIOS
)  # fmt: skip


def _folder(root: Path, git: bool) -> Path:
    work = root / ("repo" if git else "plain")
    work.mkdir()
    (work / "README.md").write_text("fixture\n")
    if git:
        for args in (
            ["init", "-q", "-b", "main"],
            ["add", "."],
            [
                "-c",
                "user.name=relay",
                "-c",
                "user.email=relay@example.invalid",
                "commit",
                "-qm",
                "x",
            ],
        ):
            subprocess.run(["git", *args], cwd=work, check=True)
    return work


def _scrub(text: str, replacements: dict[str, str]) -> str:
    for value, placeholder in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(value, placeholder)
    return _ISO_TIME.sub("2026-01-01T00:00:00.000Z", text)


SESSION_ID = re.compile(r'"(?:session_id|thread_id|sessionID|sessionId)"\s*:\s*"([^"]+)"')


def _fill(text: str, values: dict[str, str]) -> str:
    for token, value in values.items():
        text = text.replace(token, value)
    return text


def _fill_script(turns: tuple[Turn, ...], values: dict[str, str]) -> list[Turn]:
    """The tokens in tool-call inputs too (qwen's write_file wants an absolute path)."""

    def fill(value: object) -> object:
        if isinstance(value, str):
            return _fill(value, values)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return [
        replace(t, tool_calls=tuple(ToolCall(c.name, fill(c.input)) for c in t.tool_calls))  # type: ignore[arg-type]
        for t in turns
    ]


def _converse(
    proc: subprocess.Popen, scenario: Scenario, deadline: float, values: dict[str, str]
) -> bytes:
    """Feed ``stdin``, answer what the CLI prints, close stdin when ``done``; return stdout."""
    lines: queue.Queue[bytes | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    out = b""

    def send(messages: list[dict]) -> None:
        for message in messages:
            line = _fill(json.dumps(message), values)
            proc.stdin.write((line + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    send(list(scenario.stdin or ()))
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        out += line
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or proc.stdin.closed:  # type: ignore[union-attr]
            continue
        if scenario.answer:
            send(scenario.answer(event))
        if scenario.done and scenario.done(event):
            proc.stdin.close()  # type: ignore[union-attr]
    return out


def _run(
    scenario: Scenario, argv: list[str], work: Path, env: dict[str, str], values: dict[str, str]
) -> tuple[bytes, bytes, int | None, float, bool]:
    interactive = scenario.stdin is not None
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=work, env=env, stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    stopped = False
    try:
        if interactive:
            err_chunks: list[bytes] = []
            reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()))
            reader.start()
            out = _converse(proc, scenario, started + scenario.stop_after, values)
            proc.wait(timeout=max(0.1, started + scenario.stop_after - time.monotonic()))
            reader.join(timeout=30)
            err = b"".join(err_chunks)
        else:
            out, err = proc.communicate(timeout=scenario.stop_after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        out2, err = proc.communicate(timeout=30)
        out = (out if interactive else b"") + (out2 or b"")
        stopped = True
    return out, err, proc.returncode, time.monotonic() - started, stopped


def record(scenario: Scenario, cli_dir: Path) -> dict[str, object]:
    stub = ModelStub().start() if scenario.script is not None else None
    try:
        return _record(scenario, cli_dir, stub)
    finally:
        if stub:
            stub.close()


def _record(scenario: Scenario, cli_dir: Path, stub: ModelStub | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="relay-rec-") as tmp:
        root = Path(tmp).resolve()
        home = root / "home"
        home.mkdir()
        work = _folder(root, scenario.git)
        values = {"@URL@": stub.url if stub else "", "@HOME@": str(home), "@CWD@": str(work)}
        for relative, text in scenario.files.items():
            target = home / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_fill(text, values), encoding="utf-8")
        env = {
            "PATH": f"{cli_dir / 'node_modules' / '.bin'}:{os.environ.get('PATH', '')}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            **{name: _fill(value, values) for name, value in scenario.env.items()},
        }
        prelude = None
        if scenario.prelude and stub:
            stub.script(_fill_script(scenario.prelude_script, values))
            argv = [_fill(a, values) for a in scenario.prelude]
            first, _, code, _, _ = _run(replace(scenario, stdin=None), argv, work, env, values)
            found = SESSION_ID.search(first.decode("utf-8", errors="replace"))
            values["@SESSION@"] = found.group(1) if found else "no-session-id-found"
            prelude = {"argv": list(scenario.prelude), "exit_code": code}
            prelude["session_id"] = values["@SESSION@"]
            prelude["requests"] = len(stub.requests)
        if stub:
            stub.script(_fill_script(scenario.script or (), values))
        argv = [_fill(a, values) for a in scenario.argv]
        out, err, code, seconds, stopped = _run(scenario, argv, work, env, values)
        replacements = {
            str(home): "$HOME",
            str(work): "$CWD",
            str(root): "$TMP",
            str(cli_dir): "$CLI_DIR",
            str(Path.home()): "$REAL_HOME",
            **({stub.url: "$STUB_URL", f"127.0.0.1:{stub.port}": "$STUB_HOST"} if stub else {}),
            **{
                _fill(value, values): f"${name}"
                for name, value in scenario.env.items()
                if "@" not in value
            },
        }
        target = FIXTURES / scenario.name
        target.mkdir(parents=True, exist_ok=True)
        for name, data in (("stdout.txt", out), ("stderr.txt", err)):
            text = data.decode("utf-8", errors="replace")
            (target / name).write_text(_scrub(text, replacements), encoding="utf-8")
        meta: dict[str, object] = {
            "argv": list(scenario.argv),
            "git_repo": scenario.git,
            "env": sorted(scenario.env),
            "exit_code": code,
            "seconds": round(seconds, 1),
            "stopped_by_recorder": stopped,
            "note": scenario.note,
        }
        if stub:
            meta |= _stub_meta(scenario, stub, prelude, replacements)
        (target / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return meta


def _history(body: dict) -> int:
    """How many messages/items the request carried (a resumed session carries the old ones)."""
    for key in ("messages", "input", "contents"):
        if isinstance(body.get(key), list):
            return len(body[key])
    return 0


def _stub_meta(
    scenario: Scenario, stub: ModelStub, prelude: dict | None, replacements: dict[str, str]
) -> dict[str, object]:
    """What the model stub saw: the requests (no bodies: they are large) and tool results."""
    requests = [
        {"method": r.method, "path": r.path, "api": r.api, "turn": r.turn, "status": r.status}
        | ({"history": _history(r.body)} if isinstance(r.body, dict) else {})
        for r in stub.requests
    ]
    results = [
        {"tool": r.name, "output": _scrub(r.output, replacements), "is_error": r.is_error}
        for r in stub.tool_results()
    ]
    files = {relative: _scrub(text, replacements) for relative, text in scenario.files.items()}
    stub_meta = {"requests": requests, "tool_results": results, "home_files": files}
    return {"model_stub": stub_meta, **({"prelude": prelude} if prelude else {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="scenario name (repeatable)")
    parser.add_argument("--cli-dir", type=Path, default=install_dir().resolve())
    args = parser.parse_args()
    cli_dir = args.cli_dir.resolve()
    if not shutil.which("claude", path=str(cli_dir / "node_modules" / ".bin")):
        print(f"no CLIs under {cli_dir}/node_modules: run `npm ci` there first", file=sys.stderr)
        return 1
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    for scenario in chosen:
        meta = record(scenario, cli_dir)
        print(f"{scenario.name}: exit {meta['exit_code']} in {meta['seconds']}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

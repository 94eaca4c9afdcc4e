"""Adapters end to end: fake CLIs on PATH, real processes that print a recorded stream and
log the argv and stdin relay gave them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recorded_streams import (
    NOW,
    RECORDED,
    STREAMS,
    check,
    ctx,
)

from relay_engine.agents.adapters import (
    AgentReport,
    InvocationContext,
    get_adapter,
)

FAKE = """#!{python}
import json, sys
from pathlib import Path
stdin = sys.stdin.read()
Path({log!r}).write_text(json.dumps({{"argv": sys.argv[1:], "stdin": stdin}}))
sys.stdout.buffer.write(Path({fixture!r}).read_bytes())
sys.stdout.flush()
sys.stderr.write({stderr!r})
sys.exit({code})
"""


def install_fake(tmp_path: Path, name: str, fixture: str, code: int, stderr: str = "") -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / f"{name}.argv.json"
    script = bin_dir / name
    script.write_text(
        FAKE.format(
            python=sys.executable,
            log=str(log),
            fixture=str(STREAMS / fixture),
            stderr=stderr,
            code=code,
        )
    )
    script.chmod(0o755)
    return log


def run(tmp_path: Path, provider: str, context: InvocationContext) -> tuple[AgentReport, list[str]]:
    adapter = get_adapter(provider)
    inv = adapter.build(context)
    env = {**os.environ, **inv.env, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        inv.argv,
        input=(inv.stdin_text or "").encode(),
        capture_output=True,
        env=env,
        cwd=context.cwd,
        timeout=60,
        check=False,
    )
    parser = adapter.parser()
    for start in range(0, len(proc.stdout), 7):
        parser.feed(proc.stdout[start : start + 7], NOW)
    return parser.finish(
        proc.returncode, proc.stderr.decode(errors="replace")[-4096:], NOW
    ), inv.argv


E2E = [
    ("claude", "claude_success.jsonl", 0, 0),
    ("claude", "claude_limit.jsonl", 1, 1),
    ("codex", "codex_success.jsonl", 0, 3),
    ("codex", "codex_limit.jsonl", 1, 4),
    ("gemini", "gemini_success.json", 0, 5),
    ("gemini", "gemini_429.json", 1, 6),
]


@pytest.mark.parametrize(("provider", "fixture", "code", "recorded"), E2E)
def test_end_to_end_with_fake_cli(
    tmp_path: Path, provider: str, fixture: str, code: int, recorded: int
) -> None:
    log = install_fake(tmp_path, provider, fixture, code, stderr="warning: something\n")
    prompt = 'Fix "the" parser\nline two; $(echo no shell)'
    report, argv = run(tmp_path, provider, ctx(tmp_path, prompt, resume_session_id="prev-session"))
    check(report, RECORDED[recorded][3])
    seen = json.loads(log.read_text())
    assert seen["argv"] == argv[1:]
    assert prompt in seen["argv"]
    assert "prev-session" in seen["argv"]
    assert seen["argv"][seen["argv"].index("prev-session") - 1] in ("--resume", "resume")


def test_end_to_end_long_prompt_via_stdin(tmp_path: Path) -> None:
    log = install_fake(tmp_path, "claude", "claude_success.jsonl", 0)
    prompt = "é" * 60_000  # 120 KB of UTF-8
    report, _ = run(tmp_path, "claude", ctx(tmp_path, prompt))
    assert not report.is_error
    seen = json.loads(log.read_text())
    assert seen["stdin"] == prompt
    assert prompt not in seen["argv"]

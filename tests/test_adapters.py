from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from relay_engine.agents.adapters import (
    PROVIDERS,
    AgentReport,
    InvocationContext,
    StreamParser,
    extract_json,
    get_adapter,
)
from relay_engine.agents.adapters.base import LINE_CAP

STREAMS = Path(__file__).parent / "fixtures" / "streams"
BERLIN = ZoneInfo("Europe/Berlin")
# 2025-12-31 17:00 in Berlin (UTC+1) = 16:00 UTC = 20:00 Tbilisi.
NOW = datetime(2025, 12, 31, 17, 0, tzinfo=BERLIN)
RESETS_AT = 1767225600.0  # 2026-01-01 00:00 UTC, as recorded in the Claude fixtures


def ctx(tmp_path: Path, prompt: str = "Fix the parser", **kw: object) -> InvocationContext:
    return InvocationContext(
        prompt=prompt,
        prompt_file=tmp_path / "prompt.md",
        result_file=tmp_path / "result.json",
        cwd=tmp_path,
        **kw,  # type: ignore[arg-type]
    )


def parse(
    provider: str, data: bytes, exit_code: int, sizes: list[int] | None = None
) -> AgentReport:
    parser = get_adapter(provider).parser()
    if sizes is None:
        parser.feed(data, NOW)
    else:
        pos = 0
        for size in sizes:
            parser.feed(data[pos : pos + size], NOW)
            pos += size
        parser.feed(data[pos:], NOW)
    return parser.finish(exit_code, "", NOW)


def random_sizes(total: int, seed: int, biggest: int) -> list[int]:
    rng = random.Random(seed)
    sizes: list[int] = []
    while sum(sizes) < total:
        sizes.append(rng.randint(0, biggest))
    return sizes


# (fixture, provider, exit code, expected fields)
RECORDED = [
    (
        "claude_success.jsonl",
        "claude",
        0,
        {
            "session_id": "0b8c6f2e-4c1a-4d2e-9a57-3f1d2c9e8b11",
            "input_tokens": 16 + 1940 + 37042,
            "output_tokens": 189,
            "cost_usd": 0.0421365,
            "is_error": False,
            "limit": None,
            "result_data": {
                "status": "done",
                "files": ["src/parser.py"],
                "note": "naïve split kept",
            },
            "last_progress": "All tests pass.",
        },
    ),
    (
        "claude_limit.jsonl",
        "claude",
        1,
        {
            "session_id": "7d2a1b9c-0e3f-4a5b-8c6d-1e2f3a4b5c6d",
            "result_text": "You've hit your limit · resets 8pm (Asia/Tbilisi)",
            "is_error": True,
            "limit_reset_at": RESETS_AT,
            # the reset from the rate_limit_event, the sentence the operator is shown from the CLI
            "limit_text": "You've hit your limit · resets 8pm (Asia/Tbilisi)",
        },
    ),
    (
        "claude_limit_legacy.jsonl",
        "claude",
        1,
        {
            "session_id": "c3d4e5f6-a7b8-4c9d-8e0f-112233445566",
            "is_error": True,
            "limit_reset_at": RESETS_AT,
        },
    ),
    (
        "codex_success.jsonl",
        "codex",
        0,
        {
            "session_id": "019a6b2c-7f1e-7d20-9b3a-4c5d6e7f8a90",
            "input_tokens": 24763,
            "output_tokens": 122,
            "is_error": False,
            "limit": None,
            "result_data": {"status": "done", "tests": 3},
            "last_progress": "Fixed the tokenizer — “smart quotes” are now handled.",
        },
    ),
    (
        "codex_limit.jsonl",
        "codex",
        1,
        {
            "session_id": "019a6b2d-0a1b-7c2d-8e3f-405162738495",
            "is_error": True,
            # "try again at 3:15 PM" local time: 15:15 Berlin already passed -> tomorrow.
            "limit_reset_at": datetime(2026, 1, 1, 15, 15, tzinfo=BERLIN).timestamp(),
        },
    ),
    (
        "gemini_success.json",
        "gemini",
        0,
        {
            "session_id": "4f3e2d1c-0b9a-4877-a665-544332211000",
            "input_tokens": 24939 + 1200,
            "output_tokens": 20 + 154 + 30,
            "is_error": False,
            "limit": None,
            "result_data": {"status": "done", "files": ["src/parser.py"]},
        },
    ),
    (
        "gemini_429.json",
        "gemini",
        1,
        {"is_error": True, "limit_reset_at": NOW.timestamp() + 41},
    ),
]


def check(report: AgentReport, expected: dict) -> None:
    for key, value in expected.items():
        if key == "limit_reset_at":
            assert report.limit is not None
            assert report.limit.reset_at == pytest.approx(value)
        elif key == "limit_text":
            assert report.limit is not None and report.limit.source_text == value
        else:
            assert getattr(report, key) == value, key


@pytest.mark.parametrize(("name", "provider", "code", "expected"), RECORDED)
def test_recorded_stream_whole(name: str, provider: str, code: int, expected: dict) -> None:
    report = parse(provider, (STREAMS / name).read_bytes(), code)
    check(report, expected)
    if not report.is_error:
        assert report.result_text


@pytest.mark.parametrize(("name", "provider", "code", "expected"), RECORDED)
@pytest.mark.parametrize(("seed", "biggest"), [(1, 1), (2, 3), (3, 17), (4, 200), (5, 4096)])
def test_recorded_stream_chunked_equals_whole(
    name: str, provider: str, code: int, expected: dict, seed: int, biggest: int
) -> None:
    data = (STREAMS / name).read_bytes()
    whole = parse(provider, data, code)
    chunked = parse(provider, data, code, random_sizes(len(data), seed, biggest))
    assert asdict(chunked) == asdict(whole)


def test_fixtures_contain_multibyte_text_so_splits_land_mid_character() -> None:
    for name in ("claude_success.jsonl", "codex_success.jsonl", "gemini_success.json"):
        data = (STREAMS / name).read_bytes()
        assert len(data) != len(data.decode("utf-8"))


def test_partial_report_is_visible_while_streaming() -> None:
    parser = get_adapter("claude").parser()
    lines = (STREAMS / "claude_success.jsonl").read_bytes().splitlines(keepends=True)
    parser.feed(b"".join(lines[:3]), NOW)
    partial = parser.report
    assert partial.session_id == "0b8c6f2e-4c1a-4d2e-9a57-3f1d2c9e8b11"
    assert partial.last_progress == "Read: /work/repo/src/parser.py"
    assert partial.result_text is None
    partial.session_id = "mutating a snapshot changes nothing"
    assert parser.report.session_id == "0b8c6f2e-4c1a-4d2e-9a57-3f1d2c9e8b11"


def test_limit_is_reported_as_soon_as_the_event_arrives() -> None:
    parser = get_adapter("claude").parser()
    lines = (STREAMS / "claude_limit.jsonl").read_bytes().splitlines(keepends=True)
    parser.feed(b"".join(lines[:2]), NOW)
    assert parser.report.limit is not None
    assert parser.report.limit.reset_at == RESETS_AT


def test_garbage_binary_and_invalid_json_are_tolerated() -> None:
    good = (STREAMS / "claude_success.jsonl").read_bytes()
    junk = b"\xff\xfe\x00binary\x80\n{not json\n[1,2]\n\n" + b"{" * 50 + b"\n"
    report = parse("claude", junk + good + junk, 0)
    check(report, RECORDED[0][3])


def test_overlong_line_is_dropped_without_losing_the_rest() -> None:
    good = (STREAMS / "codex_success.jsonl").read_bytes()
    huge = b'{"type":"item.completed","item":{"type":"agent_message","text":"' + b"a" * (
        LINE_CAP + 10
    )
    data = huge + b'"}}\n' + good
    whole = parse("codex", data, 0)
    chunked = parse("codex", data, 0, random_sizes(len(data), 7, 65536))
    check(whole, RECORDED[3][3])
    assert asdict(chunked) == asdict(whole)


def test_event_spliced_into_another_line_is_salvaged() -> None:
    spliced = (
        b'{"type":"assistant","message":{"content":[{"type":"text","text":"partial'
        b'{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767225600}}\n'
        b'more"}]}}\n'
    )
    report = parse("claude", spliced, 1)
    assert report.limit is not None
    assert report.limit.reset_at == RESETS_AT


def test_rejected_rate_limit_then_success_with_exit_zero_is_not_a_limit() -> None:
    lines = (STREAMS / "claude_limit.jsonl").read_bytes().splitlines(keepends=True)
    success = (STREAMS / "claude_success.jsonl").read_bytes()
    report = parse("claude", lines[1] + success, 0)
    assert not report.is_error
    assert report.limit is None


def test_claude_stream_without_result_keeps_last_text() -> None:
    lines = (STREAMS / "claude_success.jsonl").read_bytes().splitlines(keepends=True)
    report = parse("claude", b"".join(lines[:-1]), 0)
    assert report.result_data == {
        "status": "done",
        "files": ["src/parser.py"],
        "note": "naïve split kept",
    }
    killed = parse("claude", b"".join(lines[:3]), -9)
    assert killed.is_error
    assert killed.error == "exit code -9"


def test_claude_api_429_on_stderr_is_a_rate_limit() -> None:
    parser = get_adapter("claude").parser()
    stderr = 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}\n'
    report = parser.finish(1, stderr, NOW)
    assert report.is_error
    assert report.limit is not None
    assert report.limit.kind == "rate"
    assert report.limit.reset_at is None


def test_text_parser_progress_result_and_limits() -> None:
    parser = get_adapter("command", command_template=["tool"]).parser()
    parser.feed(b"\x1b[32mstep 1\x1b[0m\nstep 2\r\n\n   \nfinal: ", NOW)
    assert parser.report.last_progress == "step 2"
    report = parser.finish(0, "", NOW)
    assert report.last_progress == "final:"
    assert report.result_text is not None
    assert report.result_text.endswith("final:")
    assert report.limit is None

    parser = get_adapter("sim").parser()
    parser.feed(b'working\n{"status": "done"}\n', NOW)
    assert parser.finish(0, "", NOW).result_data == {"status": "done"}

    parser = get_adapter("command", command_template=["tool"]).parser()
    parser.feed(b"Claude AI usage limit reached|1767225600\n", NOW)
    assert parser.finish(0, "", NOW).limit is None  # exit 0 is never a limit
    parser = get_adapter("command", command_template=["tool"]).parser()
    parser.feed(b"working\n", NOW)
    report = parser.finish(2, "error: HTTP 429 Too Many Requests\n", NOW)
    assert report.is_error
    assert report.error == "error: HTTP 429 Too Many Requests"
    assert report.limit is not None
    assert report.limit.kind == "rate"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ('Plan:\n```json\n{"tasks": [1]}\n```\nthen {"tasks": [2]} done', {"tasks": [2]}),
        ('first {"a": {"b": 1}} last {"c": 2}', {"c": 2}),
        ('```json\n{"x": 1}\n```', {"x": 1}),
        ('text {"a": 1}\n```json\n[1, 2]\n```\n', [1, 2]),
        ("no json here { at all", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_json(text: str | None, expected: object) -> None:
    assert extract_json(text) == expected


# --- argv building --------------------------------------------------------------------------


def test_claude_argv(tmp_path: Path) -> None:
    adapter = get_adapter("claude")
    inv = adapter.build(
        ctx(
            tmp_path,
            "Fix it; rm -rf / && echo $HOME",
            model="opus",
            resume_session_id="s-1",
            tools=("Read", "Edit"),
        )
    )
    assert inv.argv[:3] == ["claude", "-p", "Fix it; rm -rf / && echo $HOME"]
    assert inv.argv[3:6] == ["--output-format", "stream-json", "--verbose"]
    assert inv.argv[inv.argv.index("--resume") + 1] == "s-1"
    assert inv.argv[inv.argv.index("--model") + 1] == "opus"
    assert inv.argv[-2:] == ["--allowedTools", "Read,Edit"]
    assert inv.stdin_text is None
    assert inv.env["RELAY_RESULT_FILE"] == str(tmp_path / "result.json")
    assert adapter.supports_resume


@pytest.mark.parametrize("provider", ["claude", "codex", "gemini"])
@pytest.mark.parametrize("prompt", ["x" * 150_000, "--help me"])
def test_long_or_dash_prompts_go_on_stdin(tmp_path: Path, provider: str, prompt: str) -> None:
    inv = get_adapter(provider).build(ctx(tmp_path, prompt))
    assert inv.stdin_text == prompt
    assert prompt not in inv.argv


def test_command_override_keeps_provider_arguments(tmp_path: Path) -> None:
    sim = ("python", "-m", "relay_engine.agents.sim_agent", "--format", "claude")
    inv = get_adapter("claude").build(ctx(tmp_path, command=sim))
    assert inv.argv[: len(sim)] == list(sim)
    assert inv.argv[len(sim) :][:2] == ["-p", "Fix the parser"]


def test_codex_argv(tmp_path: Path) -> None:
    adapter = get_adapter("codex")
    fresh = adapter.build(ctx(tmp_path, model="gpt-5-codex"))
    assert fresh.argv == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "--model",
        "gpt-5-codex",
        "Fix the parser",
    ]
    resumed = adapter.build(ctx(tmp_path, resume_session_id="t-9", extra_args=("-c", "x=1")))
    assert resumed.argv == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "-c",
        "x=1",
        "resume",
        "t-9",
        "Fix the parser",
    ]
    assert adapter.build(ctx(tmp_path, "-x")).argv[-1] == "-"


def test_gemini_argv(tmp_path: Path) -> None:
    inv = get_adapter("gemini").build(ctx(tmp_path, model="gemini-2.5-pro", tools=("read_file",)))
    assert inv.argv[:5] == ["gemini", "-p", "Fix the parser", "--output-format", "json"]
    assert inv.argv[inv.argv.index("--model") + 1] == "gemini-2.5-pro"
    assert inv.argv[inv.argv.index("--allowed-tools") + 1] == "read_file"
    resumed = get_adapter("gemini").build(ctx(tmp_path, resume_session_id="g-1"))
    assert resumed.argv[resumed.argv.index("--resume") + 1] == "g-1"


def test_command_template_substitution(tmp_path: Path) -> None:
    template = [
        "agent",
        "--in={prompt_file}",
        "{prompt}",
        "-o",
        "{result_file}",
        "-C",
        "{cwd}",
        "{literal}",
    ]
    adapter = get_adapter("command", command_template=template)
    inv = adapter.build(ctx(tmp_path, "a {cwd} b", extra_args=("--x",)))
    assert inv.argv == [
        "agent",
        f"--in={tmp_path / 'prompt.md'}",
        "a {cwd} b",  # placeholders inside the prompt are not expanded
        "-o",
        str(tmp_path / "result.json"),
        "-C",
        str(tmp_path),
        "{literal}",
        "--x",
    ]
    assert not adapter.supports_resume


def test_sim_argv(tmp_path: Path) -> None:
    inv = get_adapter("sim").build(ctx(tmp_path))
    assert inv.argv == [
        sys.executable,
        "-m",
        "relay_engine.agents.sim_agent",
        "--prompt-file",
        str(tmp_path / "prompt.md"),
    ]


def test_registry() -> None:
    for provider in PROVIDERS:
        adapter = get_adapter(provider, command_template=["x"])
        assert adapter.provider == provider
        assert isinstance(adapter.parser(), StreamParser)
    with pytest.raises(ValueError, match="'nope'"):
        get_adapter("nope")
    with pytest.raises(ValueError, match="command_template"):
        get_adapter("command")


# --- end to end: fake CLIs on PATH ------------------------------------------------------------

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


def test_gemini_parser_also_reads_stream_json() -> None:
    data = (STREAMS / "gemini_stream.jsonl").read_bytes()
    report = parse("gemini", data, 0)
    assert report.result_text == 'Hello world {"ok": true}'
    assert report.result_data == {"ok": True}
    assert report.session_id == "abc-123"
    assert (report.input_tokens, report.output_tokens) == (20, 10)
    assert asdict(parse("gemini", data, 0, random_sizes(len(data), 9, 5))) == asdict(report)

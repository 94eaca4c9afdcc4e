"""Adapters: argv built for each CLI, and their stream parsers fed the recorded streams whole
and in random chunks.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from recorded_streams import (
    NOW,
    RECORDED,
    RESETS_AT,
    STREAMS,
    check,
    ctx,
    parse,
    random_sizes,
)

from relay_engine.agents.adapters import (
    PROVIDERS,
    StreamParser,
    extract_json,
    get_adapter,
)
from relay_engine.agents.adapters.base import LINE_CAP


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


def test_gemini_parser_also_reads_stream_json() -> None:
    data = (STREAMS / "gemini_stream.jsonl").read_bytes()
    report = parse("gemini", data, 0)
    assert report.result_text == 'Hello world {"ok": true}'
    assert report.result_data == {"ok": True}
    assert report.session_id == "abc-123"
    assert (report.input_tokens, report.output_tokens) == (20, 10)
    assert asdict(parse("gemini", data, 0, random_sizes(len(data), 9, 5))) == asdict(report)

"""What the new CLIs really printed (tests/fixtures/realcli, recorded from opencode 1.18.33,
copilot 1.0.102, qwen 0.24.4 and the four ACP agents) fed through relay's parsers: the
failure class, the session id, tokens and cost, the result, limits, and what relay sends
back to an ACP agent.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relay_engine.agents.adapters import get_adapter
from relay_engine.agents.adapters.acp import AcpAdapter, AcpParser, mode_change, tool_of
from relay_engine.agents.adapters.base import LINE_CAP, AgentReport, InvocationContext, ToolAnswer
from relay_engine.agents.codex_rollout import rollout_readings
from relay_engine.agents.doctor import Facts, argv_problems, judge
from relay_engine.contracts.config import AgentConfig
from relay_engine.core.failures import FailureClass, auth, classify_text
from relay_engine.core.limits import detect_limit
from relay_engine.core.quota import QuotaWindow, readings_in_event, watermark

REALCLI = Path(__file__).resolve().parents[1] / "fixtures" / "realcli"
NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def recorded(name: str) -> tuple[bytes, str, int]:
    folder = REALCLI / name
    meta = json.loads((folder / "meta.json").read_text())
    return (
        (folder / "stdout.txt").read_bytes(),
        (folder / "stderr.txt").read_text(),
        meta["exit_code"],
    )


def replay(provider: str, name: str, chunk: int | None = None) -> AgentReport:
    """The fixture through a fresh parser, whole or in ``chunk``-byte pieces."""
    stdout, stderr, code = recorded(name)
    parser = get_adapter(provider).parser()
    step = chunk or len(stdout) or 1
    for start in range(0, len(stdout), step):
        parser.feed(stdout[start : start + step], NOW)
    parser.notice_stderr(stderr)
    return parser.finish(code, stderr, NOW)


@dataclass(frozen=True)
class Expect:
    failure: str | None = None
    session: str | None = None  # the session id's start
    tokens: tuple[int | None, int | None] = (None, None)
    result: str | None = None
    limit: str | None = None
    is_error: bool = False
    cost: float | None = None
    denials: int = 0


TABLE = {
    ("qwen", "qwen-stub-write-and-shell"): Expect(session="d7a887da", tokens=(360, 90),
                                                  result="Wrote hello.txt and showed it."),
    ("qwen", "qwen-stub-auto-edit"): Expect(session="c5ee5ddf", tokens=(360, 90),
                                            result="Wrote hello.txt; the shell was refused.",
                                            denials=1),
    ("qwen", "qwen-stub-resume"): Expect(session="433dab70", tokens=(480, 120),
                                         result="I wrote hello.txt."),
    ("qwen", "qwen-stub-429-then-ok"): Expect(session="545635a1", tokens=(240, 60),
                                              result="Recovered."),
    ("qwen", "qwen-not-logged-in"): Expect(failure="auth", session="ccd053cf", tokens=(0, 0),
                                           is_error=True),
    ("qwen", "qwen-resume-gone"): Expect(failure="session-gone", is_error=True),
    ("qwen", "qwen-unknown-flag"): Expect(failure="cli-rejected", is_error=True),
    ("qwen", "qwen-stub-429"): Expect(session="dc7f1c6c", limit="rate", is_error=True),
    ("opencode", "opencode-stub-write-and-bash"): Expect(
        session="ses_dcde32caeffe", tokens=(360, 90), result="Wrote hello.txt and showed it.",
        cost=0.00243),
    ("opencode", "opencode-stub-resume"): Expect(session="ses_dcde30042ffe", tokens=(120, 30),
                                                 result="I wrote hello.txt.", cost=0.00081),
    ("opencode", "opencode-stub-429-then-ok"): Expect(session="ses_dcde2e40dffe",
                                                      tokens=(120, 30), result="Recovered.",
                                                      cost=0.00081),
    ("opencode", "opencode-offline"): Expect(failure="unreachable", session="ses_dcde6915",
                                             is_error=True),
    ("opencode", "opencode-offline-print-logs"): Expect(failure="unreachable", is_error=True),
    ("opencode", "opencode-resume-gone"): Expect(failure="session-gone", is_error=True),
    ("opencode", "opencode-unknown-flag"): Expect(failure="cli-rejected", is_error=True),
    ("opencode", "opencode-stub-429"): Expect(session="ses_dcde32c89f", limit="rate",
                                              is_error=True),
    ("opencode", "opencode-stub-permission-ask"): Expect(
        session="ses_dcde31124f", tokens=(120, 30), is_error=True, cost=0.00081, denials=1),
    ("copilot", "copilot-stub-patch-and-bash"): Expect(session="3e917b78",
                                                       result="Wrote hello.txt and showed it."),
    ("copilot", "copilot-stub-resume"): Expect(session="2242cf7c", result="I wrote hello.txt."),
    ("copilot", "copilot-stub-no-allow"): Expect(session="27a85be6", result="Tried.", denials=1),
    ("copilot", "copilot-not-logged-in"): Expect(failure="auth", is_error=True),
    ("copilot", "copilot-not-logged-in-json"): Expect(failure="auth", is_error=True),
    ("copilot", "copilot-resume-gone"): Expect(failure="session-gone", is_error=True),
    ("copilot", "copilot-unknown-flag"): Expect(failure="cli-rejected", is_error=True),
    ("copilot", "copilot-stub-429"): Expect(session="ebcc7db3", limit="rate", is_error=True),
}  # fmt: skip


def check(report: AgentReport, expected: Expect) -> None:
    assert (report.failure.kind.value if report.failure else None) == expected.failure
    if expected.session is None:
        assert report.session_id is None
    else:
        assert (report.session_id or "").startswith(expected.session)
    assert (report.input_tokens, report.output_tokens) == expected.tokens
    assert report.result_text == expected.result
    assert (report.limit.kind if report.limit else None) == expected.limit
    assert report.is_error is expected.is_error
    assert (
        report.cost_usd == pytest.approx(expected.cost)
        if expected.cost
        else report.cost_usd is None
    )
    assert len(report.denials) == expected.denials


@pytest.mark.parametrize(("provider", "name"), sorted(TABLE))
def test_recorded_output_whole_and_in_random_pieces(provider: str, name: str) -> None:
    expected = TABLE[provider, name]
    check(replay(provider, name), expected)
    sizes = random.Random(name).choice([1, 7, 64, 4096])
    check(replay(provider, name, chunk=sizes), expected)


def test_the_fixes_name_what_to_do() -> None:
    assert "--auth-type" in replay("qwen", "qwen-not-logged-in").failure.fix  # type: ignore[union-attr]
    assert "copilot login" in replay("copilot", "copilot-not-logged-in").failure.fix  # type: ignore[union-attr]
    offline = replay("opencode", "opencode-offline-print-logs").failure
    assert offline is not None and offline.reason.startswith("Cannot connect to API")


@pytest.mark.parametrize(
    ("code", "said"), [(3, "exit code 3"), (1e400, "an exit code that is no number")]
)
def test_copilots_failed_result_says_the_exit_code_it_gave(code: object, said: str) -> None:
    """copilot exits 0 after a result line whose exitCode says otherwise: the failure
    names that code, not "exit 0: no error output"."""
    stdout, _, _ = recorded("copilot-stub-resume")
    lines = stdout.decode().splitlines()
    last = json.loads(lines[-1])
    assert last["type"] == "result", last
    lines[-1] = json.dumps({**last, "exitCode": code})
    parser = get_adapter("copilot").parser()
    parser.feed("\n".join(lines).encode() + b"\n", NOW)
    report = parser.finish(0, "", NOW)
    assert report.is_error and report.error == f"copilot's result line says {said}"


def test_qwen_429_is_seen_on_stderr_while_qwen_would_retry_for_minutes() -> None:
    """The stream only says system/retry; the reason is on stderr, read as qwen runs."""
    stdout, stderr, _ = recorded("qwen-stub-429")
    parser = get_adapter("qwen").parser()
    parser.feed(stdout, NOW)
    assert parser.report.limit is None
    parser.notice_stderr(stderr)
    limit = parser.report.limit
    assert (
        limit is not None and "429 This request would exceed your rate limit" in limit.source_text
    )


def test_opencode_offline_is_seen_after_two_failed_attempts_not_after_66_seconds() -> None:
    _, stderr, _ = recorded("opencode-offline-print-logs")
    lines = stderr.splitlines()
    parser = get_adapter("opencode").parser()
    parser.notice_stderr("\n".join(lines[:2]))  # models.dev, then one failed attempt
    assert parser.report.failure is None
    parser.notice_stderr("\n".join(lines[:3]))
    assert parser.report.failure is not None
    assert parser.report.failure.kind is FailureClass.UNREACHABLE


# -- argv: access mapped to each CLI's flags, checked against its recorded --help -----------

HELP = {"opencode": "opencode-run-help", "copilot": "copilot-help", "qwen": "qwen-help"}
ACCESS = {
    ("opencode", "read-only"): ["--agent", "plan"],
    ("opencode", "workspace-write"): ["--format", "json"],
    ("opencode", "full"): ["--auto"],
    ("copilot", "read-only"): ["--deny-tool=write"],
    ("copilot", "workspace-write"): ["--allow-all-tools"],
    ("copilot", "full"): ["--allow-all"],
    ("qwen", "read-only"): ["--approval-mode", "plan"],
    ("qwen", "workspace-write"): ["--approval-mode", "auto-edit"],
    ("qwen", "full"): ["--approval-mode", "yolo"],
}


def context(tmp_path: Path, **changes: Any) -> InvocationContext:
    values: dict[str, Any] = {
        "prompt": "Fix it", "prompt_file": tmp_path / "p.md", "result_file": tmp_path / "r.json",
        "cwd": tmp_path, "allow_rules": ("Bash(npm test:*)",), "deny_rules": ("Bash(rm:*)",),
    }  # fmt: skip
    return InvocationContext(**(values | changes))


@pytest.mark.parametrize(("provider", "access"), sorted(ACCESS))
def test_access_becomes_flags_the_pinned_cli_documents(
    tmp_path: Path, provider: str, access: str
) -> None:
    argv = get_adapter(provider).build(context(tmp_path, access=access)).argv
    wanted = ACCESS[provider, access]
    assert any(argv[i : i + len(wanted)] == wanted for i in range(len(argv))), argv
    folder = REALCLI / HELP[provider]  # doctor reads both streams: opencode prints to stderr
    help_text = (folder / "stdout.txt").read_text() + (folder / "stderr.txt").read_text()
    assert argv_problems(argv[1:], help_text) == []


def test_resume_and_rules_per_cli(tmp_path: Path) -> None:
    resumed = context(tmp_path, resume_session_id="S1")
    assert "--session" in get_adapter("opencode").build(resumed).argv
    assert "--resume=S1" in (copilot := get_adapter("copilot").build(resumed).argv)
    assert copilot[-2:] == ["--allow-tool=shell(npm test:*)", "--deny-tool=shell(rm:*)"]
    qwen = get_adapter("qwen").build(context(tmp_path, permission_channel=True))
    assert qwen.conversation and "--input-format" in qwen.argv
    first, user = (json.loads(line) for line in (qwen.stdin_text or "").splitlines())
    assert first["request"]["subtype"] == "initialize" and user["message"]["content"] == "Fix it"
    plain = get_adapter("qwen").build(context(tmp_path, access="full", permission_channel=True))
    assert not plain.conversation and plain.argv[1:3] == ["-p", "Fix it"]


# -- ACP ------------------------------------------------------------------------------------

RECORDED_IDS = {1: "initialize", 2: "session/new", 3: "session/prompt"}


@dataclass
class AcpRun:
    """A recorded ACP agent replayed against relay's parser: the recorder's own requests are
    matched to the ones relay sends (by method), and a request the recording lacks (a mode
    change) is answered ``{}`` the way the agents answer it."""

    cli: str
    access: str = "workspace-write"
    decisions: list[str] = field(default_factory=lambda: ["allow", "deny"])
    sent: list[dict[str, Any]] = field(default_factory=list)
    asked: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def run(self, name: str, resume: str | None = None) -> AgentReport:
        adapter = AcpAdapter()
        ctx = InvocationContext(prompt="Run the checks", prompt_file=Path("p"),
                                result_file=Path("r"), cwd=Path("/work"),
                                command=(self.cli, "--acp"), access=self.access,
                                resume_session_id=resume)  # fmt: skip
        self.sent.append(json.loads(adapter.build(ctx).stdin_text or ""))
        parser, ids = adapter.parser(), {"initialize": 1}
        stdout, stderr, code = recorded(name)
        for recorded_line in stdout.splitlines(keepends=True):
            message = json.loads(recorded_line)
            line = recorded_line
            if "method" not in message and message.get("id") in RECORDED_IDS:
                message["id"] = ids.get(RECORDED_IDS[message["id"]], -1)
                line = json.dumps(message).encode() + b"\n"
            for start in range(0, len(line), 65536):  # qwen's 560 KB line in pieces
                self._pump(adapter, parser, ids, line[start : start + 65536])
        return parser.finish(code, stderr, NOW)

    def _pump(self, adapter: AcpAdapter, parser: AcpParser, ids: dict, chunk: bytes) -> None:
        parser.feed(chunk, NOW)
        for raw in parser.take_outgoing():
            message = json.loads(raw)
            self.sent.append(message)
            if "method" in message:
                ids[message["method"]] = message["id"]
                if message["method"] not in RECORDED_IDS.values():
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                    self._pump(adapter, parser, ids, json.dumps(reply).encode() + b"\n")
        for request in parser.take_requests():
            allow = (self.decisions.pop(0) if self.decisions else "deny") == "allow"
            answer = json.loads(adapter.answer_line(request, ToolAnswer(allow, "no")))
            self.asked.append(
                (request.tool, request.input, answer["result"]["outcome"]["optionId"])
            )

    def methods(self) -> list[str]:
        return [
            m.get("method") or f"answer {m.get('error', {}).get('code', 'ok')}" for m in self.sent
        ]


ACP_ASKED = {
    "gemini": ("proceed_once", "cancel", "session/set_mode", "autoEdit", (360, 90)),
    "qwen": ("proceed_once", "cancel", "session/set_mode", "auto-edit", (120, 30)),
    "opencode": ("once", "reject", None, None, (120, 30)),
    "copilot": ("allow_once", "reject_once", None, None, (240, 60)),
}


@pytest.mark.parametrize("cli", sorted(ACP_ASKED))
def test_acp_agents_ask_and_relay_answers_with_their_own_options(cli: str) -> None:
    allow, reject, mode_method, mode, tokens = ACP_ASKED[cli]
    run = AcpRun(cli)
    report = run.run(f"{cli}-acp-stub-permission")
    assert run.asked == [
        ("Bash", {"command": "python3 -c 'print(6*7)'"}, allow),
        ("Bash", {"command": "touch denied.txt"}, reject),
    ]
    expected = ["initialize", "session/new", *([mode_method] if mode_method else []),
                "session/prompt"]  # fmt: skip
    assert [m for m in run.methods() if not m.startswith("answer")] == expected
    if mode:
        (change,) = [m for m in run.sent if m.get("method") == mode_method]
        assert change["params"]["modeId"] == mode
    prompt = next(m for m in run.sent if m.get("method") == "session/prompt")
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "Run the checks"}]
    assert (report.turns_ended, report.is_error, report.failure) == (1, False, None)
    assert report.session_id == prompt["params"]["sessionId"]
    assert (report.input_tokens, report.output_tokens) == tokens


def test_acp_results_and_costs_as_each_agent_reports_them() -> None:
    gemini = AcpRun("gemini").run("gemini-acp-stub-permission")
    assert gemini.result_text == "One ran, one was refused."
    assert AcpRun("opencode").run("opencode-acp-stub-permission").cost_usd == 0.00162
    copilot = AcpRun("copilot").run("copilot-acp-stub-permission")
    assert copilot.result_text == "Info: Operation cancelled by user"


def test_qwen_acp_long_line_and_its_own_request_do_not_stall_the_conversation() -> None:
    stdout, _, _ = recorded("qwen-acp-stub-permission")
    longest = max(len(line) for line in stdout.decode().splitlines())
    assert 500_000 < longest < LINE_CAP  # 560 KB available_commands_update: kept, not dropped
    run = AcpRun("qwen")
    run.run("qwen-acp-stub-permission")
    (drain,) = [m for m in run.sent if "error" in m]
    assert drain["id"] == 2 and drain["error"]["code"] == -32601  # craft/drainMidTurnQueue
    assert len(run.asked) == 2  # both permission requests came after the long line


@pytest.mark.parametrize(
    ("cli", "name", "reason"),
    [
        ("gemini", "gemini-acp-logged-out", "Gemini API key is missing or not configured."),
        ("qwen", "qwen-acp-logged-out", "Authentication required: Use Qwen Code CLI to authenticate first."),
        ("copilot", "copilot-acp-logged-out", "Authentication required"),
    ],
)  # fmt: skip
def test_acp_logged_out_is_auth_with_the_clis_own_fix(cli: str, name: str, reason: str) -> None:
    run = AcpRun(cli)
    report = run.run(name)
    assert report.failure is not None and report.failure.kind is FailureClass.AUTH
    assert report.failure.reason == reason
    assert report.failure.fix == auth(cli, reason).fix
    assert report.turns_ended == 1  # the conversation ends: relay closes stdin
    assert "session/prompt" not in run.methods()


def test_acp_resume_loads_the_session_and_an_unknown_one_is_gone() -> None:
    run = AcpRun("opencode")
    run.run("opencode-acp-offline", resume="ses_before")
    assert run.sent[1]["method"] == "session/load"
    assert run.sent[1]["params"]["sessionId"] == "ses_before"
    parser = AcpAdapter().parser()
    parser._pending[2] = "session/load"  # what it sent after initialize
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Session missing"}}
    parser.feed(json.dumps(error).encode() + b"\n", NOW)
    assert parser.report.failure is not None
    assert parser.report.failure.kind is FailureClass.SESSION_GONE


@pytest.mark.parametrize(
    ("cli", "access", "wanted"),
    [
        ("gemini", "read-only", ("session/set_mode", {"modeId": "plan"})),
        ("gemini", "full", ("session/set_mode", {"modeId": "yolo"})),
        ("qwen", "workspace-write", ("session/set_mode", {"modeId": "auto-edit"})),
        ("opencode", "read-only", ("session/set_config_option", {"configId": "mode", "value": "plan"})),
        ("opencode", "workspace-write", None),
        ("copilot", "full", ("session/set_config_option", {"configId": "allow_all", "value": "on"})),
    ],
)  # fmt: skip
def test_access_picks_each_acp_agents_own_mode(cli: str, access: str, wanted: Any) -> None:
    stdout, _, _ = recorded(f"{cli}-acp-stub-permission")
    new = next(
        m["result"]
        for m in map(json.loads, stdout.splitlines())
        if m.get("id") == 2 and "result" in m
    )
    assert mode_change(new, access) == wanted


def test_tool_calls_get_relays_names_so_its_rules_match() -> None:
    edit = {"kind": "edit", "title": "hello.txt", "locations": [{"path": "/w/hello.txt"}]}
    assert tool_of(edit) == ("Edit", {"file_path": "/w/hello.txt"})
    gemini = {"kind": "execute", "title": "npm test"}  # gemini sends no rawInput
    assert tool_of(gemini) == ("Bash", {"command": "npm test"})


# -- quota windows --------------------------------------------------------------------------


def test_claude_subscription_warning_becomes_a_five_hour_window() -> None:
    report = replay("claude", "claude-stub-subscription-warning")
    (reading,) = report.windows
    assert (reading.window, reading.status, reading.utilization, reading.threshold) == (
        "five_hour", "allowed_warning", 0.92, 0.9,
    )  # fmt: skip
    assert reading.resets_at == 1796140332
    window = QuotaWindow("claude/work", reading, NOW.timestamp())
    assert watermark([window], 0.95, NOW.timestamp()) is None  # 92% is below 95%
    held = watermark([window], 0.9, NOW.timestamp())
    assert held is not None and held.until == 1796140332
    assert held.reason.startswith("claude/work at 92% of its five-hour window until ")


def test_codex_rate_limits_come_from_its_session_log() -> None:
    folder = REALCLI / "codex-stub-rollout-rate-limits"
    meta = json.loads((folder / "meta.json").read_text())
    assert "rate_limits" not in (folder / "stdout.txt").read_text()  # exec --json: none
    readings = rollout_readings({"CODEX_HOME": str(folder / "codex-home")}, meta["thread_id"])
    assert [(r.window, r.utilization, r.window_minutes) for r in readings] == [
        ("five_hour", 0.91, 300), ("seven_day", 0.40, 10080),
    ]  # fmt: skip
    assert all(r.resets_at and r.resets_at > 1.79e9 for r in readings)


def test_windows_past_their_reset_or_under_the_mark_hold_nothing() -> None:
    info = {"status": "rejected", "resetsAt": 1000, "rateLimitType": "seven_day"}
    (spent,) = readings_in_event({"type": "rate_limit_event", "rate_limit_info": info})
    assert spent.utilization == 1.0
    assert watermark([QuotaWindow("claude", spent, 0)], 0.95, 999) is not None
    assert watermark([QuotaWindow("claude", spent, 0)], 0.95, 1000) is None


# -- gemini: an account its tier no longer serves --------------------------------------------


# Not recorded (no such account here): the texts follow gemini-cli 0.61.0's IneligibleTierError,
# whose message is the server's reason, and the balance/plan refusals the providers document.
@pytest.mark.parametrize(
    "text",
    [
        "IneligibleTierError: Your Google One AI plan can no longer use Gemini CLI. "
        "Please migrate to the Antigravity suite.",
        "Your credit balance is too low to access the Anthropic API.",
        "Your plan has changed: this model is no longer included.",
    ],
)
def test_an_account_that_refuses_the_work_holds_like_a_login(text: str) -> None:
    failure = classify_text("gemini", text)
    assert failure is not None and failure.kind is FailureClass.AUTH
    assert "relay agents reset" in failure.fix and failure.fix != auth("gemini", "x").fix


# -- relay doctor ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "fixture"),
    [
        ({"id": "q", "provider": "qwen", "tools": ("read_file",)}, "qwen-help"),
        ({"id": "o", "provider": "opencode", "model": "stub/m"}, "opencode-run-help"),
        ({"id": "c", "provider": "copilot", "access": "full"}, "copilot-help"),
        ({"id": "a", "provider": "acp", "command": ("gemini", "--acp")}, "gemini-help"),
        ({"id": "b", "provider": "acp", "command": ("qwen", "--acp")}, "qwen-help"),
        ({"id": "p", "provider": "acp", "command": ("copilot", "--acp")}, "copilot-help"),
    ],
)
def test_doctor_finds_every_flag_relay_passes_in_the_pinned_help(
    agent: dict[str, Any], fixture: str
) -> None:
    config = AgentConfig(**agent)
    folder = REALCLI / fixture
    help_text = (folder / "stdout.txt").read_text() + (folder / "stderr.txt").read_text()
    row = judge(config, Facts(config.provider, True, "v", help_text, True), is_root=True)
    assert row.problems == ()


def test_doctor_says_how_to_log_in_to_a_named_account() -> None:
    agent = AgentConfig(id="c", provider="codex", account="work")
    home = (("CODEX_HOME", "/ws/.relay/accounts/codex/work"),)
    row = judge(agent, Facts("codex", True, "v", None, False, "", frozenset(), home), False)
    assert row.problems == ("not logged in",) and row.account == "work"
    assert row.fix.startswith("for account work, with CODEX_HOME=/ws/.relay/accounts/codex/work:")
    assert "codex login" in row.fix


def test_a_help_text_that_mentions_429_is_no_limit() -> None:
    """qwen's --help (printed for an unknown flag) says "capacity errors (429/503/529)"."""
    assert detect_limit("Fallback model(s) for capacity errors (429/503/529)", "qwen", NOW) is None
    assert detect_limit("[API Error: 429 This request would exceed", "qwen", NOW) is not None
    assert detect_limit('{"statusCode": 429}', "opencode", NOW) is not None

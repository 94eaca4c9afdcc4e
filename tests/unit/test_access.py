"""`access` levels become each CLI's own flags, and every flag relay passes is one the
pinned CLI versions document (checked against their recorded --help)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay_engine.agents.doctor import Facts, argv_problems, judge, sample_argv
from relay_engine.contracts.config import AgentConfig, ConfigError, parse_config

HELP = Path(__file__).parents[1] / "fixtures" / "realcli"
HELP_FIXTURE = {"claude": "claude-help", "codex": "codex-exec-help", "gemini": "gemini-help"}

EXPECTED = {
    ("claude", "read-only"): ["--permission-mode", "plan"],
    ("claude", "workspace-write"): ["--permission-mode", "acceptEdits"],
    ("claude", "full"): ["--permission-mode", "bypassPermissions"],
    ("codex", "read-only"): ["--skip-git-repo-check", "--sandbox", "read-only"],
    ("codex", "workspace-write"): ["--skip-git-repo-check", "--sandbox", "workspace-write"],
    ("codex", "full"): ["--skip-git-repo-check", "--sandbox", "danger-full-access"],
    ("gemini", "read-only"): ["--approval-mode", "plan", "--skip-trust"],
    ("gemini", "workspace-write"): ["--approval-mode", "auto_edit", "--skip-trust"],
    ("gemini", "full"): ["--approval-mode", "yolo", "--skip-trust"],
}


def help_text(provider: str) -> str:
    return (HELP / HELP_FIXTURE[provider] / "stdout.txt").read_text()


def contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv)))


@pytest.mark.parametrize(("provider", "access"), sorted(EXPECTED))
def test_access_maps_to_flags_the_recorded_cli_version_documents(
    provider: str, access: str
) -> None:
    agent = AgentConfig(id="a", provider=provider, access=access, model="m", tools=("Read",))  # type: ignore[arg-type]
    argv = sample_argv(agent)
    assert contains(argv, EXPECTED[provider, access])
    # claude's --help hides the permission channel's flag; relay doctor tries it instead
    # (tests/realcli/test_real_claude_asks.py runs the real CLI with it)
    hidden = frozenset({"--permission-prompt-tool"}) if provider == "claude" else frozenset()
    assert argv_problems(argv[1:], help_text(provider), accepted=hidden) == []


def test_default_access_lets_every_cli_write() -> None:
    agent = AgentConfig(id="c", provider="codex")
    assert agent.access == "workspace-write"
    assert contains(sample_argv(agent), ["--sandbox", "workspace-write"])


def test_args_are_appended_verbatim_and_checked_against_help() -> None:
    agent = AgentConfig(id="c", provider="codex", args=("--full-auto",))
    argv = sample_argv(agent)
    assert "--full-auto" in argv
    # codex 0.171.0 has no --full-auto any more: relay says so before a task finds out
    assert argv_problems(argv[1:], help_text("codex")) == [
        "--full-auto is not in this version's --help"
    ]


def test_a_choice_the_version_does_not_offer_is_a_problem() -> None:
    argv = ["gemini", "-p", "x", "--approval-mode", "everything"]
    assert argv_problems(argv[1:], help_text("gemini")) == [
        "--approval-mode everything is not a choice this version offers"
    ]


def test_config_rejects_an_unknown_access_level(tmp_path: Path) -> None:
    text = '[[agents]]\nid = "c"\nprovider = "codex"\naccess = "root"\n'
    with pytest.raises(ConfigError) as raised:
        parse_config(text, tmp_path / "relay.toml")
    assert "agents[0] (c).access" in str(raised.value)


def test_codex_tools_are_a_config_warning_not_silence(tmp_path: Path) -> None:
    text = '[[agents]]\nid = "cx"\nprovider = "codex"\ntools = ["Read"]\n'
    config = parse_config(text, tmp_path / "relay.toml")
    assert config.warnings() == [
        'agent cx: codex has no tool allow-list flag; `tools` is ignored (use access = "read-only" to stop it writing)'
    ]


def test_doctor_verdicts() -> None:
    claude = AgentConfig(id="claude-main", provider="claude")
    hidden = frozenset({"--permission-prompt-tool"})  # taken, though --help does not list it
    ok = judge(
        claude,
        Facts("claude", True, "2.1.197 (Claude Code)", help_text("claude"), True, "", hidden),
        is_root=False,
    )
    assert judge(
        claude, Facts("claude", True, "2.1.197", help_text("claude"), logged_in=True), False
    ).problems == ("--permission-prompt-tool is not in this version's --help",)
    assert ok.ok and ok.argv == "--permission-mode acceptEdits"
    logged_out = judge(
        claude, Facts("claude", True, "2.1.197", help_text("claude"), False, "", hidden), False
    )
    assert logged_out.problems == ("not logged in",) and "/login" in logged_out.fix
    missing = judge(AgentConfig(id="g", provider="gemini"), Facts("gemini", False), False)
    assert missing.problems == ("gemini not found",)
    assert "npm install -g @google/gemini-cli" in missing.fix
    root = judge(
        AgentConfig(id="c", provider="claude", access="full"),
        Facts("claude", True, "2.1.197", help_text("claude"), logged_in=True),
        is_root=True,
    )
    assert not root.ok and "root" in root.problems[0]


def test_recorded_login_status_outputs_are_what_doctor_reads() -> None:
    status = json.loads((HELP / "claude-auth-status" / "stdout.txt").read_text())
    assert status["loggedIn"] is False
    codex = HELP / "codex-login-status"
    assert (codex / "stderr.txt").read_text().splitlines()[-1] == "Not logged in"
    assert json.loads((codex / "meta.json").read_text())["exit_code"] == 1  # what doctor tests

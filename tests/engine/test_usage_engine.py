"""Spend: recorded CLI streams put tokens, model and cost on executions; rollups and JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import Workspace, executions, job_toml, run_until_idle

from relay_engine.core.usage import GROUPINGS

STREAMS = Path(__file__).parents[1] / "fixtures" / "streams"
REPLAY = "import sys; sys.stdout.write(open(sys.argv[1], encoding='utf-8').read())"


def replay_agent(agent_id: str, provider: str, fixture: str, **extra: object) -> dict:
    """A real process that prints a recorded stream of the real CLI, parsed as that CLI."""
    command = [sys.executable, "-c", REPLAY, str(STREAMS / fixture)]
    return {
        "id": agent_id,
        "provider": provider,
        "roles": ["implementer"],
        "command": command,
        **extra,
    }


def run_one_task_per_agent(ws: Workspace, agents: list[dict]) -> dict[str, object]:
    ws.configure(agents=agents)
    tasks = [{"id": a["id"], "input": "x", "agent": a["id"]} for a in agents]
    ws.submit(job_toml("spend", tasks))
    run_until_idle(ws.engine())
    return {e.agent: e for e in executions(ws.store())}


def test_recorded_streams_put_tokens_model_and_cost_on_the_execution(workspace: Workspace) -> None:
    runs = run_one_task_per_agent(
        workspace,
        [
            replay_agent("claude-a", "claude", "claude_success.jsonl"),
            replay_agent("codex-a", "codex", "codex_success.jsonl", model="gpt-5-codex"),
            replay_agent("gemini-a", "gemini", "gemini_success.json"),
        ],
    )
    claude, codex, gemini = runs["claude-a"], runs["codex-a"], runs["gemini-a"]
    assert claude.cost_usd == pytest.approx(0.0421365)  # Claude Code's own figure
    assert not claude.cost_estimated
    assert claude.model == "claude-sonnet-4-5-20250929"
    assert (claude.input_tokens, claude.cached_tokens, claude.output_tokens) == (38998, 37042, 189)
    assert (codex.input_tokens, codex.cached_tokens, codex.output_tokens) == (24763, 24448, 122)
    assert codex.model == "gpt-5-codex"  # codex names no model: the agent's config does
    assert codex.cost_estimated
    expected = (315 * 1.25 + 24448 * 0.125 + 122 * 10.0) / 1e6
    assert codex.cost_usd == pytest.approx(expected)
    assert gemini.model == "gemini-2.5-pro"
    assert gemini.cost_estimated
    assert gemini.cached_tokens == 21263
    assert gemini.cost_usd and gemini.cost_usd > 0


@pytest.mark.slow
def test_usage_cli_rolls_up_by_every_grouping(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    run_one_task_per_agent(
        ws,
        [
            replay_agent("claude-a", "claude", "claude_success.jsonl"),
            replay_agent("codex-a", "codex", "codex_success.jsonl"),  # no model: unpriced
        ],
    )
    for by in GROUPINGS:
        result = ws.cli("usage", "--by", by, "--json")
        assert result.returncode == 0, result.stderr
        body = json.loads(result.stdout)
        assert body["by"] == by
        assert body["total"]["executions"] == 2
        assert body["total"]["cost_usd"] == pytest.approx(0.0421365, abs=1e-6)
        assert body["total"]["unpriced_executions"] == 1
        assert sum(r["executions"] for r in body["rows"]) == 2
    by_agent = json.loads(ws.cli("usage", "--by", "agent", "--json").stdout)
    assert [r["key"] for r in by_agent["rows"]] == ["claude-a", "codex-a"]
    table = ws.cli("usage", "--by", "provider")
    assert "claude" in table.stdout and "without a price" in table.stdout
    status = ws.status()
    (job,) = status["jobs"]
    assert job["spend"]["cost_usd"] == pytest.approx(0.0421365, abs=1e-6)
    spend = {t["id"]: t["spend"] for t in status["tasks"]}
    assert spend["codex-a"]["input_tokens"] == 24763
    assert spend["claude-a"]["estimated"] is False


@pytest.mark.slow
def test_since_filters_and_rejects_a_bad_date(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    run_one_task_per_agent(ws, [replay_agent("claude-a", "claude", "claude_success.jsonl")])
    future = json.loads(ws.cli("usage", "--since", "2999-01-01", "--json").stdout)
    assert future["total"]["executions"] == 0
    bad = ws.cli("usage", "--since", "yesterday")
    assert bad.returncode == 2
    assert "--since 'yesterday': expected a date" in bad.stderr

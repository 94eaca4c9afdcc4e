"""Spend: recorded CLI streams put tokens, model and cost on executions; rollups and JSON."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import Workspace, executions, job_toml, run_until_idle

from relay_engine.contracts.pricing import DEFAULT_PRICES, Price, execution_spend, price_for
from relay_engine.core.usage import GROUPINGS, UsageRecord, rollup, total

STREAMS = Path(__file__).parent / "fixtures" / "streams"
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


def test_since_filters_and_rejects_a_bad_date(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    run_one_task_per_agent(ws, [replay_agent("claude-a", "claude", "claude_success.jsonl")])
    future = json.loads(ws.cli("usage", "--since", "2999-01-01", "--json").stdout)
    assert future["total"]["executions"] == 0
    bad = ws.cli("usage", "--since", "yesterday")
    assert bad.returncode == 2
    assert "--since 'yesterday': expected a date" in bad.stderr


def record(at: str, cost: float | None, **extra: object) -> UsageRecord:
    stamp = datetime.fromisoformat(at).replace(tzinfo=UTC).timestamp()
    fields = {"job_id": "j", "task_key": "j/t", "agent": "a", "provider": "p", "model": "m"}
    return UsageRecord(**(fields | extra), at=stamp, cost_usd=cost, input_tokens=10)  # type: ignore[arg-type]


def test_rollup_by_day_uses_the_given_zone_and_orders_by_date() -> None:
    records = [
        record("2026-11-30T23:30:00", 1.0),
        record("2026-12-01T00:30:00", 2.0, estimated=True),
        record("2026-11-29T12:00:00", None),
    ]
    rows = rollup(records, "day", UTC)
    assert [(r.key, r.cost_usd, r.unpriced) for r in rows] == [
        ("2026-11-29", 0.0, 1),
        ("2026-11-30", 1.0, 0),
        ("2026-12-01", 2.0, 0),
    ]
    overall = total(rows)
    assert (overall.cost_usd, overall.estimated, overall.unpriced) == (3.0, True, 1)


def test_rollup_by_job_sorts_by_cost() -> None:
    records = [
        record("2026-11-30T10:00:00", 0.5, job_id="cheap"),
        record("2026-11-30T10:00:00", 3.0, job_id="dear"),
    ]
    assert [r.key for r in rollup(records, "job")] == ["dear", "cheap"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
        ("gpt-5-codex", "gpt-5-codex"),
        ("gpt-5-mini-2025", "gpt-5-mini"),
        ("GPT-5", "gpt-5"),
        ("llama-3", None),
        (None, None),
    ],
)
def test_prices_match_the_longest_model_prefix(model: str | None, expected: str | None) -> None:
    price = price_for(model, DEFAULT_PRICES)
    assert price == (DEFAULT_PRICES[expected] if expected else None)


def test_spend_prefers_the_clis_own_cost_and_never_charges_cached_tokens_twice() -> None:
    prices = {"m": Price(input=2.0, output=10.0, cached=0.5)}
    own = execution_spend(
        reported_cost=0.25,
        model="m",
        input_tokens=10,
        output_tokens=1,
        cached_tokens=0,
        prices=prices,
    )
    assert (own.cost_usd, own.estimated) == (0.25, False)
    estimate = execution_spend(
        reported_cost=None,
        model="m",
        input_tokens=1_000_000,
        output_tokens=100_000,
        cached_tokens=600_000,
        prices=prices,
    )
    assert estimate.estimated
    assert estimate.cost_usd == pytest.approx(0.4 * 2.0 + 0.6 * 0.5 + 0.1 * 10.0)
    unknown = execution_spend(
        reported_cost=None,
        model="x",
        input_tokens=5,
        output_tokens=5,
        cached_tokens=None,
        prices=prices,
    )
    assert (unknown.cost_usd, unknown.estimated) == (None, False)


def test_pricing_section_overrides_and_extends_the_table(tmp_path: Path) -> None:
    from relay_engine.contracts.config import parse_config

    text = '[[agents]]\nid = "a"\nprovider = "sim"\n[pricing."gpt-5-codex"]\ninput = 2.0\noutput = 20.0\n[pricing.llama]\ninput = 0.1\noutput = 0.2\ncached = 0\n'
    prices = parse_config(text, tmp_path / "relay.toml").prices
    assert prices["gpt-5-codex"] == Price(2.0, 20.0, 2.0)  # no cached price: cached at input price
    assert prices["llama"] == Price(0.1, 0.2, 0.0)
    assert prices["claude-sonnet-4"] == DEFAULT_PRICES["claude-sonnet-4"]

"""Spend rollups and prices: by day in a zone, by job by cost, the longest model prefix, the
CLI's own figure before an estimate, and the ``[pricing]`` table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from relay_engine.contracts.pricing import DEFAULT_PRICES, Price, execution_spend, price_for
from relay_engine.core.usage import UsageRecord, rollup, total


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

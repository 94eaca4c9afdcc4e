"""Where a spend stands against its cap: ok, warning, exhausted, or no cap at all."""

from __future__ import annotations

import pytest

from relay_engine.core.budgets import Cap, Spend, judge


@pytest.mark.parametrize(
    ("spend", "cap", "level", "text"),
    [
        (Spend(0.5, 0), Cap(usd=1.0), "ok", "$0.50 of $1.00"),
        (Spend(0.8, 0), Cap(usd=1.0), "warning", "$0.80 of $1.00"),
        (Spend(5.02, 0), Cap(usd=5.0), "exhausted", "budget exhausted: $5.02 of $5.00"),
        (Spend(0.1, 900), Cap(usd=1.0, tokens=1000), "warning", "900 of 1,000 tokens"),
        (Spend(0, 0), Cap(), "none", ""),
        (Spend(0, 0), Cap(usd=0.0), "exhausted", "budget exhausted: $0.00 of $0.00"),
    ],
)
def test_judge(spend: Spend, cap: Cap, level: str, text: str) -> None:
    state = judge(spend, cap, 0.8)
    assert (state.level, state.text) == (level, text)

"""What an execution cost: the CLI's own figure, else an estimate from a price table.

Pure. Claude Code reports ``total_cost_usd`` itself; Codex and Gemini report only tokens,
so their cost is estimated from per-model prices (USD per million tokens) and always
shown as *estimated*. The shipped prices can be overridden or extended in ``[pricing]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRICES_TAKEN = "2025-10-01"
"""When the shipped prices were read off the providers' public price pages."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached: float


DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4": Price(15.0, 75.0, 1.50),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30),
    "claude-haiku-4": Price(1.0, 5.0, 0.10),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-codex": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
}
"""Keys are model-name prefixes: ``claude-sonnet-4-5-20250929`` is priced as ``claude-sonnet-4``."""


@dataclass(frozen=True)
class Spend:
    cost_usd: float | None
    estimated: bool


def price_for(model: str | None, prices: Mapping[str, Price]) -> Price | None:
    """The price of the longest table entry that ``model`` starts with."""
    if not model:
        return None
    name = model.lower()
    matches = [key for key in prices if name.startswith(key.lower())]
    return prices[max(matches, key=len)] if matches else None


def execution_spend(
    *,
    reported_cost: float | None,
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None,
    prices: Mapping[str, Price],
) -> Spend:
    """The CLI's figure when it gave one; an estimate when the model has a price; else None."""
    if reported_cost is not None:
        return Spend(reported_cost, estimated=False)
    price = price_for(model, prices)
    if price is None or (input_tokens is None and output_tokens is None):
        return Spend(None, estimated=False)
    cached = min(cached_tokens or 0, input_tokens or 0)
    fresh = (input_tokens or 0) - cached
    cost = (fresh * price.input + cached * price.cached + (output_tokens or 0) * price.output) / 1e6
    return Spend(cost, estimated=True)


def merged_prices(overrides: Mapping[str, Price]) -> dict[str, Price]:
    return {**DEFAULT_PRICES, **overrides}

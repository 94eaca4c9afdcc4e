"""Budgets: a job's spend cap, and an agent's or provider's spend per day.

An unattended build → review → fix loop that does not converge keeps paying; a budget
is the operator's stop. At ``budget_warn_at`` (80 % by default) relay says so once; at
100 % nothing new of that job (or on that agent or provider) starts: running executions
finish, the rest PARKS with "budget exhausted: $5.02 of $5.00" until the operator raises
the budget (``relay budget JOB --add 5``) or, for daily budgets, the local day rolls over.

Pure: where a spend stands against its cap, and which caps are spent. The spend itself is
summed in SQL by :mod:`relay_engine.store.spend`; parking, announcing and raising are
:mod:`relay_engine.ops.budgets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

BUDGET = "budget"  # what a task parked on a budget waits on


@dataclass(frozen=True)
class Spend:
    cost_usd: float = 0.0
    tokens: int = 0


@dataclass(frozen=True)
class Cap:
    usd: float | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class BudgetState:
    level: str  # "none" | "ok" | "warning" | "exhausted"
    text: str  # "$4.10 of $5.00", or "budget exhausted: $5.02 of $5.00"
    fraction: float  # spent / budget, the highest of dollars and tokens


def judge(spend: Spend, cap: Cap, warn_at: float) -> BudgetState:
    """Where a spend stands against its cap; dollars and tokens each count."""
    parts = []
    if cap.usd is not None:
        parts.append(
            (
                spend.cost_usd / cap.usd if cap.usd else 1.0,
                f"${spend.cost_usd:,.2f} of ${cap.usd:,.2f}",
            )
        )
    if cap.tokens is not None:
        used = spend.tokens / cap.tokens if cap.tokens else 1.0
        parts.append((used, f"{spend.tokens:,} of {cap.tokens:,} tokens"))
    if not parts:
        return BudgetState("none", "", 0.0)
    fraction, text = max(parts, key=lambda part: part[0])
    if fraction >= 1.0:
        return BudgetState("exhausted", f"budget exhausted: {text}", fraction)
    return BudgetState("warning" if fraction >= warn_at else "ok", text, fraction)


def next_local_midnight(now: float) -> float:
    local = datetime.fromtimestamp(now).astimezone()
    return (
        (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    )


def local_midnight(now: float) -> float:
    local = datetime.fromtimestamp(now).astimezone()
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


@dataclass(frozen=True)
class Hold:
    """Why new work may not start now, and until when (None: until the operator acts)."""

    reason: str
    until: float | None


def spent_caps(
    spent: Mapping[str, float], caps: Mapping[str, float], what: str, now: float
) -> dict[str, Hold]:
    """Agents (or providers) whose spend today reached their ``daily_budget_usd``."""
    until = next_local_midnight(now)
    return {
        name: Hold(
            f"daily budget of {what} {name} exhausted: ${spent.get(name, 0.0):,.2f} of ${cap:,.2f}",
            until,
        )
        for name, cap in caps.items()
        if spent.get(name, 0.0) >= cap
    }

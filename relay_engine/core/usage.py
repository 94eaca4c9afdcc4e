"""Spend rollups: tokens and cost by task, job, agent, provider or day (``relay usage``).

Pure over plain records (read by :func:`relay_engine.store.spend.read_usage`); days are the
operator's local days, the same days a daily budget resets on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Literal

GROUPINGS = ("job", "task", "agent", "provider", "model", "day")
Grouping = Literal["job", "task", "agent", "provider", "model", "day"]


@dataclass(frozen=True)
class UsageRecord:
    """One execution's spend, as the rollup reads it."""

    job_id: str
    task_key: str | None
    agent: str | None
    provider: str | None
    model: str | None
    at: float
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False

    def day(self, tz: tzinfo | None = None) -> str:
        return datetime.fromtimestamp(self.at, tz).astimezone(tz).date().isoformat()


@dataclass
class UsageRow:
    key: str
    executions: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False  # some of the cost is an estimate from the price table
    unpriced: int = 0  # executions that used tokens but have no cost (model without a price)
    models: set[str] = field(default_factory=set)

    def add(self, record: UsageRecord) -> None:
        self.executions += 1
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        self.cached_tokens += record.cached_tokens
        if record.cost_usd is not None:
            self.cost_usd += record.cost_usd
            self.estimated |= record.estimated
        elif record.input_tokens or record.output_tokens:
            self.unpriced += 1
        if record.model:
            self.models.add(record.model)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "executions": self.executions,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "estimated": self.estimated,
            "unpriced_executions": self.unpriced,
            "models": sorted(self.models),
        }


def group_key(record: UsageRecord, by: Grouping, tz: tzinfo | None = None) -> str:
    if by == "day":
        return record.day(tz)
    value = {
        "job": record.job_id,
        "task": record.task_key,
        "agent": record.agent,
        "provider": record.provider,
        "model": record.model,
    }[by]
    return value or "-"


def rollup(
    records: Iterable[UsageRecord], by: Grouping, tz: tzinfo | None = None
) -> list[UsageRow]:
    """Rows by ``by``: days in date order, everything else by cost, highest first."""
    rows: dict[str, UsageRow] = {}
    for record in records:
        key = group_key(record, by, tz)
        rows.setdefault(key, UsageRow(key)).add(record)
    if by == "day":
        return [rows[key] for key in sorted(rows)]
    return sorted(rows.values(), key=lambda r: (-r.cost_usd, -r.input_tokens, r.key))


def total(rows: Iterable[UsageRow]) -> UsageRow:
    overall = UsageRow("total")
    for row in rows:
        overall.executions += row.executions
        overall.input_tokens += row.input_tokens
        overall.output_tokens += row.output_tokens
        overall.cached_tokens += row.cached_tokens
        overall.cost_usd += row.cost_usd
        overall.estimated |= row.estimated
        overall.unpriced += row.unpriced
        overall.models |= row.models
    return overall

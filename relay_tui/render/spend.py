"""Spend as the console writes it: dollars (``~`` when estimated), tokens, budget bars, and
the spend-over-time chart of the Usage screen. Pure: numbers in, strings and Text out."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.text import Text

from relay_engine.core.usage import UsageRecord
from relay_engine.store.read_model.jobs import BudgetView, JobView
from relay_engine.store.read_model.spend import SpendView

BLOCKS = " ▁▂▃▄▅▆▇█"
LEVEL_STATES = {"ok": "SUCCEEDED", "warning": "PARKED", "exhausted": "FAILED"}
"""Budget level -> the state whose theme colour it borrows."""


def money(cost: float, estimated: bool = False) -> str:
    """``$1.23``; below ten cents three decimals where cents would round (``$0.007``,
    ``$0.012``): a short run costs that, and rounding it to a cent would say ``$0.01 of
    $0.01`` for $0.007 of $0.006; ``<$0.001`` for less; ``~`` marks estimates."""
    if cost == 0:
        text = "$0"
    elif cost < 0.001:
        text = "<$0.001"
    elif cost < 0.1 and abs(round(cost, 2) - cost) >= 0.0005:
        text = f"${cost:.3f}"
    else:
        text = f"${cost:,.2f}"
    return f"~{text}" if estimated else text


def tokens_text(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 10_000:
        return f"{count // 1000}k"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)


def spend_text(spend: SpendView) -> str:
    """Dollars when known, else tokens, else nothing (no run has reported spend yet)."""
    if spend.cost_usd:
        return money(spend.cost_usd, spend.estimated)
    if spend.tokens:
        return f"{tokens_text(spend.tokens)} tok"
    return ""


def spend_line(spend: SpendView) -> str:
    """Everything about a spend in one line, for previews and the job view."""
    if not spend.cost_usd and not spend.tokens:
        return "nothing reported yet"
    parts = [money(spend.cost_usd, spend.estimated) if spend.cost_usd else "no cost reported"]
    parts.append(
        f"{tokens_text(spend.input_tokens)} in / {tokens_text(spend.output_tokens)} out"
        + (f" ({tokens_text(spend.cached_tokens)} cached)" if spend.cached_tokens else "")
    )
    parts.append(f"{spend.executions} run" + ("s" if spend.executions != 1 else ""))
    text = " · ".join(parts)
    return text + (" (~ estimated from the price table)" if spend.estimated else "")


def budget_words(job: JobView) -> str:
    """Where the job's spend stands, from the numbers: the engine's own text rounds to the
    cent (``$0.01 of $0.01`` for $0.007 of $0.006)."""
    budget = job.budget
    if budget.level == "none":
        return ""
    parts = []
    if job.budget_usd is not None:
        used = job.spend.cost_usd / job.budget_usd if job.budget_usd else 1.0
        parts.append((used, f"{money(job.spend.cost_usd)} of {money(job.budget_usd)}"))
    if job.budget_tokens is not None:
        used = job.spend.tokens / job.budget_tokens if job.budget_tokens else 1.0
        parts.append((used, f"{job.spend.tokens:,} of {job.budget_tokens:,} tokens"))
    if not parts:
        return budget.text
    text = max(parts, key=lambda part: part[0])[1]
    return f"budget exhausted: {text}" if budget.level == "exhausted" else text


def budget_bar(budget: BudgetView, styles: Mapping[str, str], width: int = 20) -> Text:
    """``████████░░░░ 41%`` in the level's colour (full and red once exhausted)."""
    filled = min(width, round(width * min(budget.fraction, 1.0)))
    style = styles.get(LEVEL_STATES.get(budget.level, ""), "")
    text = Text(end="", no_wrap=True)
    text.append("█" * filled, style=style)
    text.append("░" * (width - filled), style="dim")
    text.append(f" {budget.fraction:>4.0%}", style=style)
    return text


@dataclass(frozen=True)
class Series:
    """Spend per bucket (hour or day), oldest first, with a label per bucket."""

    unit: str  # "hour" | "day"
    values: tuple[float, ...]
    labels: tuple[str, ...]
    estimated: bool


def spend_series(records: Iterable[UsageRecord], now: float, unit: str, count: int) -> Series:
    """The last ``count`` hours or local days, ending with the current one."""
    step = 3600 if unit == "hour" else 86400
    local = time.localtime(now)
    offset = local.tm_gmtoff
    current = int((now + offset) // step)
    values = [0.0] * count
    estimated = False
    for record in records:
        index = count - 1 - (current - int((record.at + offset) // step))
        if 0 <= index < count and record.cost_usd:
            values[index] += record.cost_usd
            estimated |= record.estimated
    fmt = "%H" if unit == "hour" else "%d"
    labels = tuple(
        time.strftime(fmt, time.gmtime((current - count + 1 + i) * step)) for i in range(count)
    )
    return Series(unit, tuple(values), labels, estimated)


def bar_chart(series: Series, height: int, style: str = "") -> list[Text]:
    """Vertical bars in eighth blocks, two columns per bucket, a scale on the left and the
    hour (or day of month) under every third bar."""
    top = max(series.values, default=0.0)
    pad = len(money(top)) + 1
    eighths = [round(value / top * height * 8) if top else 0 for value in series.values]
    lines = []
    for row in range(height):
        floor = (height - 1 - row) * 8
        bars = "".join(BLOCKS[max(0, min(8, units - floor))] * 2 for units in eighths)
        label = money(top) if row == 0 else ""
        line = Text(f"{label:>{pad}}│", style="dim", end="", no_wrap=True)
        line.append(bars, style=style)
        lines.append(line)
    axis = "".join((label if i % 3 == 0 else "  ") for i, label in enumerate(series.labels))
    lines.append(Text(f"{'$0':>{pad}}└{'─' * 2 * len(series.values)}", style="dim", end=""))
    lines.append(Text(f"{'':>{pad}} {axis}", style="dim", end=""))
    return lines


def chart_caption(series: Series) -> str:
    total = sum(series.values)
    span = f"last {len(series.values)} {series.unit}s"
    peak = max(series.values, default=0.0)
    estimated = " (~ partly estimated)" if series.estimated else ""
    return f"Spend per {series.unit}, {span}: {money(total)} in all, peak {money(peak)}{estimated}"

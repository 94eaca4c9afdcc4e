"""The Providers table: each provider (ok or limited, its reset and countdown, work parked on
it) and under it each of its agents with whether it can work and the fix when it cannot, and
under them each account's quota windows as gauges: how much of the window is used against the
``stop_at`` watermark above which no new task starts there, and when the window resets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text

from relay_engine.contracts.time_format import duration, limit_words, reset_words
from relay_engine.core.states import TaskState
from relay_engine.store.read_model.agents import AgentRow
from relay_engine.store.read_model.providers import QuotaView
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.styles import bar, clock_time, short_duration, styled
from relay_tui.widgets.live_table import LiveTable, Row

AGENT_ROW = "agent:"
QUOTA_ROW = "quota:"
QUOTA_WARN = 0.85
"""A window this close to its watermark (as a share of ``stop_at``) shows as a warning."""
AGENT_OK = frozenset({"ready"})
AGENT_WAITING = frozenset({"limited", "unreachable", "budget"})


def agent_style(status: str, styles: Mapping[str, str]) -> str:
    """Ready green; waits that end on their own yellow; what needs the operator red."""
    if status in AGENT_OK:
        return styles.get("ok", "")
    if status in AGENT_WAITING:
        return styles.get("limited", "")
    return styles.get("FAILED", "")


class ProvidersTable(LiveTable):
    """One row per provider, and under it one row per agent with its availability."""

    COLUMNS = (
        ("provider", "Provider/agent", 14),
        ("status", "Status", 14),
        ("reset", "Resets", 6),
        ("in", "In", 5),
        ("parked", "Wait", 4),
        ("running", "Run", 3),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"provider": 1, "status": 3}
    OPTIONAL: ClassVar[Mapping[str, int]] = {"reset": 64, "parked": 54}

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        agents: dict[str, list[AgentRow]] = {}
        for agent in snapshot.agent_rows:
            agents.setdefault(agent.provider, []).append(agent)
        for provider in snapshot.providers:
            limited = provider.status == "limited"
            countdown = duration(provider.reset_at - now) if limited and provider.reset_at else ""
            status = f"{'‖' if limited else '●'} {provider.status}"
            rows.append(
                (
                    provider.provider,
                    (
                        Text(provider.provider, style="bold", end=""),
                        styled(status, provider.status, styles),
                        clock_time(provider.reset_at)[:5] if limited else "",
                        countdown,
                        str(provider.parked),
                        str(provider.running),
                    ),
                )
            )
            rows += [agent_row(a, snapshot, now, styles) for a in agents.pop(provider.provider, [])]
        for rest in agents.values():  # agents of a provider nobody has used yet
            rows += [agent_row(a, snapshot, now, styles) for a in rest]
        if snapshot.quota:  # last: where the pane is short, the gauges scroll out first
            rows.append((QUOTA_ROW, (Text("quota windows", style="bold", end=""), *[""] * 5)))
            rows += [quota_row(q, now, styles) for q in snapshot.quota]
        return rows

    now = 0.0

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.now = now
        self.sync(self.build_rows(snapshot, now, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        now = self.now
        if key == QUOTA_ROW:
            return (
                "quota windows: used against the stop_at watermark, above which no new task starts"
            )
        if key is not None and key.startswith(QUOTA_ROW):
            quota = next((q for q in snapshot.quota if quota_key(q) == key), None)
            return quota_preview(quota, now) if quota else ""
        if key is not None and key.startswith(AGENT_ROW):
            agent = snapshot.agent_row(key.removeprefix(AGENT_ROW))
            return agent_preview(agent, now) if agent else ""
        provider = snapshot.provider(key)
        if provider is None:
            return ""
        if provider.status == "limited":
            reset = f" — {reset_words(provider.reset_at, now)}" if provider.reset_at else ""
            return (
                f"{provider.provider}: {limit_words(provider.source_text, now) or 'limited'}{reset}"
            )
        return f"{provider.provider}: ok"


def agent_row(agent: AgentRow, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> Row:
    waiting = (
        sum(
            1
            for t in snapshot.tasks.values()
            if t.state == TaskState.PARKED and t.waiting_on_provider == agent.id
        )
        if agent.status not in AGENT_OK
        else 0
    )
    running = sum(1 for run in snapshot.runs if run.agent == agent.id)
    name = agent.id + ("" if agent.enabled else " (disabled)")
    until = agent.until if agent.status != "ready" else None
    return (
        f"{AGENT_ROW}{agent.id}",
        (
            Text.assemble(("└ ", "dim"), name, end=""),
            Text(agent.summary, style=agent_style(agent.status, styles), end=""),
            clock_time(until)[:5] if until else "",
            duration(until - now) if until and until > now else "",
            str(waiting) if waiting else "",
            str(running),
        ),
    )


def agent_preview(agent: AgentRow, now: float | None = None) -> str:
    """The fix first: it is what the operator came to this row for."""
    if agent.status == "ready":
        return f"{agent.id} ({agent.provider}): ready"
    fix = f"fix: {agent.fix}" if agent.fix else "no fix needed"
    reason = f" — {limit_words(agent.reason, now)}" if agent.reason else ""
    return f"{agent.id}: {fix}{reason}"


def quota_key(quota: QuotaView) -> str:
    return f"{QUOTA_ROW}{quota.key}:{quota.window}"


def percent(share: float | None) -> str:
    return "?%" if share is None else f"{round(share * 100)}%"


def quota_row(quota: QuotaView, now: float, styles: Mapping[str, str]) -> Row:
    """``└ claude/work five-hour   used ████░ 72%/95%   10:00  1h``: used, then the
    watermark (``stop_at``)."""
    used = quota.utilization
    if quota.holding:
        style = styles.get("FAILED", "")
    elif used is not None and used >= QUOTA_WARN * quota.stop_at:
        style = styles.get("limited", "")
    else:
        style = styles.get("ok", "")
    gauge = Text("used ", style="dim", end="")
    if used is None:
        gauge.append(f"{quota.status.replace('_', ' ')}, no % said", style=style)
    else:
        gauge.append(bar(round(min(used, 1.0) * 100), 100, 5), style=style)
        gauge.append(f" {percent(used)}", style=style)
    gauge.append(f"/{percent(quota.stop_at)}", style="dim")
    name = f"{quota.key} {quota.label}"  # the account: "claude", "claude/work"
    resets = quota.resets_at
    return (
        quota_key(quota),
        (
            Text.assemble(("└ ", "dim"), (name, "italic"), end=""),
            gauge,
            clock_time(resets)[:5] if resets else "",
            short_duration(resets - now) if resets and resets > now else "",
            "",
            "",
        ),
    )


def quota_preview(quota: QuotaView, now: float) -> str:
    """What the gauge says in words: used against the watermark, and the reset."""
    if quota.holding and quota.reason:
        return f"{quota.reason}: no new task starts on {quota.key} until then"
    used = f"{percent(quota.utilization)} used" if quota.utilization is not None else "no % said"
    reset = f" — {reset_words(quota.resets_at, now)}" if quota.resets_at else ""
    return (
        f"{quota.key} {quota.label} window: {used}, new work stops at "
        f"{percent(quota.stop_at)}{reset}"
    )
